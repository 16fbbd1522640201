"""The layering the design asks for, checked on the source: the library never imports the command line."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import infermeter

PACKAGE = Path(infermeter.__file__).parent


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every module `path` imports, at module level or inside a function (lazy imports count), with its line."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def test_the_library_never_imports_the_cli() -> None:
    library = [p for p in PACKAGE.rglob("*.py") if "cli" not in p.relative_to(PACKAGE).parts[:1]]
    library = [p for p in library if p.name != "__main__.py"]  # the entry point that runs the CLI
    assert len(library) > 100
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
        for path in library
        for line, module in imported_modules(path)
        if module == "infermeter.cli" or module.startswith("infermeter.cli.")
    ]
    assert not found, "library modules import the CLI (move what they need out of cli/):\n" + "\n".join(found)


# Files that may branch on a backend's name, with the reason (none: every behaviour is on the backend class).
NAME_BRANCHES_ALLOWED: dict[str, str] = {}


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _is_model_kind(node: ast.expr) -> bool:
    # Model kinds are a vocabulary of their own that shares a word with a backend (`spec.kind == "tflite"`).
    return isinstance(node, ast.Attribute) and node.attr == "kind"


def name_branches(path: Path, names: set[str]) -> Iterator[tuple[int, str]]:
    """Comparisons (==, !=, in, not in) and `.startswith` calls against a registered backend's name in `path`."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
            sides = [node.func.value, *node.args]
        else:
            continue
        if not any(_is_model_kind(side) for side in sides) and any(n in names for s in sides for n in _strings(s)):
            yield node.lineno, ast.unparse(node)


def test_no_branch_on_a_backend_name_outside_the_backends() -> None:
    """Everything about a backend is on its class: no `backend == "openvino"`, `name in ("torch", ...)` or
    `engine.startswith("onnxruntime")` outside `backends/` (and the generation backends' own package)."""
    from infermeter.backends.registry import backend_names

    names = set(backend_names("infer")) | set(backend_names("generate"))
    found, allowed_seen = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(("backends/", "llm/backends/")):
            continue
        for line, text in name_branches(path, names):
            if relative in NAME_BRANCHES_ALLOWED:
                allowed_seen.add(relative)
            else:
                found.append(f"{relative}:{line}: {text}")
    assert not found, "branches on backend names (make them a hook on the backend class):\n" + "\n".join(found)
    stale = sorted(set(NAME_BRANCHES_ALLOWED) - allowed_seen)
    assert not stale, f"allowed files that no longer branch on a backend name (remove them from the list): {stale}"


def test_the_name_branch_check_sees_a_branch(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'def f(case, spec):\n    if case.backend == "openvino":\n        return 1\n'
        '    if spec.kind == "tflite":\n        return 2\n    return name in ("x", "torch")\n'
    )
    assert [line for line, _ in name_branches(module, {"openvino", "torch", "tflite"})] == [2, 6]


FILE_MAX_LINES = 350  # issue 45: small files and small functions, over the whole package
FUNCTION_MAX_LINES = 60  # issue 30 held the CLI to this; issue 45 the library too

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _span(node: ast.AST) -> int:
    assert isinstance(node, ast.stmt) and node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def _nested_span(node: ast.AST) -> int:
    """Lines of the functions and classes nested directly in `node` (at any depth of its statements, not inside
    another function or class)."""
    return sum(
        _span(child) if isinstance(child, _SCOPES) else _nested_span(child) for child in ast.iter_child_nodes(node)
    )


def own_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's own lines: its span (decorators excluded, docstring included) minus the spans of the functions
    and classes nested directly in it, which are measured on their own (a factory of short handlers is short)."""
    return _span(function) - _nested_span(function)


def long_functions(path: Path, limit: int) -> Iterator[tuple[str, int]]:
    """(name, own lines) of every function in `path`, nested ones included, with more than `limit` own lines."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = own_lines(node)
            if lines > limit:
                yield node.name, lines


def long_file(path: Path, limit: int) -> int | None:
    """The line count of `path` when it is over `limit`, else None."""
    lines = len(path.read_text().splitlines())
    return lines if lines > limit else None


def test_no_file_is_longer_than_350_lines() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {lines} lines"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := long_file(path, FILE_MAX_LINES)) is not None
    ]
    assert not found, "files over 350 lines (split them by concept):\n" + "\n".join(found)


def test_no_function_is_longer_than_60_lines() -> None:
    found = [
        f"{path.relative_to(PACKAGE).as_posix()}:{name} has {lines} own lines"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, lines in long_functions(path, FUNCTION_MAX_LINES)
    ]
    assert not found, "functions over 60 lines (split them along a seam; the CLI's work goes to the library):\n" + (
        "\n".join(found)
    )


def test_the_length_checks_see_a_long_function_and_a_long_file(tmp_path: Path) -> None:
    source = tmp_path / "long.py"
    source.write_text("def long():\n" + "    x = 1\n" * 70)
    assert list(long_functions(source, FUNCTION_MAX_LINES)) == [("long", 71)]
    assert long_file(source, FILE_MAX_LINES) is None
    source.write_text("x = 1\n" * 351)
    assert long_file(source, FILE_MAX_LINES) == 351
    assert long_file(source, 351) is None


def test_a_function_is_measured_without_the_functions_and_classes_nested_in_it(tmp_path: Path) -> None:
    handler = "    def handler_{i}():\n" + "        x = 1\n" * 40
    factory = "def factory():\n" + "".join(handler.format(i=i) for i in range(3))
    factory += "    class Holder:\n" + "        y = 2\n" * 40
    factory += "    if True:\n        def in_a_branch():\n" + "            z = 3\n" * 40
    factory += "    return handler_0\n"
    source = tmp_path / "factory.py"
    source.write_text(factory)
    assert list(long_functions(source, FUNCTION_MAX_LINES)) == []  # each part is short, the factory's own 3 lines
    source.write_text(factory.replace("    return handler_0\n", "    w = 0\n" * 60 + "    return handler_0\n"))
    assert list(long_functions(source, FUNCTION_MAX_LINES)) == [("factory", 63)]


WIDE_RECORD_FIELDS = 6  # issue 45: a record wider than this is built by keyword after its first two fields


def _positional_wide_records(source: str) -> list[str]:
    """Dataclasses of more than WIDE_RECORD_FIELDS fields that take more than two of them by position."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        decorators = [ast.unparse(d) for d in node.decorator_list]
        if not any(d.startswith(("dataclass", "dataclasses.dataclass")) for d in decorators):
            continue
        annotated = [
            s for s in node.body if isinstance(s, ast.AnnAssign) and "ClassVar" not in ast.unparse(s.annotation)
        ]
        fields = [s for s in annotated if "KW_ONLY" not in ast.unparse(s.annotation)]
        marker = next((i for i, s in enumerate(annotated) if "KW_ONLY" in ast.unparse(s.annotation)), None)
        keyword_only = any("kw_only=True" in d for d in decorators) or (marker is not None and marker <= 2)
        if len(fields) > WIDE_RECORD_FIELDS and not keyword_only:
            found.append(f"{node.name} ({len(fields)} fields)")
    return found


def test_every_wide_record_is_built_by_keyword_after_its_first_two_fields() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in _positional_wide_records(path.read_text())
    ]
    assert not found, "add `_: KW_ONLY` after the second field (or kw_only=True):\n" + "\n".join(found)


def test_the_wide_record_check_sees_a_positional_one() -> None:
    fields = "".join(f"    f{i}: int\n" for i in range(7))
    plain = f"from dataclasses import dataclass\n@dataclass\nclass Wide:\n{fields}"
    assert _positional_wide_records(plain) == ["Wide (7 fields)"]
    marked = plain.replace("    f2: int\n", "    _: KW_ONLY\n    f2: int\n")
    assert _positional_wide_records(marked) == []
    late = plain.replace("    f5: int\n", "    _: KW_ONLY\n    f5: int\n")
    assert _positional_wide_records(late) == ["Wide (7 fields)"]
