"""tune-batching's pick decided against its runner-up on paired rounds (`load.tune_race`): the rounds' rule on
seeded synthetic throughputs (the decision itself is `compare.decision`'s, calibrated in tests/test_decision.py),
and the race run for real through the CLI against two served policies."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from infermeter.load.tune import BatchPolicy, PolicyResult
from infermeter.load.tune_race import race_outcome, race_rounds


def _stream(pick_rate: float, other_rate: float, seed: int, drift: bool = True):  # type: ignore[no-untyped-def]
    """`measure(side)` of two policies on a drifting machine: every run 3% noise, the machine's speed wandering
    by up to a third over the rounds (it hits both sides of a round alike)."""
    rng = np.random.default_rng(seed)
    calls = {"n": 0}

    def measure(side: int) -> float:
        calls["n"] += 1
        speed = 1.0 + (0.33 * math.sin(calls["n"] / 7) if drift else 0.0)
        return (pick_rate, other_rate)[side] * speed * float(rng.lognormal(0.0, 0.03))

    return measure


@pytest.mark.parametrize("seed", range(5))
def test_a_runner_up_ten_percent_faster_takes_the_pick(seed: int) -> None:
    decision = race_rounds(_stream(100.0, 110.0, seed))
    assert decision.outcome == "different" and decision.direction == "faster", decision.summary()
    race = race_outcome(PolicyResult(BatchPolicy(4, 2, 1)), PolicyResult(BatchPolicy(8, 2, 1)), decision)
    assert race.swapped and race.pick.policy.max_batch == 8 and "it becomes the pick" in race.line()


@pytest.mark.parametrize("seed", range(5))
def test_a_slower_runner_up_leaves_the_pick_and_an_equal_one_is_the_same(seed: int) -> None:
    slower = race_rounds(_stream(100.0, 85.0, seed))
    assert slower.outcome == "different" and slower.direction == "slower"
    same = race_rounds(_stream(100.0, 100.0, seed))
    assert same.outcome in ("same", "unknown") and same.rounds_used <= 20  # never a false "different" here
    race = race_outcome(PolicyResult(BatchPolicy(4, 2, 1)), PolicyResult(BatchPolicy(8, 2, 1)), same)
    assert not race.swapped and race.pick.policy.max_batch == 4


def test_failed_runs_are_set_aside_and_the_budget_ends_unknown() -> None:
    decision = race_rounds(lambda side: math.nan)
    assert decision.outcome == "unknown" and decision.rounds_set_aside == 20 and decision.rounds_used == 0


def test_the_cli_races_the_pick_and_records_the_decision_on_its_point(tmp_path: Path) -> None:
    out = tmp_path / "tune.json"
    result = run_cli(
        "tune-batching", "tiny_cnn", "-b", "null", "-O", "null.latency_ms=5", "-O", "null.wait=sleep",
        "--slo-p99-ms", "2000", "--max-batch", "1,4", "--max-delay-ms", "2", "--duration", "0.5",
        "--concurrency", "4", "--no-check", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "recommendation: --max-batch 4" in result.stdout  # batches of 4 at 5 ms each beat one at a time
    assert "paired rounds against the runner-up: b4 d2ms w1 stands: the runner-up is slower" in result.stdout
    picks = [c for c in json.loads(out.read_text())["cases"] if c["tune"]["pick"]]
    assert len(picks) == 1 and picks[0]["tune"]["runner_up"] == "b1 d0ms w1"
    race = picks[0]["tune"]["race"]
    assert race["outcome"] == "different" and race["direction"] == "slower" and race["rounds_used"] >= 6
