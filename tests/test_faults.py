"""Fault injection, one of each kind (benchmarks/faults.py runs hundreds at random points): after the fault the
results file is valid JSON, every case finished before it is present exactly once, a bare `--resume` completes
exactly the original plan, and no worker process is left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from fault_harness import SweepSpec, run_trial

# Two cases per comparison group, so that both the interleaved and (for `hang`) the sequential path are hit.
INTERLEAVED = SweepSpec(batches=(1, 2), precisions=("fp32", "fp16"))
SEQUENTIAL = SweepSpec(batches=(1, 2, 3))


@pytest.mark.parametrize(
    ("fault", "sweep", "min_done", "point_s"),
    [
        ("sigint", SEQUENTIAL, 1, 0.1),
        ("sigint2", INTERLEAVED, 0, 0.8),
        ("sigterm", SEQUENTIAL, 1, 0.2),
        ("sigkill", SEQUENTIAL, 1, 0.1),
        ("kill_worker", SEQUENTIAL, 0, 0.0),
        ("hang", SEQUENTIAL, 0, 0.5),
        ("readonly", SEQUENTIAL, 1, 0.0),
        ("corrupt", SEQUENTIAL, 1, 0.0),
    ],
)
def test_fault_keeps_every_invariant(
    tmp_path: Path, fault: str, sweep: SweepSpec, min_done: int, point_s: float
) -> None:
    outcome = run_trial(tmp_path, fault, point_s, sweep, min_done)
    assert outcome.ok, outcome
