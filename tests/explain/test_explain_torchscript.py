"""TorchScript's per-unit profile, the pure parts: an operator's module from its module hierarchy, and where the
time of what the profiler cannot scope (operators optimize_for_inference rewrote, kernels it does not record) goes,
placed by the order of the eager run's module calls."""

from __future__ import annotations

from infermeter.explain.engine_torchscript import (
    LAYOUT_UNIT,
    CallOrder,
    TracedOp,
    TracedRun,
    module_of_hierarchy,
    run_times,
    traced_runs,
)

TYPES = {
    "": "Net",
    "stem": "Sequential",
    "stem.0": "Conv2d",
    "stem.1": "BatchNorm2d",
    "stem.2": "ReLU",
    "layers": "ModuleList",
    "layers.0": "EncoderLayer",
    "fc": "Linear",
}
# One eager run: stem (conv, bn, relu), then fc; the ModuleList is never called itself.
TOKENS = [
    ("", True),
    ("stem", True),
    *[(f"stem.{i}", entering) for i in range(3) for entering in (True, False)],
    ("stem", False),
    ("fc", True),
    ("fc", False),
    ("", False),
]


def test_an_operators_module_comes_from_its_hierarchy() -> None:
    conv = "TOP(Net)::forward.stem(Sequential)::forward.0(Conv2d)::forward."
    assert module_of_hierarchy(conv, TYPES) == "stem.0"
    assert module_of_hierarchy("TOP(Net)::forward.", TYPES) is None
    # A ModuleList's entry is named by its index alone: found under the list, by its type.
    assert module_of_hierarchy("TOP(Net)::forward.0(EncoderLayer)::forward.", TYPES) == "layers.0"
    assert module_of_hierarchy("TOP(Net)::forward.stem(Sequential)::forward.9(Conv2d)::forward.", TYPES) == "stem"


def _op(name: str, start: float, end: float, module: str | None) -> TracedOp:
    return TracedOp(name, start, end - start, module)


def test_a_gap_goes_to_the_modules_the_eager_run_called_in_it() -> None:
    # optimize_for_inference: a layout conversion, the convolution unrecorded (a gap), the ReLU scoped, the Linear
    # rewritten into a matmul with no scope.
    run = TracedRun(
        0.0,
        160.0,
        [
            _op("aten::to_mkldnn", 0.0, 10.0, None),
            _op("aten::relu_", 100.0, 110.0, "stem.2"),
            _op("aten::matmul", 120.0, 150.0, None),
        ],
    )
    times = run_times(run, CallOrder(TOKENS, {"stem.2"}))
    assert times == {
        (LAYOUT_UNIT,): 10.0,
        ("stem.0", "stem.1"): 90.0,  # the gap: the convolution and its folded BatchNorm
        ("stem.2",): 10.0,
        ("fc", ""): 50.0,  # after the last scoped operator (the matmul, the gaps around it): fc and the model
    }
    assert sum(times.values()) == run.end_us - run.start_us


def test_an_unscoped_operator_before_a_scoped_one_joins_it() -> None:
    # An operator with no scope may be the next module's own code, rewritten: one unit with the modules skipped.
    run = TracedRun(0.0, 100.0, [_op("aten::empty", 5.0, 10.0, None), _op("aten::relu_", 80.0, 90.0, "stem.2")])
    times = run_times(run, CallOrder(TOKENS, {"stem.2"}))
    assert times[("stem.0", "stem.1", "stem.2")] == 90.0


def test_frozen_without_optimize_every_module_keeps_its_time() -> None:
    run = TracedRun(
        0.0,
        100.0,
        [
            _op("aten::_convolution", 2.0, 60.0, "stem.0"),
            _op("aten::relu_", 62.0, 70.0, "stem.2"),
            _op("aten::linear", 71.0, 99.0, "fc"),
        ],
    )
    times = run_times(run, CallOrder(TOKENS, {"stem.0", "stem.2", "fc"}))
    assert times[("stem.0",)] == 60.0  # its 2 µs before it, then its own 58
    assert times[("stem.1",)] == 2.0  # folded into the convolution: only the gap before the ReLU
    assert times[("stem.2",)] == 8.0
    assert times[("fc",)] == 29.0 and times[("",)] == 1.0


def test_the_runs_are_the_outermost_forward_operators() -> None:
    def event(name: str, ts: float, dur: float, hierarchy: str = "") -> dict[str, object]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "args": {"Module Hierarchy": hierarchy}}

    conv = "TOP(Net)::forward.stem(Sequential)::forward.0(Conv2d)::forward."
    trace = {
        "traceEvents": [
            event("aten::equal", 0.0, 1.0),  # outside any run: left out
            event("forward", 10.0, 50.0, "TOP(Net)::forward."),
            event("aten::_convolution", 12.0, 20.0, conv),
            event("aten::thnn_conv2d", 13.0, 18.0, conv),  # inside the convolution: its own work
            event("aten::matmul", 40.0, 10.0, "TOP(Net)::forward."),
            event("forward", 70.0, 20.0, "TOP(Net)::forward."),
        ]
    }
    first, second = traced_runs(trace, TYPES)
    assert (first.start_us, first.end_us, second.start_us) == (10.0, 60.0, 70.0)
    assert [(op.name, op.module) for op in first.ops] == [("aten::_convolution", "stem.0"), ("aten::matmul", None)]
    assert second.ops == []
