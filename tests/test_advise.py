"""advise on crafted results: constraints respected, parity failures out, Pareto front, binding constraint named."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_cli
from crafted_results import accuracy_field, make_case, make_results, parity_field
from infermeter.advise.pick import Constraints, advise
from infermeter.report.pareto import pareto_front
from infermeter.results.io import write_results


def _cases() -> list:
    return [
        # fastest, but slow to load
        make_case("alpha", 1, 0.5, seed=1, peak_mb=400, load_s=12.0),
        # fastest that loads quickly, but its outputs are wrong
        make_case("beta", 1, 0.6, seed=2, peak_mb=150, load_s=0.5, extra=parity_field(False)),
        make_case("gamma", 1, 0.8, seed=3, peak_mb=200, load_s=1.0, extra=parity_field(True)),
        make_case(
            "delta",
            8,
            3.0,
            seed=4,
            peak_mb=120,
            load_s=1.0,
            extra=accuracy_field(0.91, 2.5),
        ),
        make_case("epsilon", 1, 2.0, seed=5, peak_mb=90, load_s=0.2),
        make_case("zeta", 1, 0.0, status="crashed", error="worker died (SIGSEGV)"),
    ]


def test_constraints_are_respected_and_the_pick_explained() -> None:
    advice = advise(_cases(), Constraints(max_load_s=5.0), "latency")
    assert advice.pick is not None and advice.pick.backend == "gamma"
    for case in advice.ranked:
        assert case.loading.load_s is not None and case.loading.load_s <= 5.0
    assert [c.backend for c in advice.ranked] == ["gamma", "epsilon", "delta"]
    text = "\n".join(advice.explanation)
    assert "Not tiny_cnn alpha fp32 b1 static" in text and "breaks --max-load-s 5 (2.4x the limit)" in text
    reasons = {e.case.backend: e.reasons for e in advice.excluded}
    assert reasons["beta"] == ["its outputs failed the parity check against the reference"]
    assert reasons["zeta"] == ["crashed: worker died (SIGSEGV)"]
    assert "Accuracy is unverified" in text


def test_objectives_rank_differently() -> None:
    throughput = advise(_cases(), Constraints(max_load_s=5.0), "throughput")
    assert throughput.pick is not None and throughput.pick.backend == "delta"  # batch 8: 8 / 3 ms
    assert any("top1 0.91 (2.50% drop" in line for line in throughput.explanation)
    memory = advise(_cases(), Constraints(), "memory")
    assert memory.pick is not None and memory.pick.backend == "epsilon"


def test_accuracy_drop_limit_excludes_only_cases_with_a_larger_drop() -> None:
    advice = advise(_cases(), Constraints(max_load_s=5.0, max_accuracy_drop_pct=1.0), "throughput")
    assert advice.pick is not None and advice.pick.backend != "delta"
    assert "gamma" in [c.backend for c in advice.ranked]  # no accuracy data: kept, flagged as unverified


def test_pareto_front_is_correct() -> None:
    advice = advise(_cases(), Constraints(), "latency")
    # alpha: lowest latency; delta: highest throughput; epsilon: lowest memory; gamma is beaten by alpha on
    # latency and throughput, but not on memory (200 < 400 MB) → also on the front.
    assert sorted(c.backend for c in advice.pareto) == ["alpha", "delta", "epsilon", "gamma"]
    assert pareto_front([(1, 10), (2, 5), (1, 10), (3, 20)], (False, True)) == [0, 2, 3]
    assert pareto_front([(1.0, 1.0), (2.0, 0.5)], (False, True)) == [0]


def test_nothing_fits_names_the_binding_constraint() -> None:
    advice = advise(_cases(), Constraints(max_p99_ms=0.1, max_load_s=5.0), "latency")
    assert advice.pick is None and advice.ranked == []
    binding = advice.binding[0]
    assert binding.flag == "--max-p99-ms" and binding.alone
    assert binding.best_case.backend == "gamma"  # best P99 among cases that meet --max-load-s and parity
    assert binding.gap_pct == pytest.approx((binding.best_value - 0.1) / 0.1 * 100)
    assert "--max-p99-ms 0.1 is binding" in advice.explanation[1]


def test_cli_exit_codes(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_results(path, make_results(_cases()))
    ok = run_cli("advise", str(path), "--max-load-s", "5")
    assert ok.returncode == 0, ok.stderr
    assert "Pick tiny_cnn gamma fp32 b1 static" in ok.stdout and "parity check" in ok.stdout
    none = run_cli("advise", str(path), "--max-p99-ms", "0.1", "--min-throughput", "100000")
    assert none.returncode == 3
    assert "is binding" in none.stdout
    bad = run_cli("advise", str(path), "--max-p99-ms", "-1")
    assert bad.returncode == 2 and "--max-p99-ms" in bad.stderr


def test_synthetic_cases_are_never_picked() -> None:
    fake = make_case("null", 1, 0.01, seed=9)  # the fastest by far, and measures no model
    fake.synthetic = True
    advice = advise([*_cases(), fake], Constraints(max_load_s=5.0), "latency")
    assert advice.pick is not None and advice.pick.backend == "gamma"
    assert fake not in advice.ranked
    reasons = next(e.reasons for e in advice.excluded if e.case is fake)
    assert reasons == ["null is a synthetic backend: it runs no model"]


def test_the_pick_and_a_runner_up_within_noise_are_said_to_be_indistinguishable() -> None:
    pick = make_case("onnxruntime", p50_ms=1.00)
    runner = make_case("openvino", p50_ms=1.01, seed=1)
    pick.timing.rounds_p50_ms = [1.00, 1.20, 0.90, 1.05]
    runner.timing.rounds_p50_ms = [1.02, 1.17, 0.92, 1.06]
    text = " ".join(advise([pick, runner]).explanation)
    assert "cannot be told apart" in text and "4 interleaved rounds" in text
    runner.timing.rounds_p50_ms = [1.50, 1.81, 1.34, 1.58]
    text = " ".join(advise([pick, runner]).explanation)
    assert "margin over the runner-up: 1.5" in text
