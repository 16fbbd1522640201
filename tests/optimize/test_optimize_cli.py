"""`infermeter optimize` end to end on tiny_cnn with real frameworks: every step in the results and the report, a
backend crashing midway, resume after an interrupt, constraints nothing meets (exit 3), bad input (exit 2), and
`infermeter serve DIR` starting the chosen artifact."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import advised_case, load_json, run_cli

STEPS = ["baseline", "export", "fp32", "tuning", "int8", "half", "shapes", "batching", "finalists", "advise"]
# Short measurements: these tests check the procedure, never the figures. The finalists' group times each for 3x
# --min-time, in bursts of --min-time / --rounds: six bursts, so one slowed by other work cannot end it in round 1.
QUICK = ["--iterations", "10", "--min-time", "0.05", "--warmup", "1", "--max-time", "1", "--rounds", "2"]
QUICK += ["--threads", "1", "--target-ci", "0"]


def _journal(folder: Path) -> dict[str, Any]:
    journal: dict[str, Any] = load_json(folder / "results.json")["optimize"]
    return journal


@pytest.fixture(scope="module")
def optimized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One full run: torch, onnxruntime and a `null` backend that crashes after three inferences."""
    folder = tmp_path_factory.mktemp("opt") / "out"
    args = ["optimize", "tiny_cnn", "-o", str(folder), "-b", "torch,onnxruntime,null"]
    args += ["-O", "null.crash=run", "-O", "null.after=3", "--budget-minutes", "4", *QUICK]
    return folder, run_cli(*args, timeout=400)


@pytest.mark.slow
def test_every_step_is_in_results_and_report(optimized: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, proc = optimized
    assert proc.returncode == 0, proc.stderr[-3000:]
    journal = _journal(folder)
    assert [s["key"] for s in journal["steps"]] == STEPS
    results = load_json(folder / "results.json")
    ids = {c["id"] for c in results["cases"]}
    for step in journal["steps"]:
        assert step["status"] in ("done", "skipped", "failed"), step
        assert step["why"]
        assert set(step["case_ids"]) <= ids
        # A step that measured nothing says why.
        assert step["case_ids"] or step["skipped"] or step["key"] in ("export", "advise"), step
    report = (folder / "report.html").read_text()
    for step in journal["steps"]:
        assert f'id="step-{step["key"]}"' in report
        assert step["title"] in report
    by_step = {s["key"]: s for s in journal["steps"]}
    assert len(by_step["baseline"]["case_ids"]) == 1
    assert any(c["status"] == "pass" for c in by_step["export"]["details"]["checks"])
    assert (folder / "artifacts" / "model.fp32.onnx").is_file()
    assert (folder / "artifacts" / "model.int8.onnx").is_file()
    int8 = [c for c in results["cases"] if c["id"] in by_step["int8"]["case_ids"]]
    assert int8 and all(c["precision"] == "int8" and "accuracy" in c for c in int8 if c["status"] == "ok")
    fp32_ok = [c for c in results["cases"] if c["id"] in by_step["fp32"]["case_ids"] and c["status"] == "ok"]
    assert fp32_ok and all(c["parity"]["passed"] for c in fp32_ok)
    # The pick, runner-up and fallback are named, and the pick is a measured case.
    advice = by_step["advise"]["details"]
    assert advice["pick"] in ids and advice["fallback"] in ids
    assert "Pick" in report and 'id="verdict"' in report


@pytest.mark.slow
def test_a_backend_crashing_midway_is_recorded_and_the_run_goes_on(
    optimized: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, proc = optimized
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = load_json(folder / "results.json")["cases"]
    null = [c for c in cases if c["backend"] == "null"]
    assert null and null[0]["status"] == "crashed" and "killed by SIGSEGV" in null[0]["error"]
    # The null options reached only the null backend; later steps still measured other backends.
    assert all("null.crash" not in c["options"] for c in cases if c["backend"] != "null")
    journal = _journal(folder)
    later = [s for s in journal["steps"] if s["key"] in ("int8", "shapes")]
    assert any(s["case_ids"] for s in later)
    skipped = [s for step in journal["steps"] for s in step["skipped"] if s["what"].startswith("null")]
    assert any("fp32 case failed" in s["reason"] for s in skipped)  # nothing is stacked on a crashed backend
    assert "crashed" in proc.stderr


@pytest.mark.slow
def test_the_finalists_are_measured_again_together_and_decide_the_pick(
    optimized: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, proc = optimized
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = {s["key"]: s for s in _journal(folder)["steps"]}
    finalists = steps["finalists"]
    details = finalists["details"]
    assert finalists["status"] == "done" and len(details["originals"]) == len(details["copies"]) >= 2
    copies = [advised_case(folder, original) for original in details["originals"]]
    assert [c["id"] for c in copies] == details["copies"] == finalists["case_ids"]
    assert all(c["options"]["optimize.round"] == "finalists" for c in copies)
    # Raced (the latency objective): a finalist decided slower than another stops being timed and is out; the
    # others ran in the same interleaved rounds to the end.
    dropped = details["dropped"]
    kept = [c for c in copies if c["status"] == "ok" and c["id"] not in dropped]
    rounds = {len(c["timing"]["rounds_p50_ms"]) for c in kept}
    assert len(rounds) == 1 and rounds.pop() >= 2
    assert all("dropped in the race, decided slower than" in why for why in dropped.values())
    advice = steps["advise"]["details"]
    # The pick is one of the finalists, named by its original case (what deploy and serve load), and it is the
    # fastest of those left in the race as measured together.
    assert advice["pick"] in details["originals"]
    fastest = min(kept, key=lambda c: c["latency_ms"]["p50"])
    assert advised_case(folder, advice["pick"])["id"] == fastest["id"]
    assert "optimize.round" not in load_json(folder / "deploy.json")["chosen"]["options"]
    assert any("measured again together" in line for line in advice["explanation"])


@pytest.mark.slow
def test_deploy_files_quote_the_measured_figures(optimized: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, proc = optimized
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = load_json(folder / "deploy.json")
    pick = advised_case(folder, manifest["chosen"]["case_id"])
    assert manifest["chosen"]["measured"]["p50_ms"] == pick["latency_ms"]["p50"]
    deploy_md = (folder / "DEPLOY.md").read_text()
    assert f"{pick['latency_ms']['p50']:.3g}" in deploy_md
    assert "Cold start" in deploy_md and "Shapes" in deploy_md and "infermeter serve" in deploy_md
    if manifest["chosen"]["model_is_file"]:
        assert (folder / manifest["chosen"]["model"]).is_file()
    assert manifest["fallback"]["backend"] == "onnxruntime" and manifest["fallback"]["precision"] == "fp32"


@pytest.mark.slow
def test_serve_dir_starts_the_chosen_configuration(optimized: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    from infermeter.serve.server import spawn_server

    folder, proc = optimized
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = load_json(folder / "deploy.json")
    server = spawn_server([str(folder)], ready_timeout_s=120)
    try:
        with urllib.request.urlopen(f"{server.url}/v2/models/{_served_name(manifest)}", timeout=10) as response:
            metadata = json.loads(response.read())
        params = metadata["parameters"]
        assert params["backend"] == manifest["chosen"]["backend"]
        assert params["precision"] == manifest["chosen"]["backend_precision"]
        assert params["max_batch"] == manifest["serving"]["max_batch"]
        body = json.dumps(
            {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 32, 32], "data": [0.5] * 3072}]}
        ).encode()
        request = urllib.request.Request(
            f"{server.url}/v2/models/{_served_name(manifest)}/infer",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        assert answer["outputs"][0]["shape"] == [1, 10]
    finally:
        server.stop()


def _served_name(manifest: dict[str, Any]) -> str:
    chosen = manifest["chosen"]
    return Path(chosen["model"]).stem if chosen["model_is_file"] else str(chosen["model"])


@pytest.mark.slow
def test_constraints_nothing_meets_exit_3_with_the_binding_one(
    optimized: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    folder, proc = optimized
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    before = load_json(copy / "results.json")["cases"]
    args = ["optimize", "tiny_cnn", "-o", str(copy), "-b", "torch,onnxruntime,null"]
    args += ["-O", "null.crash=run", "-O", "null.after=3", "--max-p99-ms", "0.000001", *QUICK]
    again = run_cli(*args, timeout=300)
    assert again.returncode == 3, again.stderr[-3000:]
    assert "--max-p99-ms 1e-06 is binding" in again.stdout
    assert "the best case" in again.stdout  # the closest candidate is named with its figure
    # Resumed: every case measured before is still there, unchanged, and none was measured twice.
    after = load_json(copy / "results.json")["cases"]
    assert [c["id"] for c in after[: len(before)]] == [c["id"] for c in before]
    assert len({c["id"] for c in after}) == len(after)
    assert "No configuration meets the constraints" in (copy / "report.html").read_text()


@pytest.mark.slow
def test_interrupt_then_rerun_resumes(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    args = [sys.executable, "-m", "infermeter", "optimize", "tiny_cnn", "-o", str(folder), "-b", "torch,onnxruntime"]
    # No finalists' group: a resumed run that goes on to it is test_a_budget_that_fits_resumes_and_prices_the_pick's
    args += [*QUICK, "--budget-minutes", "3", "--finalists", "0"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = folder / "results.json"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        if results.is_file() and len(load_json(results)["cases"]) >= 1:
            break
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, (process.returncode, stderr[-2000:])
    assert "rerun the same command to resume" in stderr
    first = {c["id"]: (c["started"], c["duration_s"]) for c in load_json(results)["cases"]}
    assert first
    rerun = run_cli(*args[3:], timeout=400)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming" in rerun.stderr
    final = load_json(results)["cases"]
    for case in final:
        if case["id"] in first:
            assert (case["started"], case["duration_s"]) == first[case["id"]]  # not re-measured
    assert len({c["id"] for c in final}) == len(final) > len(first)


def test_bad_input_exits_2(tmp_path: Path) -> None:
    missing = run_cli("optimize", "no_such_model", "-o", str(tmp_path / "a"))
    assert missing.returncode == 2 and "unknown model" in missing.stderr
    calib = run_cli("optimize", "tiny_cnn", "--calib", str(tmp_path / "nope.npz"), "-o", str(tmp_path / "b"))
    assert calib.returncode == 2 and "--calib" in calib.stderr
    backend = run_cli("optimize", "tiny_cnn", "-b", "warp-drive", "-o", str(tmp_path / "c"))
    assert backend.returncode == 2 and "unknown backend" in backend.stderr
    serve = run_cli("serve", str(tmp_path))
    assert serve.returncode == 2 and "deploy.json" in serve.stderr
