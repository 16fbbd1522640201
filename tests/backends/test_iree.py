"""IREE backend on the zoo's tiny CNN: parity with torch, one build then cache hits, the host ISA recorded and a
generic build warned about, threads read back, dynamic shapes, the bench CLI, and the install line when missing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from backend_helpers import feeds_for, torch_reference
from cli_helpers import load_json, run_cli
from infermeter.backends import iree_backend
from infermeter.backends.iree_backend import IreeBackend, compiler_message, generic_target_warning
from infermeter.build.case_build import build_artifact
from infermeter.measure.execute import execute_case

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")


def test_fp32_outputs_match_torch_and_the_build_is_cached(tiny_cnn, make_case, own_compile_cache):
    case = make_case("iree", batch=3, threads=1)  # a cache of this test's own: the first build is a miss
    first = build_artifact(tiny_cnn, case)
    assert first is not None and first.cache == "built" and first.build_phases_s["compile_s"] > 0
    assert Path(first.path).suffix == ".vmfb" and Path(first.path).stat().st_size > 0
    second = build_artifact(tiny_cnn, case)
    assert second is not None and second.cache == "hit" and second.built_here_s == 0
    assert second.build_phases_s == first.build_phases_s  # the compile time paid earlier is still known
    session = IreeBackend().load(tiny_cnn, case, second)
    feeds = feeds_for(tiny_cnn, case)
    outputs = session.outputs_to_numpy(session.run(session.prepare(feeds)))
    session.close()
    assert "deserialize_s" in session.load_phases_s and "compile_s" not in session.load_phases_s
    assert session.effective_precision() == "fp32"
    assert outputs[0].shape == (3, 10)
    np.testing.assert_allclose(outputs[0], torch_reference(tiny_cnn, case, feeds)[0], rtol=1e-4, atol=1e-5)


def test_host_build_records_the_isa_and_a_generic_build_is_warned(tiny_cnn, make_case):
    host = build_artifact(tiny_cnn, make_case("iree", threads=1))
    assert host is not None and not host.warnings
    (target,) = [note for note in host.notes if note.startswith("iree: target cpu")]
    assert "target cpu generic" not in target and "avx2" in target  # every x86-64 CPU this runs on has AVX2
    generic_case = make_case("iree", threads=1, options={"iree.target_cpu": "generic"})
    result = execute_case(tiny_cnn, generic_case)
    assert result.status == "ok", result.error
    assert any("target cpu generic, 0 features" in note for note in result.notes)
    (warning,) = [w for w in result.warnings if w.code == "generic_cpu_target"]
    assert "asked for (iree.target_cpu=generic)" in warning.message
    assert (
        result.loading.build is not None and result.loading.build.key != host.key
    )  # a build of its own, not the host's


def test_a_host_build_that_fell_back_to_generic_is_warned_too() -> None:
    assert generic_target_warning("host", "emeraldrapids") is None
    fallback = generic_target_warning("host", "generic")
    assert fallback is not None and "fallen back to (asked host)" in fallback[1]


def test_threads_are_set_and_read_back_with_dynamic_shapes(tiny_cnn, make_case):
    case = make_case("iree", shape_mode="dynamic", threads=2)
    session = IreeBackend().load(tiny_cnn, case, build_artifact(tiny_cnn, case))
    assert session.notes == ["iree: driver local-task, 2 worker threads read back (asked 2)"]
    # Dynamic mode keeps the symbolic batch: another batch size runs on the same module.
    other = {"input": np.ones((5, 3, 32, 32), dtype=np.float32)}
    (out,) = session.outputs_to_numpy(session.run(session.prepare(other)))
    session.close()
    np.testing.assert_allclose(out, torch_reference(tiny_cnn, case, other)[0], rtol=1e-4, atol=1e-5)


def test_unsupported_cases_say_why(tiny_cnn, make_case):
    assert "bf16 is not supported" in (
        IreeBackend.unsupported_reason(tiny_cnn, make_case("iree", precision="bf16")) or ""
    )
    assert "--streams" in (IreeBackend.unsupported_reason(tiny_cnn, make_case("iree", streams=2)) or "")


def test_a_compiler_crash_or_error_reads_as_one_line() -> None:
    crash = "Error invoking IREE compiler tool iree-compile\nError code: -11\nDiagnostics:\n #0 0x7f llvm::sys::X"
    assert compiler_message(RuntimeError(crash)) == "iree-compile crashed (signal 11) without a diagnostic"
    error = "Diagnostics:\n/tmp/x/model.mlir:3:10: error: failed to legalize operation 'torch.operator'\n  %0 = ..."
    assert compiler_message(RuntimeError(error)) == "failed to legalize operation 'torch.operator'"


def test_backends_says_not_installed_with_the_install_line(monkeypatch):
    from infermeter.cli.app import app

    real = iree_backend.package_version
    monkeypatch.setattr(iree_backend, "package_version", lambda d: None if d.startswith("iree") else real(d))
    reason = IreeBackend.available()
    assert reason == (
        "IREE (iree-base-compiler, iree-base-runtime) is not installed: pip install 'infermeter[compilers]'"
    )
    listed = CliRunner().invoke(app, ["backends", "--json"])
    assert listed.exit_code == 0, listed.output
    assert "pip install 'infermeter[compilers]'" in listed.output


def test_bench_cli_runs_iree_beside_onnxruntime(tmp_path):
    out = tmp_path / "r.json"
    # --no-roofline: a fresh cache would otherwise measure this machine's peak first (minutes on 2 busy CPUs).
    # Batch 2 on one thread: the host build of the test above, from the session's cache.
    args = ("bench", "tiny_cnn", "-b", "iree", "-b", "onnxruntime", "--batch", "2", "--threads", "1", "--no-roofline")
    fast = ("--warmup", "1", "--iterations", "5", "--min-time", "0", "--max-time", "1", "--rounds", "2")
    proc = run_cli(*args, *fast, "--target-ci", "0", "--no-history", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    cases = {case["backend"]: case for case in load_json(out)["cases"]}
    assert set(cases) == {"iree", "onnxruntime"}
    iree = cases["iree"]
    assert iree["status"] == "ok" and iree["precision_effective"] == "fp32"
    assert iree["latency_ms"]["p50"] > 0
    assert iree["loading"]["build"]["build_phases_s"]["compile_s"] > 0
    assert any(note.startswith("iree: target cpu") for note in iree["notes"])
    assert "iree" in proc.stdout


def test_iree_runs_only_when_named() -> None:
    from infermeter.backends.registry import default_backends

    assert IreeBackend.runs_by_default is False  # a build of seconds to minutes per shape
    assert "iree" not in default_backends() and "onnxruntime" in default_backends()
