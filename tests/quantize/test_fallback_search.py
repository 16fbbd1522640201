"""The FP32-fallback search as pure logic over a scoring callback: bisection, shrink, operator-type table, cap."""

from __future__ import annotations

from infermeter.quantize.fallback.search import Layer, Verdict, find_fallback


def _layers(count: int, types: dict[int, str] | None = None) -> list[Layer]:
    return [Layer(f"n{i}", (types or {}).get(i, "MatMul"), i) for i in range(count)]


def _needs(*names: str):  # type: ignore[no-untyped-def]
    calls: list[frozenset[str]] = []

    def evaluate(keep: frozenset[str]) -> Verdict:
        calls.append(keep)
        return Verdict(set(names) <= keep, len(keep))

    return evaluate, calls


def test_bisection_finds_exactly_the_two_culprits_in_few_evaluations() -> None:
    evaluate, calls = _needs("n5", "n40")
    result = find_fallback(_layers(64), evaluate)
    assert [layer.name for layer in result.kept] == ["n5", "n40"]
    assert result.verdict.meets and not result.full.meets and not result.capped
    assert result.evaluations == len(set(calls)) and result.evaluations < 40  # 2^64 subsets, a handful tried


def test_range_kept_layers_start_kept_and_the_shrink_drops_the_needless_ones() -> None:
    evaluate, _ = _needs("n3")
    result = find_fallback(_layers(10), evaluate, range_kept=["n3", "n7"])
    assert result.range_kept == ("n3", "n7")
    assert [layer.name for layer in result.kept] == ["n3"]  # n7 was flagged but is not needed


def test_operator_type_table_narrows_the_search_to_one_type() -> None:
    types = {2: "LayerNorm", 9: "LayerNorm", 15: "LayerNorm"}
    evaluate, _ = _needs("n9")
    result = find_fallback(_layers(20, types), evaluate)
    table = {row.op_type: row for row in result.type_table}
    assert table["LayerNorm"].layers == 3 and table["LayerNorm"].verdict.meets
    assert not table["MatMul"].verdict.meets
    assert [(layer.name, layer.op_type, layer.position) for layer in result.kept] == [("n9", "LayerNorm", 9)]


def test_full_precision_within_budget_keeps_nothing() -> None:
    result = find_fallback(_layers(8), lambda keep: Verdict(True))
    assert result.kept == () and result.evaluations == 1


def test_cap_is_reported_with_the_best_set_so_far() -> None:
    evaluate, _ = _needs(*(f"n{i}" for i in range(0, 60, 3)))  # 20 culprits spread out: a long search
    result = find_fallback(_layers(60), evaluate, max_evaluations=6)
    assert result.capped and result.evaluations == 6
    assert any("capped" in note for note in result.notes)
    assert result.verdict.meets  # the smallest meeting set seen (here: everything)


def test_unreachable_budget_is_said() -> None:
    result = find_fallback(_layers(5), lambda keep: Verdict(False))
    assert not result.reachable and result.kept == ()
    assert "every layer in FP32" in result.notes[0]
