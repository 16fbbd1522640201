"""The memory plan: never two simultaneously alive tensors in overlapping bytes, and never worse than naive."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from graph.onnx_builders import make_model, weight
from infermeter.graph.memory import ALIGNMENT_BYTES, Lifetime, lifetimes, plan_graph_memory, plan_memory, plan_offsets
from infermeter.graph.model import graph_view, infer_shapes


@st.composite
def random_dags(draw: st.DrawFn) -> tuple[list[tuple[list[str], list[str]]], dict[str, int], list[str], list[str]]:
    """Random DAGs in topological order: each step reads 1-3 earlier values and writes 1-2 new ones."""
    graph_inputs = [f"in{i}" for i in range(draw(st.integers(1, 3)))]
    sizes = {name: draw(st.integers(1, 5000)) for name in graph_inputs}
    values = list(graph_inputs)
    steps = []
    for step in range(draw(st.integers(1, 25))):
        reads = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3, unique=True))
        writes = [f"t{step}_{k}" for k in range(draw(st.integers(1, 2)))]
        for name in writes:
            sizes[name] = draw(st.integers(0, 5000))
        values.extend(writes)
        steps.append((reads, writes))
    outputs = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3, unique=True))
    return steps, sizes, graph_inputs, outputs


@settings(max_examples=300, deadline=None)
@given(random_dags())
def test_plan_never_overlaps_live_tensors_and_beats_naive(
    dag: tuple[list[tuple[list[str], list[str]]], dict[str, int], list[str], list[str]],
) -> None:
    steps, sizes, graph_inputs, outputs = dag
    plan = plan_memory(steps, sizes, graph_inputs, outputs)
    placements = plan.placements
    assert {p.lifetime.name for p in placements} == set(sizes)
    for i, a in enumerate(placements):
        assert a.offset % ALIGNMENT_BYTES == 0
        for b in placements[i + 1 :]:
            if a.lifetime.overlaps(b.lifetime) and a.lifetime.size_bytes and b.lifetime.size_bytes:
                assert a.end <= b.offset or b.end <= a.offset, (a, b)
    assert plan.live_peak_bytes <= plan.planned_bytes <= plan.naive_bytes


def test_lifetimes_follow_producers_and_last_readers() -> None:
    steps = [(["x"], ["a"]), (["a"], ["b"]), (["a", "b"], ["c"]), (["c"], ["y"])]
    sizes = dict.fromkeys(("x", "a", "b", "c", "y"), 100)
    spans = {t.name: (t.first, t.last) for t in lifetimes(steps, sizes, ["x"], ["y"])}
    assert spans == {"x": (0, 0), "a": (0, 2), "b": (1, 2), "c": (2, 3), "y": (3, 3)}


def test_greedy_reuses_freed_memory_in_a_chain() -> None:
    # x -> a -> b -> c -> y, all 1 KiB: at most two are alive at once, so two slots serve all five.
    steps = [(["x"], ["a"]), (["a"], ["b"]), (["b"], ["c"]), (["c"], ["y"])]
    plan = plan_memory(steps, dict.fromkeys(("x", "a", "b", "c", "y"), 1024), ["x"], ["y"])
    assert plan.naive_bytes == 5 * 1024
    assert plan.planned_bytes == plan.live_peak_bytes == 2 * 1024


def test_largest_first_fills_gaps_below_other_tensors() -> None:
    big = Lifetime("big", 4096, 0, 1)
    late = Lifetime("late", 4096, 2, 3)
    small = Lifetime("small", 1024, 1, 2)  # alive with both: must sit above them
    offsets = {p.lifetime.name: p.offset for p in plan_offsets([small, late, big])}
    assert offsets == {"big": 0, "late": 0, "small": 4096}


def test_graph_plan_names_the_peak_node() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["wide"], name="expand", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["wide"], ["act"], name="act"),
        helper.make_node("Conv", ["act", "w2"], ["y"], name="project", kernel_shape=[1, 1]),
    ]
    model = make_model(nodes, {"x": (1, 4, 16, 16)}, ["y"], [weight("w", (32, 4, 1, 1)), weight("w2", (4, 32, 1, 1))])
    view = graph_view(infer_shapes(model))
    plan = plan_graph_memory(view)
    wide = 32 * 16 * 16 * 4
    # The Relu holds its 32-channel input and output at once: the peak is there.
    assert view.nodes[plan.peak_step].name == "act"
    assert plan.live_peak_bytes == 2 * wide
    assert set(plan.live_at_peak) == {"wide", "act"}
    assert plan.naive_bytes == 2 * wide + 2 * (4 * 16 * 16 * 4)
    assert plan.planned_bytes < plan.naive_bytes
