"""The declared layer contract (docs/design-notes.md, "Layers") against the tree: every unit has its row, imports
only what its row allows (lazy imports included, `TYPE_CHECKING` ones not), and sits above everything it imports;
the "owns" column is each unit's own docstring."""

from __future__ import annotations

from pathlib import Path

from layers import PACKAGE, Layer, declared, first_sentence, made_from_tree, render, units
from test_import_circles import import_graph


def _violations(edges: set[tuple[str, str]], table: dict[str, Layer]) -> list[str]:
    found = []
    for source, target in sorted(edges):
        row = table.get(source)
        if row is None or target not in row.may_import:
            found.append(f"{source} imports {target}, which its row does not allow")
        elif table[target].floor >= row.floor:
            found.append(f"{source} (floor {row.floor}) imports {target} (floor {table[target].floor}): upward")
    return found


def test_every_unit_has_one_row_and_every_row_a_unit() -> None:
    table = declared()
    assert sorted(table) == units(), "regenerate the table with `python tests/layers.py` and review it"


def test_no_unit_imports_what_its_row_does_not_allow_nor_upward() -> None:
    found = _violations(set(import_graph(PACKAGE)), declared())
    assert not found, "imports outside the layer contract:\n" + "\n".join(found)


def test_every_row_allows_only_units_on_lower_floors() -> None:
    table = declared()
    wrong = [f"{r.unit} -> {other}" for r in table.values() for other in r.may_import if table[other].floor >= r.floor]
    assert not wrong, wrong


def test_the_owns_column_is_each_units_docstring() -> None:
    stale = {u: r.owns for u, r in declared().items() if r.owns != first_sentence(u)}
    assert not stale, (
        f"rows whose 'owns' is not the unit's docstring (regenerate with `python tests/layers.py`): {stale}"
    )


def test_the_check_sees_an_upward_import_and_an_import_its_row_does_not_allow() -> None:
    table = {
        "low": Layer("low", 0, frozenset(), ""),
        "high": Layer("high", 1, frozenset({"low"}), ""),
    }
    assert _violations({("high", "low")}, table) == []
    assert _violations({("low", "high")}, table) == ["low imports high, which its row does not allow"]
    table["low"] = Layer("low", 1, frozenset({"high"}), "")
    assert "upward" in _violations({("low", "high")}, table)[0]


def test_the_table_made_from_the_tree_renders_every_unit(tmp_path: Path) -> None:
    text = render(made_from_tree(set(import_graph(PACKAGE))))
    assert all(f"| `{unit}` |" in text for unit in units())
