"""Generation cases through the one plan and sweep (issue 30 item 4, issue 33 item 7): the plan stored in the
results file, Ctrl-C then a bare `--resume`, interleaved rounds across GGUF levels with paired speedups, the
interference of other processes recorded in every case, and the precision stop rule."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import load_json, run_cli
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import ResultsError
from infermeter.llm.backends.base import GenerateCase
from infermeter.llm.generation_metrics import SLO
from infermeter.llm.plan import GenerationMatrix, generation_plan
from infermeter.llm.runner import GenerationRunner, execute_generate_case
from infermeter.llm.sweep import GenerationPlan, read_generation_plan, store_generation_plan
from infermeter.measure.planfile import plan_from_dict
from infermeter.measure.stoprule import run_until_stopped
from infermeter.models.resolve import resolve_model
from infermeter.results.schema import Interference, ResultsFile

QUIET = ["--threads", "1"]
# Real sleeps (fake.wall): 3 requests of about 0.15 s per case, so that the sweep can be interrupted mid-way.
SLOW = ["-b", "fake", "-O", "fake.wall=on", "-O", "fake.prefill_ms=40", "-O", "fake.decode_ms=20"]
SWEEP = ["llm", "bench", "tiny-llama", "--batch", "1,2,3,4", "--prompt-len", "8", "--gen-len", "6",
         "--requests", "3", "--warmup", "0", *SLOW, *QUIET]  # fmt: skip


def _expected_ids() -> list[str]:
    options = (("fake.decode_ms", "20"), ("fake.prefill_ms", "40"), ("fake.wall", "on"))
    return [
        GenerateCase("tiny-llama", "fake", prompt_len=8, gen_len=6, batch=batch, threads=1, options=options).id
        for batch in (1, 2, 3, 4)
    ]


def _interrupted(out: Path) -> list[dict[str, object]]:
    """Start SWEEP, Ctrl-C it once its first case is saved: the cases saved."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", *SWEEP, "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(load_json(out)["cases"]) >= 1:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert f"--resume {out}" in " ".join(stderr.split())
    cases: list[dict[str, object]] = load_json(out)["cases"]
    return cases


def test_a_generation_sweep_interrupted_by_ctrl_c_resumes_with_a_bare_resume(tmp_path: Path) -> None:
    out = tmp_path / "gen.json"
    saved = _interrupted(out)
    assert 1 <= len(saved) < 4
    plan = load_json(out)["plan"]
    assert plan["task"] == "generate" and plan["matrix"]["batches"] == [1, 2, 3, 4]
    refused = run_cli("llm", "bench", "--resume", str(out), "--gen-len", "9")
    assert refused.returncode == 2 and "--gen-len" in refused.stderr and "would change it" in refused.stderr
    resumed = run_cli("llm", "bench", "--resume", str(out), timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{4 - len(saved)} of 4 planned case(s) remain" in resumed.stderr
    data = load_json(out)
    assert [c["id"] for c in data["cases"]] == _expected_ids()  # each planned case once, in plan order
    assert data["cases"][: len(saved)] == saved  # what was measured before the interrupt is kept, not re-measured
    assert all(c["status"] == "ok" and c["generate"]["succeeded"] == 3 * c["batch"] for c in data["cases"])
    assert data["resumed"][0]["remaining"] == 4 - len(saved) and data["command"][1:] == [*SWEEP, "-o", str(out)]
    again = run_cli("llm", "bench", "--resume", str(out), timeout=120)
    assert again.returncode == 0 and "0 of 4 planned case(s) remain" in again.stderr


def test_gguf_levels_of_one_model_run_in_interleaved_rounds_with_interference_and_paired_speedups(
    tmp_path: Path,
) -> None:
    out = tmp_path / "levels.json"
    proc = run_cli(
        "llm", "bench", "tiny-llama:q8_0,tiny-llama:q4_k_m", "-b", "fake", "--prompt-len", "8",
        "--gen-len", "4", "--requests", "4", *QUIET, "-o", str(out), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    base, level = load_json(out)["cases"]
    assert [base["model"], level["model"]] == ["tiny-llama:q8_0", "tiny-llama:q4_k_m"]
    for case in (base, level):
        assert case["status"] == "ok" and case["generate"]["succeeded"] == 4
        timing = case["timing"]
        assert len(timing["rounds_p50_ms"]) == 4  # one request per case per round, the rounds alternating
        assert timing["interference"] is not None and timing["interference"]["wall_s"] > 0
        assert timing["interference"]["cpus"] > 0
    # Same scripted timings: the paired speedup over the first level is exactly 1 (fake clock).
    paired = level["timing"]["paired"]
    assert paired["baseline_id"] == base["id"] and paired["ratio"] == pytest.approx(1.0)
    assert paired["rounds"] == 4
    # Said under the table: the paired figure, or no speedup when other work disturbed either level.
    said = "no difference [1.00–1.00] against" if "interference" not in proc.stdout else "no speedup against"
    assert f"tiny-llama:q4_k_m fake b1: {said} tiny-llama:q8_0 fake b1" in proc.stdout


def test_a_busy_process_beside_a_generation_case_is_recorded_and_warned_about(tmp_path: Path) -> None:
    out = tmp_path / "busy.json"
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        proc = run_cli(
            "llm", "bench", "tiny-llama", *SLOW, "--prompt-len", "8", "--gen-len", "6",
            "--requests", "4", "--warmup", "0", *QUIET, "-o", str(out), timeout=300,
        )  # fmt: skip
    finally:
        burner.kill()
        burner.wait()
    assert proc.returncode == 0, proc.stderr
    case = load_json(out)["cases"][0]
    assert case["timing"]["interference"]["other_share"] > 0.1
    assert "interference" in {w["code"] for w in case["warnings"]}
    assert "warning interference" in proc.stdout  # said under the table, not only kept in the file


class _BusyMeter:
    """A CPU meter that reads other processes using one of two CPUs during every burst."""

    def snapshot(self) -> None:
        return None

    def between(self, before: object, after: object, wall_s: float) -> Interference:
        return Interference(wall_s, 2.0, wall_s, wall_s, 0.0, None)


def test_the_runner_records_interference_and_warns_about_it() -> None:
    case = GenerateCase("m", "fake", prompt_len=8, gen_len=5, requests=3, warmup=0)
    runner = GenerationRunner(case)
    runner._meter = _BusyMeter()  # type: ignore[assignment]
    assert runner.load()
    result = runner.finish(run_until_stopped(runner, case.settings))
    assert result.timing.interference is not None and result.timing.interference.other_share == pytest.approx(0.5)
    assert [w.code for w in result.warnings if w.code == "interference"] == ["interference"]
    quiet = execute_generate_case(case)
    assert quiet.timing.interference is not None and quiet.timing.iterations == 3


def test_the_precision_stop_rule_judges_the_requests() -> None:
    exact = GenerateCase("m", "fake", prompt_len=8, gen_len=5, requests=2, warmup=0)
    assert execute_generate_case(exact).timing.iterations == 2  # no precision target: exactly --requests
    # A 1% target on the P50's interval: a median's order-statistic interval needs 6 requests.
    precise = GenerateCase(
        "m",
        "fake",
        prompt_len=8,
        gen_len=5,
        requests=2,
        warmup=0,
        measure=MeasureSettings(min_time_s=0, target_ci=0.01),
    )
    result = execute_generate_case(precise)
    assert result.timing.iterations == 6 and result.timing.target_ci == 0.01
    # --max-time wins over --requests (on the fake clock, each request takes 10 + 4 × 2 = 18 ms).
    capped = GenerateCase(
        "m",
        "fake",
        prompt_len=8,
        gen_len=5,
        requests=50,
        warmup=0,
        measure=MeasureSettings(min_time_s=0, max_time_s=0.1),
    )
    short = execute_generate_case(capped)
    assert short.timing.iterations == 6 and "max_time_reached" in {w.code for w in short.warnings}
    assert "6 of 50 requests" in next(w.message for w in short.warnings if w.code == "max_time_reached")


def test_the_generation_plan_round_trips_and_the_inference_reader_names_it(tmp_path: Path) -> None:
    matrix = GenerationMatrix(
        models=("tiny-llama:q8_0", "other.gguf", "tiny-llama:q4_k_m"), backends=("fake", "llama-cpp"), batches=(1, 2),
        prompt_len=8, gen_len=4, requests=3, warmup=0, threads=2, options=(("fake.decode_ms", "3"),),
        measure=MeasureSettings(min_time_s=0.0, target_ci=0.02, rounds=3), slo=SLO(500.0, None),
    )  # fmt: skip
    results = ResultsFile("now", {})
    store_generation_plan(results, GenerationPlan(matrix, ("infermeter", "bench"), isolate=False))
    back = read_generation_plan(ResultsFile("now", {}, extra=json.loads(json.dumps(results.extra))), tmp_path)
    assert back.matrix == matrix and back.isolate is False
    items = generation_plan(matrix)
    # The levels of tiny-llama are consecutive (one comparison group per batch), the other model after them.
    assert [(i.case.model, i.case.batch, i.case.backend) for i in items[:4]] == [
        ("tiny-llama:q8_0", 1, "fake"), ("tiny-llama:q8_0", 1, "llama-cpp"),
        ("tiny-llama:q4_k_m", 1, "fake"), ("tiny-llama:q4_k_m", 1, "llama-cpp"),
    ]  # fmt: skip
    assert len({i.case.group_key for i in items[:4]}) == 1 and items[4].case.group_key != items[0].case.group_key
    assert items[0].case.options == (("fake.decode_ms", "3"),) and items[1].case.options == ()
    with pytest.raises(ResultsError, match="holds a generation plan: resume it with `infermeter llm bench --resume "):
        plan_from_dict(results.extra["plan"], tmp_path, resolve_model)
