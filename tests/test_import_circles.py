"""No import circle between the packages of infermeter: its top-level units (each subpackage, each top-level
module) must import each other in layers. Every import counts, lazy ones (inside a function) included, except
those under `if TYPE_CHECKING:`, which never run. There is no exception: a piece two units share moves below both
(see the layout in docs/design-notes.md)."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import infermeter

PACKAGE = Path(infermeter.__file__).parent


def _is_type_checking(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and "TYPE_CHECKING" in ast.unparse(test)


def _imports(node: ast.AST, module: str) -> Iterator[tuple[int, str]]:
    """Modules imported anywhere under `node` (`module`: the file's dotted name, `pkg.__init__` for a package's
    own file, to resolve relative imports)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _imports(other, module)
            continue
        if isinstance(child, ast.Import):
            yield from ((child.lineno, alias.name) for alias in child.names)
        elif isinstance(child, ast.ImportFrom):
            base = module.rsplit(".", child.level)[0] if child.level else ""
            name = ".".join(filter(None, [base, child.module or ""]))
            yield child.lineno, name
            if name == "infermeter":  # `from infermeter import errors` imports the unit `errors`
                yield from ((child.lineno, f"infermeter.{alias.name}") for alias in child.names)
        yield from _imports(child, module)


def unit_of(module: str) -> str | None:
    """The top-level unit of a dotted module name inside infermeter (None outside it, or for the package itself)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "infermeter" and len(parts) > 1 else None


def import_graph(package: Path) -> dict[tuple[str, str], list[str]]:
    """(importer unit, imported unit) -> the `file:line` of each import between two different units."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts == ("__init__.py",):
            continue  # importing any unit runs it anyway: its own imports are no layer of their own
        source = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        module = ".".join([package.name, *relative.with_suffix("").parts])  # `pkg.__init__` for a package
        for line, name in _imports(ast.parse(path.read_text(), str(path)), module):
            target = unit_of(name)
            if target is None or target == source:
                continue
            if (package / target).is_dir() or (package / f"{target}.py").is_file():  # not `infermeter.__version__`
                edges[(source, target)].append(f"{relative}:{line}")
    return edges


def circles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan's algorithm), each sorted."""
    following: dict[str, list[str]] = defaultdict(list)
    for source, target in sorted(edges):
        following[source].append(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in following[unit]:
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == unit:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for unit in sorted(following):
        if unit not in index:
            visit(unit)
    return found


def test_no_import_circle_between_the_units_of_infermeter() -> None:
    graph = import_graph(PACKAGE)
    assert len({unit for edge in graph for unit in edge}) > 20
    remaining = circles(set(graph))
    described = [
        "\n".join(
            [" -> ".join(component)]
            + [f"  {a} -> {b}: {', '.join(graph[(a, b)])}" for a, b in sorted(graph) if {a, b} <= set(component)]
        )
        for component in remaining
    ]
    assert not remaining, "import circles between units (move the shared piece below both):\n" + "\n".join(described)


def test_the_circle_check_counts_lazy_imports_and_skips_type_checking(tmp_path: Path) -> None:
    package = tmp_path / "infermeter"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("def f():\n    from infermeter.high import g\n")
    (package / "high.py").write_text(
        "from typing import TYPE_CHECKING\nfrom infermeter.low import f\n"
        "if TYPE_CHECKING:\n    from infermeter.other import T\n"
    )
    (package / "other.py").write_text("from . import high\n")
    graph = import_graph(package)
    assert set(graph) == {("low", "high"), ("high", "low"), ("other", "high")}
    assert graph[("low", "high")] == ["low/__init__.py:2"]
    assert circles(set(graph)) == [["high", "low"]]


def file_graph(package: Path) -> set[tuple[str, str]]:
    """(importer, imported) between the files of `package`, by dotted module name (a package by its own name);
    `from pkg import module` counts as importing that module. Lazy imports count, `TYPE_CHECKING` ones do not."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        name = ".".join([package.name, *parts]).removesuffix(".__init__")
        modules[name] = path
    edges = set()
    for name, path in modules.items():
        own = f"{name}.__init__" if path.name == "__init__.py" else name
        tree = ast.parse(path.read_text(), str(path))
        for _, imported in _imports(tree, own):
            parts = imported.split(".")
            target = next(
                (".".join(parts[:cut]) for cut in range(len(parts), 0, -1) if ".".join(parts[:cut]) in modules), None
            )
            if target is not None and target != name:
                edges.add((name, target))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                edges.update(
                    (name, f"{node.module}.{a.name}") for a in node.names if f"{node.module}.{a.name}" in modules
                )
    return {(a, b) for a, b in edges if a != b}


def test_no_import_circle_between_the_files_of_infermeter() -> None:
    remaining = circles(file_graph(PACKAGE))
    assert not remaining, (
        "import circles between files (move the shared piece into a module of its own):\n"
        + "\n".join(" -> ".join(component) for component in remaining)
    )


def test_the_file_circle_check_sees_a_lazy_circle_inside_one_unit(tmp_path: Path) -> None:
    package = tmp_path / "infermeter"
    (package / "unit").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "unit" / "__init__.py").write_text("")
    (package / "unit" / "a.py").write_text("from infermeter.unit import b\n")
    (package / "unit" / "b.py").write_text("def f():\n    from infermeter.unit.a import x\n")
    (package / "unit" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from infermeter.unit import a\n"
    )
    assert circles(file_graph(package)) == [["infermeter.unit.a", "infermeter.unit.b"]]
