"""tvm backend on the zoo's tiny CNN: parity with torch untuned and tuned, the host CPU recorded, a tiny tuning
(two trials) recorded as a `tune_s` build phase with its database and per-kernel summary, a cache hit that keeps the
tuning time, an interrupted tuning resumed from its database, the time bound, and the bench CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from backend_helpers import feeds_for, torch_reference
from cli_helpers import load_json, run_cli
from infermeter.backends import _tvm_tuning as tuning
from infermeter.backends._tvm_tuning import TuningSummary
from infermeter.backends.tvm_backend import TUNING_KIND, TvmBackend, tuning_summary
from infermeter.build.case_build import build_artifact, key_digest
from infermeter.models.convert import cache_root
from infermeter.results.artifact import Artifact
from infermeter.results.io import write_results
from infermeter.results.schema import CaseResult, ResultsFile

pytest.importorskip("tvm", reason="Apache TVM is not installed: pip install 'infermeter[compilers]'")


def _outputs(spec, case, artifact) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    """(tvm outputs, torch outputs, session notes) for one feed set."""
    session = TvmBackend().load(spec, case, artifact)
    feeds = feeds_for(spec, case)
    try:
        outputs = session.outputs_to_numpy(session.run(session.prepare(feeds)))
        assert session.effective_precision() == "fp32"
        assert set(session.load_phases_s) == {"import_s", "deserialize_s", "session_create_s"}
    finally:
        session.close()
    return outputs, torch_reference(spec, case, feeds), session.notes


def test_untuned_build_matches_torch_for_the_host_cpu(tiny_cnn, make_case):
    case = make_case("tvm", batch=2, threads=2)  # the bench CLI test below reuses this build
    artifact = build_artifact(tiny_cnn, case)
    assert artifact is not None and artifact.cache in ("built", "hit")
    assert set(artifact.build_phases_s) == {"compile_s", "serialize_s"}  # no tune_s: untuned
    assert sorted(p.name for p in Path(artifact.path).iterdir()) == ["build.json", "model.so"]
    (target,) = [note for note in artifact.notes if note.startswith("tvm: target llvm")]
    facts = json.loads((Path(artifact.path) / "build.json").read_text())
    assert f"-mcpu={facts['mcpu']} ({facts['features']} LLVM CPU features), num-cores 2" in target
    if facts["mcpu"] != "generic":
        assert facts["features"] > 12 and not artifact.warnings  # `mcpu=native` would have given LLVM's 12
    assert tuning_summary(artifact) is None and "tvm: untuned (TVM's default schedules)" in artifact.notes
    outputs, reference, notes = _outputs(tiny_cnn, case, artifact)
    assert outputs[0].shape == (2, 10)
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-4, atol=1e-5)
    assert notes == ["tvm: runtime threads set 2, read back 2"]


def test_a_tiny_tuning_is_a_build_phase_with_its_database_and_a_cache_hit_keeps_it(tiny_cnn, make_case, tmp_path):
    case = make_case("tvm", threads=1, options={"tvm.tune_trials": "2"})
    first = build_artifact(tiny_cnn, case)
    assert first is not None and first.cache == "built"
    assert first.build_phases_s["tune_s"] > 0 and first.build_phases_s["compile_s"] > 0
    folder = Path(first.path)
    records = (folder / "database" / tuning.RECORD_FILE).read_text().splitlines()
    assert len(records) == 2
    summary = tuning_summary(first)
    assert summary is not None and summary.trials == 2 and summary.trials_asked == 2 and not summary.resumed
    assert summary.tune_s == pytest.approx(first.build_phases_s["tune_s"])
    # Two trials go to the two heaviest kernels (the convolutions), one each; the rest keep TVM's default.
    assert [task.trials for task in summary.tasks][:3] == [1, 1, 0]
    assert summary.tasks[0].name.startswith("fused_conv2d") and summary.tasks[0].best_ms is not None
    assert all(task.untuned_ms is not None for task in summary.tasks[:2])
    for task in summary.tasks[:2]:  # a candidate is used only where it beats TVM's untuned code for the kernel
        assert task.applied == (task.best_ms < task.untuned_ms), task  # type: ignore[operator]
    assert any("MetaSchedule tuned 2 of" in note for note in first.notes)
    side = cache_root() / TUNING_KIND / key_digest(TvmBackend().artifact_identity(tiny_cnn, case))
    assert not side.exists()  # the resumption folder went with success
    second = build_artifact(tiny_cnn, case)
    assert second is not None and second.cache == "hit" and second.built_here_s == 0
    assert second.build_phases_s == first.build_phases_s  # the tuning paid in the first build is still known
    outputs, reference, _notes = _outputs(tiny_cnn, case, second)
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-4, atol=1e-5)
    _inspect_shows_the_tuned_kernels(second, summary, tmp_path)


def _inspect_shows_the_tuned_kernels(artifact: Artifact, summary: TuningSummary, folder: Path) -> None:
    """`inspect RESULTS.json` lists the kernels tuning worked on, from the backend's artifact report."""
    report = TvmBackend.artifact_report(artifact)
    assert report is not None and "2 trials" in report.title and len(report.rows) == len(summary.tasks)
    assert report.rows[0][0] == summary.tasks[0].name and report.rows[0][3] == "1/1"
    result = CaseResult(
        "tvm-case",
        "tiny_cnn",
        backend="tvm",
        backend_version=None,
        device="cpu",
        batch=1,
        shape_mode="static",
        precision="fp32",
        precision_effective="fp32",
        threads=1,
        status="ok",
    )
    result.loading.build = artifact
    path = folder / "r.json"
    write_results(path, ResultsFile("now", {}, [result]))
    proc = run_cli("inspect", str(path))
    assert proc.returncode == 0 and summary.tasks[0].name in proc.stdout and "auto-tuning" in proc.stdout, proc.stdout


def test_an_interrupted_tuning_resumes_from_its_database(tiny_cnn, make_case):
    """An interrupted tuning of 3 trials left 2 records (those of the test above) and 5 s: the build measures the
    one trial left, on a kernel the records do not cover, and adds the seconds."""
    done = build_artifact(tiny_cnn, make_case("tvm", threads=1, options={"tvm.tune_trials": "2"}))
    assert done is not None
    case = make_case("tvm", threads=1, options={"tvm.tune_trials": "3"})
    side = cache_root() / TUNING_KIND / key_digest(TvmBackend().artifact_identity(tiny_cnn, case))
    shutil.copytree(Path(done.path) / "database", side)
    with (side / tuning.RECORD_FILE).open("a") as records:
        records.write('[0, [[["GetSBlock"')  # the half-written line a kill leaves
    (side / tuning.PROGRESS_FILE).write_text(json.dumps({"tune_s": 5.0}))
    artifact = build_artifact(tiny_cnn, case)
    summary = tuning_summary(artifact) if artifact else None
    assert summary is not None and summary.resumed == 2 and summary.trials == 3
    assert summary.tune_s >= 5.0 and artifact is not None and artifact.build_phases_s["tune_s"] >= 5.0
    assert [task.trials for task in summary.tasks][:3] == [1, 1, 1]
    assert not side.exists()


def test_the_time_bound_stops_tuning_before_the_next_batch(tiny_cnn, make_case):
    case = make_case("tvm", threads=1, batch=1, options={"tvm.tune_minutes": "0.001"})
    artifact = build_artifact(tiny_cnn, case)
    summary = tuning_summary(artifact) if artifact else None
    assert summary is not None and summary.stopped_by_time and summary.trials == 0
    assert summary.trials_asked == 0 and summary.minutes_asked == 0.001
    assert any("stopped at the time bound" in note for note in artifact.notes)  # type: ignore[union-attr]


def test_a_database_cut_mid_line_keeps_its_whole_records(tmp_path):
    (tmp_path / tuning.WORKLOAD_FILE).write_text('["1", "a"]\n["2", "b"]\n["3", "c')
    (tmp_path / tuning.RECORD_FILE).write_text("[0, [1]]\n[1, [2]]\n[2, [3]]\n[1, [4")
    assert tuning.sanitize_database(tmp_path) == 2  # the record of the lost workload 2 goes too
    assert (tmp_path / tuning.RECORD_FILE).read_text() == "[0, [1]]\n[1, [2]]\n"
    assert tuning.spent_s(tmp_path) == 0.0
    assert tuning.trial_split(2, 0, 6) == (2, 1) and tuning.trial_split(0, 5, 3) == (3000, 1000)


def test_a_ctrl_c_while_tuning_stops_it_at_the_next_batch_and_a_second_one_interrupts():
    """MetaSchedule's C++ aborts the process when a KeyboardInterrupt is raised inside its Python callbacks: the
    first Ctrl-C only sets the flag the scheduler reads; a second one is the usual KeyboardInterrupt."""
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a test runner may ignore it)
    try:
        with tuning.interrupt_as_flag() as interrupted:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # Python runs the handler between bytecodes
            assert interrupted.is_set()
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a build worker's: its parent owns Ctrl-C, left alone
        with tuning.interrupt_as_flag():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, outer)


def test_unsupported_cases_say_why(tiny_cnn, make_case):
    assert "--shape-mode static" in (
        TvmBackend.unsupported_reason(tiny_cnn, make_case("tvm", shape_mode="dynamic")) or ""
    )
    assert "bf16 is not supported" in (
        TvmBackend.unsupported_reason(tiny_cnn, make_case("tvm", precision="bf16")) or ""
    )
    assert TvmBackend.unsupported_reason(tiny_cnn, make_case("tvm")) is None


def test_bench_cli_runs_tvm_untuned(tmp_path):
    out = tmp_path / "r.json"
    args = ("bench", "tiny_cnn", "-b", "tvm", "-O", "tvm.tune_trials=0", "--batch", "2", "--threads", "2")
    # Short timing; --no-roofline: a fresh cache would otherwise measure this machine's peak first (minutes).
    fast = ("--warmup", "1", "--iterations", "5", "--min-time", "0", "--max-time", "1", "--target-ci", "0")
    proc = run_cli(*args, *fast, "--no-roofline", "--no-history", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    (case,) = load_json(out)["cases"]
    assert case["backend"] == "tvm" and case["status"] == "ok", case.get("error")
    assert case["precision_effective"] == "fp32" and case["latency_ms"]["p50"] > 0
    assert case["loading"]["build"]["build_phases_s"]["compile_s"] > 0
    assert "tvm: runtime threads set 2, read back 2" in case["notes"]
