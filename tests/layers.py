"""The layer contract of infermeter (docs/design-notes.md, "Layers"): the declared table, read back, and the table
made from the tree (each unit's floor and what it imports, its first docstring sentence), so the test can hold one
against the other. `python tests/layers.py` prints the table made from the tree, to paste into the notes."""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTES = ROOT / "docs" / "design-notes.md"
PACKAGE = ROOT / "src" / "infermeter"
START, END = "<!-- layers:start -->", "<!-- layers:end -->"


@dataclass(frozen=True)
class Layer:
    """One row: a unit of `infermeter` (a subpackage or a top-level module), its floor, the units it may import,
    and what it owns (its docstring's first sentence)."""

    unit: str
    floor: int
    may_import: frozenset[str]
    owns: str


def units() -> list[str]:
    """Every top-level unit of the package (subpackages and modules, the package's own `__init__` left out)."""
    found = [p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
    found += [p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
    return sorted(found)


def first_sentence(unit: str) -> str:
    """The first sentence of a unit's docstring, on one line (a pipe escaped for the table)."""
    path = PACKAGE / unit / "__init__.py" if (PACKAGE / unit).is_dir() else PACKAGE / f"{unit}.py"
    text = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return (match.group(1) if match else text).replace("|", "\\|")


def declared() -> dict[str, Layer]:
    """The table between the markers in the design notes, by unit."""
    text = NOTES.read_text()
    table = text[text.index(START) + len(START) : text.index(END)]
    rows: dict[str, Layer] = {}
    for line in table.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        unit, floor, may, owns = cells
        imports = frozenset(name.strip(" `") for name in may.split(",") if name.strip(" `—-"))
        rows[unit.strip("`")] = Layer(unit.strip("`"), int(floor), imports, owns)
    return rows


def made_from_tree(edges: set[tuple[str, str]]) -> list[Layer]:
    """The table the tree implies: each unit may import what it imports now; floors from that order."""
    imports: dict[str, set[str]] = {unit: set() for unit in units()}
    for source, target in edges:
        imports.setdefault(source, set()).add(target)
    floors: dict[str, int] = {}

    def floor(unit: str, seen: tuple[str, ...] = ()) -> int:
        if unit not in floors:
            if unit in seen:
                raise ValueError(f"import circle through {unit}")
            floors[unit] = 1 + max((floor(other, (*seen, unit)) for other in imports[unit]), default=-1)
        return floors[unit]

    rows = [Layer(unit, floor(unit), frozenset(imports[unit]), first_sentence(unit)) for unit in imports]
    return sorted(rows, key=lambda row: (row.floor, row.unit))


def render(rows: list[Layer]) -> str:
    """The markdown table of `rows`."""
    lines = ["| unit | floor | may import | owns |", "|---|---:|---|---|"]
    for row in rows:
        may = ", ".join(f"`{name}`" for name in sorted(row.may_import)) or "—"
        lines.append(f"| `{row.unit}` | {row.floor} | {may} | {row.owns} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from test_import_circles import import_graph

    print(render(made_from_tree(set(import_graph(PACKAGE)))))
