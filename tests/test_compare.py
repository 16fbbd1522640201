"""compare: identical files, a real 1.5x slowdown, noise, drift between rounds, unreplicated files (warning and noise
floor), precision mismatch, pairing, and the CLI exit codes. Replicates are round medians, never raw samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from crafted_results import ENVIRONMENT, draw_samples, make_case, make_results
from infermeter.compare.pairing import pair_cases
from infermeter.compare.verdict import compare_cases, compare_results
from infermeter.core.validation import parse_threshold
from infermeter.results.io import write_results
from infermeter.results.schema import CaseResult

FAST = ["--warmup", "2", "--iterations", "300", "--min-time", "0", "--max-time", "5", "--target-ci", "0"]


def _rounds(case: CaseResult, count: int = 10, drift: list[float] | None = None) -> CaseResult:
    """Give `case` round medians as interleaved rounds would: its samples cut into `count` consecutive rounds,
    each round's samples scaled by `drift[r]` (the machine's speed in that round) when given."""
    chunks = np.array_split(np.asarray(case.timing.samples_ms), count)
    factors = drift or [1.0] * count
    case.timing.samples_ms = [float(v) for chunk, f in zip(chunks, factors, strict=True) for v in chunk * f]
    case.timing.rounds_p50_ms = [float(np.median(chunk * f)) for chunk, f in zip(chunks, factors, strict=True)]
    return case


def _base() -> list[CaseResult]:
    return [
        _rounds(make_case("torch", 1, 2.0, seed=1, sigma=0.1)),
        _rounds(make_case("onnxruntime", 1, 1.0, seed=2, sigma=0.1)),
    ]


def test_identical_files_show_no_change() -> None:
    comparison = compare_results(make_results(_base()), make_results(_base()))
    assert [c.verdict for c in comparison.changes] == ["not significant", "not significant"]
    assert all(c.ratio == 1.0 for c in comparison.changes)
    assert comparison.regressions == [] and comparison.env_differences == []


def test_a_real_slowdown_is_significant_and_fails_the_gate() -> None:
    rng = np.random.default_rng(7)
    base = _rounds(make_case("torch", 1, 2.0, seed=1, sigma=0.1))
    slowed = [v * 1.5 * rng.lognormal(0, 0.05) for v in base.timing.samples_ms]  # 1.5x with fresh noise
    new = _rounds(make_case("torch", 1, samples=slowed))
    change = compare_cases(base, new, "p50")
    assert change.verdict == "slower" and change.regression and change.replication == "rounds"
    assert change.replicates == (10, 10)
    assert change.ratio == pytest.approx(1.5, rel=0.03)
    assert change.ratio_ci95 is not None and change.ratio_ci95[0] > 1.4 and change.ratio_ci95[1] < 1.6
    assert change.p_value is not None and change.p_value < 1e-8
    throughput = compare_cases(base, new, "throughput")
    assert throughput.verdict == "slower" and throughput.ratio is not None and throughput.ratio < 0.7


def test_same_distribution_twice_is_not_significant() -> None:
    # Two independent draws of the same noisy (lognormal, sigma 0.3) case.
    base = _rounds(make_case("null", 1, samples=draw_samples(2.0, 400, 0.3, seed=11)))
    new = _rounds(make_case("null", 1, samples=draw_samples(2.0, 400, 0.3, seed=12)))
    for metric in ("p50", "p99", "throughput"):
        change = compare_cases(base, new, metric)
        assert change.verdict == "not significant", (metric, change)
        assert not change.regression


def test_a_small_significant_change_within_the_threshold_does_not_fail() -> None:
    base = _rounds(make_case("torch", 1, samples=draw_samples(2.0, 2000, 0.02, seed=1)))
    new = _rounds(make_case("torch", 1, samples=draw_samples(2.06, 2000, 0.02, seed=2)))  # 3% slower, very tight
    change = compare_cases(base, new, "p50", threshold=0.05)
    assert change.verdict == "slower" and not change.regression
    assert any("within the 5% threshold" in note for note in change.notes)


def test_faster_is_reported_but_never_a_regression() -> None:
    base = _rounds(make_case("torch", 1, samples=draw_samples(2.0, 400, 0.05, seed=1)))
    new = _rounds(make_case("torch", 1, samples=draw_samples(1.0, 400, 0.05, seed=2)))
    change = compare_cases(base, new, "p50")
    assert change.verdict == "faster" and not change.regression


def test_machine_drift_between_rounds_is_not_read_as_a_change() -> None:
    # Same code twice on a machine whose speed moves ±15% from round to round; the second run happened to catch
    # slower rounds on average (+4%). Each raw sample set is tight (sigma 0.02, 1000 samples), so a test on raw
    # samples calls that a certain change; the rounds' spread shows it is the machine.
    rng = np.random.default_rng(5)
    base = _rounds(
        make_case("torch", 1, samples=draw_samples(2.0, 1000, 0.02, seed=1)), drift=[*rng.uniform(0.85, 1.15, 10)]
    )
    slower_rounds = [*rng.uniform(0.85, 1.15, 10) * 1.04]
    new = _rounds(make_case("torch", 1, samples=draw_samples(2.0, 1000, 0.02, seed=2)), drift=slower_rounds)
    from scipy.stats import mannwhitneyu

    assert (
        mannwhitneyu(base.timing.samples_ms, new.timing.samples_ms).pvalue < 1e-3
    )  # what the raw-sample test concluded
    change = compare_cases(base, new, "p50", threshold=0.0)
    assert change.verdict == "not significant" and not change.regression
    assert change.p_value is not None and change.p_value > 0.01


def test_an_unreplicated_comparison_warns_and_respects_the_known_noise() -> None:
    base = _rounds(
        make_case("torch", 1, samples=draw_samples(2.0, 1000, 0.02, seed=1)),
        drift=[1.0, 1.1, 0.92, 1.05, 0.95, 1.08, 0.9, 1.0, 1.12, 0.97],
    )
    single = make_case("torch", 1, samples=draw_samples(2.2, 400, 0.02, seed=2))  # 10% slower, one run, no rounds
    change = compare_cases(base, single, "p50", threshold=0.05)
    assert change.unreplicated and change.p_value is None and change.ratio_ci95 is None
    assert change.noise_floor is not None and change.noise_floor > 0.10  # rounds spread ~8%: floor ~ 2.8 sd
    assert change.verdict == "unreplicated" and not change.regression
    assert any("noise floor" in note for note in change.notes)
    # No side replicated: the noise is unknown, the threshold alone decides, and the comparison says so.
    bare = compare_results(make_results([make_case("torch", 1, 2.0, seed=1)]), make_results([single]))
    assert bare.changes[0].regression and bare.changes[0].noise_floor is None
    assert any("cannot separate a change from machine noise" in w for w in bare.warnings)


def test_different_effective_precisions_are_refused() -> None:
    base = make_case("openvino", 1, 2.0, seed=1)
    new = make_case("openvino", 1, 1.0, seed=2, effective="bf16")
    change = compare_cases(base, new)
    assert change.verdict == "precision differs" and change.ratio is None
    allowed = compare_cases(base, new, allow_mixed_precision=True)
    assert allowed.verdict == "faster" and "compared anyway" in allowed.notes[0]


def test_pairing_by_id_then_by_variables() -> None:
    base = [make_case("torch", 1, 1.0), make_case("null", 1, 1.0, case_id="null-a"), make_case("ort", 8, 1.0)]
    new = [make_case("torch", 1, 1.0), make_case("null", 1, 1.0, case_id="null-b"), make_case("ov", 1, 1.0)]
    pairs, only_base, only_new = pair_cases(base, new)
    assert [(b.backend, how) for b, _, how in pairs] == [("torch", "id"), ("null", "variables")]
    assert [c.backend for c in only_base] == ["ort"] and [c.backend for c in only_new] == ["ov"]


def test_a_changed_model_is_paired_across_models_only_when_each_side_has_one() -> None:
    def side(model: str) -> list[CaseResult]:
        return [make_case(b, 1, 1.0, model=model, case_id=f"{model}-{b}") for b in ("ort", "ov")]

    pairs, only_base, only_new = pair_cases(side("m.py:small"), side("m.py:big"))
    assert [(b.backend, n.model, how) for b, n, how in pairs] == [
        ("ort", "m.py:big", "model"),
        ("ov", "m.py:big", "model"),
    ]
    assert not only_base and not only_new
    change = compare_cases(pairs[0][0], pairs[0][1], paired_by="model")
    assert change.notes[0] == "model changed, was m.py:small"
    two_models = [*side("m.py:small"), make_case("trt", 1, 1.0, model="other", case_id="other-trt")]
    pairs, only_base, _ = pair_cases(two_models, side("m.py:big"))
    assert not pairs and len(only_base) == 3


def test_parse_threshold() -> None:
    assert parse_threshold("5%") == pytest.approx(0.05)
    assert parse_threshold("0.1") == pytest.approx(0.1)
    assert parse_threshold("10") == pytest.approx(0.1)
    with pytest.raises(ValueError):
        parse_threshold("fast")


def test_cli_exit_codes_and_environment_warning(tmp_path: Path) -> None:
    base_path, same_path, slow_path = tmp_path / "base.json", tmp_path / "same.json", tmp_path / "slow.json"
    write_results(base_path, make_results(_base()))
    write_results(same_path, make_results(_base()))
    rng = np.random.default_rng(3)
    slow = _base()
    slow[0] = _rounds(
        make_case("torch", 1, samples=[v * 1.5 * rng.lognormal(0, 0.05) for v in slow[0].timing.samples_ms])
    )
    other = {**ENVIRONMENT, "frameworks": {**ENVIRONMENT["frameworks"], "torch": "2.12.0"}}
    write_results(slow_path, make_results(slow, environment=other))

    same = run_cli("compare", str(base_path), str(same_path))
    assert same.returncode == 0, same.stderr
    assert "not significant" in same.stdout and "no significant regression" in same.stdout
    assert "unreplicated" not in same.stdout and "compare --rerun" in same.stdout  # the rounds caveat
    slower = run_cli("compare", str(base_path), str(slow_path), "--threshold", "5%")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert "REGRESSION" in slower.stdout and "1 regression(s)" in slower.stdout
    assert "environments differ" in slower.stdout and "torch 2.13.0 vs 2.12.0" in slower.stdout
    lenient = run_cli("compare", str(base_path), str(slow_path), "--threshold", "60%")
    assert lenient.returncode == 0, lenient.stdout
    bad = run_cli("compare", str(base_path), str(slow_path), "--threshold", "lots")
    assert bad.returncode == 2 and "--threshold" in bad.stderr


def test_cli_says_when_a_comparison_is_unreplicated(tmp_path: Path) -> None:
    base_path, new_path = tmp_path / "base.json", tmp_path / "new.json"
    write_results(base_path, make_results([make_case("torch", 1, 2.0, seed=1)]))
    write_results(new_path, make_results([make_case("torch", 1, 2.02, seed=2)]))
    proc = run_cli("compare", str(base_path), str(new_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = " ".join(proc.stdout.split())
    assert "this comparison cannot separate a change from machine noise" in text
    assert "use compare --rerun" in text


@pytest.mark.slow
def test_two_real_null_runs_do_not_fail_the_gate(tmp_path: Path) -> None:
    # The same noisy synthetic case measured twice by the real harness: whatever the machine's load does to the
    # two runs, a 50% threshold must not be crossed by noise alone.
    paths = []
    for seed in (1, 2):
        out = tmp_path / f"run{seed}.json"
        options = ["-O", "null.latency_ms=1", "-O", "null.dist=lognormal", "-O", "null.sigma=0.2"]
        proc = run_cli("bench", "tiny_cnn", "-b", "null", "--batch", "1", *FAST, *options, "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        paths.append(str(out))
    proc = run_cli("compare", *paths, "--threshold", "50%")
    assert proc.returncode == 0, proc.stdout
    assert "paired" not in proc.stdout  # same options, so the same case id
    assert "unreplicated" in proc.stdout  # one backend: no rounds
