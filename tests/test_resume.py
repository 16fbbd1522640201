"""`bench --resume FILE` replays the plan stored in FILE: the reported case (Ctrl-C, then a bare `--resume`),
flags that would change the plan, `--resume-extend`, and broken files that must be refused and left untouched."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import load_json, run_cli
from fault_harness import FAST, QUIET, SweepSpec
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import ResultsError
from infermeter.measure.plan import Matrix
from infermeter.measure.planfile import StoredPlan, plan_from_dict, plan_to_dict
from infermeter.measure.scenarios import LATENCY
from infermeter.models.resolve import resolve_model

SWEEP = SweepSpec(batches=(1, 2, 3, 4))


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[str]]:
    """One sweep Ctrl-C'ed after its first case, shared by the tests (each resumes a copy)."""
    return _interrupted(tmp_path_factory.mktemp("original"))


def _copy(original: tuple[Path, list[str], list[str]], tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    out = tmp_path / "int.json"
    shutil.copyfile(original[0], out)
    return out, original[1], original[2]


def _interrupted(tmp_path: Path, sweep: SweepSpec = SWEEP, done: int = 1) -> tuple[Path, list[str], list[str]]:
    """Start `sweep`, Ctrl-C it once `done` cases are saved: (file, its command line, the ids saved)."""
    out = tmp_path / "int.json"
    args = [*sweep.args(), "-o", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(load_json(out)["cases"]) >= done:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert f"--resume {out}" in " ".join(stderr.split())  # rich wraps long lines
    return out, args, [c["id"] for c in load_json(out)["cases"]]


def test_bare_resume_finishes_exactly_the_original_plan(original, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, args, saved = _copy(original, tmp_path)
    assert 1 <= len(saved) < 4
    plan = load_json(out)["plan"]
    assert plan["command"][1:] == args and plan["parts"][0]["batches"] == [1, 2, 3, 4]
    resumed = run_cli("bench", "--resume", str(out), "--no-history", "--no-roofline", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{4 - len(saved)} of 4 planned case(s) remain" in resumed.stderr
    data = load_json(out)
    ids = [c["id"] for c in data["cases"]]
    assert ids == SWEEP.expected_ids()  # each planned case once, in plan order; no default-model cases
    assert ids[: len(saved)] == saved
    assert {c["model"] for c in data["cases"]} == {"tiny_cnn"}
    assert data["command"][1:] == args  # the original command is kept...
    assert [r["command"][1:4] for r in data["resumed"]] == [["bench", "--resume", str(out)]]  # ...with the history
    assert data["resumed"][0]["remaining"] == 4 - len(saved)
    again = run_cli("bench", "--resume", str(out), "--no-history", "--no-roofline", timeout=120)
    assert again.returncode == 0 and "0 of 4 planned case(s) remain" in again.stderr
    assert [c["id"] for c in load_json(out)["cases"]] == ids


def test_flags_that_change_the_plan_are_refused_and_extend_adds_cases(original, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, _, _ = _copy(original, tmp_path)
    before = out.read_bytes()
    refused = run_cli("bench", "--resume", str(out), "--batch", "8", "-O", "null.latency_ms=3")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]
    assert refused.stderr.startswith("error: --resume replays the plan") and "--batch, --option" in refused.stderr
    assert out.read_bytes() == before
    extra = ["bench", "tiny_cnn", "-b", "null", "--batch", "8", *FAST, *QUIET, "-O", "null.wait=sleep"]
    extended = run_cli(*extra, "--resume", str(out), "--resume-extend", timeout=120)
    assert extended.returncode == 0, extended.stderr
    data = load_json(out)
    assert [c["batch"] for c in data["cases"]] == [1, 2, 3, 4, 8]
    assert len(data["plan"]["parts"]) == 2 and data["resumed"][0]["extended"] is True
    assert run_cli("bench", "--resume-extend").returncode == 2


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda text: text[: len(text) // 2], "is not valid JSON"),
        (lambda text: text.replace('"parts": [', '"parts": [7, '), "holds a plan that cannot be read"),
        (lambda text: text.replace('"plan":', '"plan_gone":'), "holds no plan"),
        (lambda text: text.replace('"ref": "tiny_cnn"', '"ref": "no_such_model"'), "cannot be resolved"),
    ],
)
def test_broken_file_is_refused_in_one_line_and_never_overwritten(original, tmp_path: Path, breakage, message) -> None:  # type: ignore[no-untyped-def]
    out, _, _ = _copy(original, tmp_path)
    out.write_text(breakage(out.read_text()))
    before = out.read_bytes()
    proc = run_cli("bench", "--resume", str(out), "--no-history")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], proc.stderr
    assert out.read_bytes() == before
    assert list(tmp_path.glob(".int.json.*.tmp")) == []


def test_plan_round_trips_through_json(tmp_path: Path) -> None:
    matrix = Matrix(
        models=(resolve_model("tiny_cnn"), resolve_model("bert_tiny")),
        backends=(("null",), ("onnxruntime", "null")),
        precisions=("fp32", "int8"),
        batches=(1, 4),
        shape_modes=("static", "dynamic"),
        streams=(1, 2),
        threads=3,
        options=(("null.latency_ms", "2"),),
        dynamic=(("seq", (16, 32)),),
        buckets=(("seq", (32,)),),
        seq_len=24,
        settings=MeasureSettings(warmup_iterations=3, target_ci=0.005, interleave=False),
    )
    plan = StoredPlan((matrix,), ("infermeter", "bench"), scenario=LATENCY, isolate=True)
    back = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan))), tmp_path, resolve_model)
    assert back == plan
    assert [c.id for i in back.items() for c in i.chain] == [c.id for i in plan.items() for c in i.chain]
    assert [i.case.settings for i in back.items()] == [i.case.settings for i in plan.items()]
    doubled = plan.extended(matrix)  # the same cases twice: planned once
    assert len(doubled.items()) == len(plan.items())
    with pytest.raises(ResultsError, match="newer infermeter"):
        plan_from_dict({**plan_to_dict(plan), "version": 99}, tmp_path, resolve_model)
