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
