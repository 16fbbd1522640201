"""The sequential decision (`compare.decision`) on synthetic, seeded streams of paired rounds with known effects:
log-normal noise per side, a machine drift common to both sides of a round (it cancels in the ratio) plus a small
within-round trend, and occasional outliers on either side. Over many seeds the rates must hold their bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infermeter.compare.decision import (
    MLPERF_P99_MIN_SAMPLES,
    DecisionParams,
    SequentialTest,
    decide,
    fixed_horizon_rounds,
    gated_metric,
)
from infermeter.core.errors import UsageError

SD_PER_SIDE = 0.04  # log-normal noise of one side's round median (4%: a noisy 2-core VM)
SEEDS = 800
PARAMS = DecisionParams(alpha=0.05, beta=0.05, delta=0.05, budget_rounds=200)


def stream(seed: int, effect: float, rounds: int = 400, outliers: float = 0.02) -> np.ndarray:
    """Per-round log(new / base) of a NEW `effect` slower (a fraction) than BASE."""
    rng = np.random.default_rng(seed)
    machine = np.cumsum(rng.normal(0.0, 0.02, rounds))  # the machine's speed drifts; both sides of a round share it
    trend = rng.normal(0.0, 0.005, rounds) * np.where(np.arange(rounds) % 2, 1.0, -1.0)  # ABBA: alternating sign
    base = machine + rng.normal(0.0, SD_PER_SIDE, rounds) + trend / 2
    new = machine + math.log1p(effect) + rng.normal(0.0, SD_PER_SIDE, rounds) - trend / 2
    hit, on_new = rng.random(rounds) < outliers, rng.random(rounds) < 0.5
    spikes = rng.exponential(0.2, rounds)  # a burst that caught a hiccup: 20% slower on average
    new = new + np.where(hit & on_new, spikes, 0.0)
    base = base + np.where(hit & ~on_new, spikes, 0.0)
    return new - base


def outcomes(effect: float, params: DecisionParams = PARAMS) -> tuple[dict[str, int], list[int]]:
    """Counts of outcome[:direction] over the seeds, and the rounds each used."""
    counts: dict[str, int] = {}
    rounds = []
    for seed in range(SEEDS):
        decision = decide(stream(seed, effect).tolist(), params)
        key = decision.outcome + (f":{decision.direction}" if decision.direction else "")
        counts[key] = counts.get(key, 0) + 1
        rounds.append(decision.rounds_used + decision.rounds_set_aside)
    return counts, rounds


def test_false_alarms_at_no_change_stay_within_alpha() -> None:
    counts, _ = outcomes(0.0)
    alarms = counts.get("different:slower", 0) + counts.get("different:faster", 0)
    assert alarms / SEEDS <= PARAMS.alpha + 0.01
    assert counts.get("same", 0) / SEEDS >= 0.9


def test_false_slowdowns_at_the_edge_of_same_stay_within_alpha() -> None:
    # At δ₀ itself, the upward test's own false-alarm level is α/2; held to α with a tolerance.
    counts, _ = outcomes(PARAMS.checked().same_within)
    assert counts.get("different:slower", 0) / SEEDS <= PARAMS.alpha + 0.01


@pytest.mark.parametrize("effect", [0.05, 0.10])
def test_slowdowns_of_delta_or_more_are_detected(effect: float) -> None:
    counts, _ = outcomes(effect)
    assert counts.get("different:slower", 0) / SEEDS >= 1 - PARAMS.beta - 0.02
    assert counts.get("different:faster", 0) == 0


def test_a_speedup_is_decided_faster() -> None:
    counts, _ = outcomes(-0.05)
    assert counts.get("different:faster", 0) / SEEDS >= 1 - PARAMS.beta - 0.02


def test_median_rounds_at_most_half_the_fixed_horizon() -> None:
    rounds = [r for effect in (0.0, 0.05, 0.10) for r in outcomes(effect)[1]]
    fixed = fixed_horizon_rounds(PARAMS, SD_PER_SIDE * math.sqrt(2))
    assert fixed >= 20  # the comparison means something only when the fixed test needs many rounds
    assert float(np.median(rounds)) <= fixed / 2


def test_disturbed_rounds_are_set_aside_and_not_counted() -> None:
    clean = stream(3, 0.0).tolist()[:40]
    # Every third round is disturbed and carries a huge slowdown: counted, it would decide "slower".
    values = [5.0 if i % 3 == 0 else x for i, x in enumerate(clean)]
    flags = [i % 3 == 0 for i in range(len(values))]
    decision = decide(values, PARAMS, flags)
    assert decision.outcome == "same"
    assert decision.rounds_set_aside == sum(flags[: decision.rounds_used + decision.rounds_set_aside])
    assert decision.rounds_set_aside > 0
    counted = decide(values, PARAMS)
    assert counted.outcome != "same"


def test_tiny_budget_ends_unknown_with_rounds_and_interval() -> None:
    params = DecisionParams(delta=0.05, min_rounds=2, budget_rounds=3)
    decision = decide(stream(1, 0.025).tolist(), params)  # halfway between δ₀ and δ: three rounds cannot tell
    assert decision.outcome == "unknown"
    assert decision.rounds_used == 3
    assert "budget of 3 rounds" in decision.stopped_by
    assert decision.interval is not None and decision.interval[0] < decision.interval[1]


def test_it_stops_at_the_decision_and_ignores_later_rounds() -> None:
    test = SequentialTest(DecisionParams(min_rounds=4))
    values = [math.log(1.3) + 0.01 * (-1) ** i for i in range(50)]
    decided = [i for i, x in enumerate(values) if test.add(x) is not None]
    assert decided[0] == 3  # the 4th round: min_rounds reached, and a 30% slowdown is plain
    assert test.decision is not None and test.decision.slower
    assert test.decision.rounds_used == 4


def test_the_record_states_the_rule_and_its_parameters() -> None:
    decision = decide(stream(2, 0.10).tolist(), PARAMS)
    record = decision.to_dict()
    for key in ("rule", "alpha", "beta", "delta", "delta_same", "rounds_used", "rounds_set_aside", "stopped_by"):
        assert key in record
    assert record["rule"].startswith("GSPRT")
    assert record["delta_same"] == pytest.approx(0.01)
    assert "GSPRT" in decision.summary() and "slower" in decision.summary()


@pytest.mark.parametrize(
    ("params", "flag", "accepted"),
    [
        (DecisionParams(delta=0.0), "--threshold", "> 0"),
        (DecisionParams(delta=-0.05), "--threshold", "> 0"),
        (DecisionParams(alpha=0.0), "--alpha", "(0, 0.5)"),
        (DecisionParams(alpha=0.5), "--alpha", "(0, 0.5)"),
        (DecisionParams(beta=0.7), "--beta", "(0, 0.5)"),
        (DecisionParams(min_rounds=10, budget_rounds=5), "--budget-rounds", "at least --rounds (10)"),
        (DecisionParams(delta=0.05, delta_same=0.05), "--same-within", "[0, --threshold)"),
    ],
)
def test_bad_parameters_name_the_flag_and_the_range(params: DecisionParams, flag: str, accepted: str) -> None:
    with pytest.raises(UsageError) as caught:
        SequentialTest(params)
    assert str(caught.value).startswith(flag)
    assert accepted in str(caught.value)


def test_p99_is_not_gated_below_mlperf_sample_size() -> None:
    metric, note = gated_metric("p99", MLPERF_P99_MIN_SAMPLES - 1)
    assert metric == "p50" and note is not None and "662" in note
    assert gated_metric("p50", 10) == ("p50", None)
