"""`bench --cluster` without a cluster: the local path never imports Ray, a missing Ray is one line with the install
command (exit 2), the flags are checked before anything runs, machines enter a case's identity only when given, and
the plan is cut into tasks as a local sweep groups it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run_cli
from fault_harness import FAST
from infermeter.cluster.units import plan_units
from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.plan import Matrix, build_plan
from infermeter.measure.planfile import StoredPlan, plan_from_dict, plan_to_dict, store_plan
from infermeter.models.resolve import resolve_model
from infermeter.results.io import write_results
from infermeter.results.schema import ResultsFile

NULL_BASE = ["bench", "tiny_cnn", "-b", "null", "--batch", "1", *FAST, "--no-roofline", "--no-history"]
NULL_SWEEP = [*NULL_BASE, "-O", "null.wait=sleep", "--threads", "1"]


def _python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)


def test_a_local_bench_never_imports_ray(tmp_path: Path) -> None:
    out = tmp_path / "local.json"
    code = f"""
import sys
from infermeter.cli.app import main
try:
    main({[*NULL_SWEEP, "-o", str(out)]!r})
finally:
    print("IMPORTED", sorted(m for m in sys.modules if m == "ray" or m.startswith(("ray.", "infermeter.cluster"))))
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert "IMPORTED []" in proc.stdout, proc.stdout
    assert [case["status"] for case in json.loads(out.read_text())["cases"]] == ["ok"]


def test_without_ray_cluster_exits_2_with_the_install_line(tmp_path: Path) -> None:
    out = tmp_path / "never.json"
    # A None entry in sys.modules makes `import ray` fail and find_spec("ray") say it is not installed.
    code = f"""
import sys
sys.modules["ray"] = None
from infermeter.cli.app import main
main({[*NULL_SWEEP, "--cluster", "127.0.0.1:1", "-o", str(out)]!r})
"""
    proc = _python(code)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'infermeter[cluster]'" in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr and not out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--machines", "a,b"], "--machines picks classes of cluster node"),
        (["--cluster", "127.0.0.1:1"], "--cluster: give --threads N"),
    ],
)
def test_cluster_flags_are_checked_before_anything_runs(flags: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "never.json"
    proc = run_cli(*NULL_BASE, *flags, "-o", str(out), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in " ".join(proc.stderr.split())
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--machine", "a"], "--machine picks a class of cluster node"),
        (["--cluster", "127.0.0.1:1"], "--cluster: give --threads N"),
    ],
)
def test_optimize_checks_its_cluster_flags_before_anything_runs(flags: list[str], message: str, tmp_path: Path) -> None:
    folder = tmp_path / "never"
    proc = run_cli("optimize", "tiny_cnn", "-b", "null", *flags, "-o", str(folder), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in " ".join(proc.stderr.split())
    assert not folder.exists()


def test_machine_joins_a_case_identity_only_when_given() -> None:
    case = Case("tiny_cnn", "onnxruntime", threads=4, options=(("null.x", "1"),))
    # The id this case had before machines existed: local results keep their ids.
    assert case.id == "onnxruntime-fp32-b1-static-t4-ec9bf068c553"
    on_a = dataclasses.replace(case, machine="a")
    assert on_a.id != case.id != dataclasses.replace(case, machine="b").id
    assert on_a.group_key != case.group_key


def _matrix(**changes: object) -> Matrix:
    spec = resolve_model("tiny_cnn")
    base = Matrix(models=(spec,), backends=(("null",), ("null:latency_ms=2",)), batches=(1, 2), threads=1)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_every_case_runs_on_each_machine_and_the_plan_file_keeps_them() -> None:
    plan = build_plan(_matrix(machines=("a", "b")))
    assert [item.case.machine for item in plan] == ["a"] * 4 + ["b"] * 4
    assert len({item.case.id for item in plan}) == 8
    stored = StoredPlan((_matrix(machines=("a", "b")),), ("infermeter", "bench"))
    back = plan_from_dict(json.loads(json.dumps(plan_to_dict(stored))), Path("r.json"), resolve_model)
    assert [item.case.id for item in back.items()] == [item.case.id for item in plan]
    assert "machines" not in plan_to_dict(StoredPlan((_matrix(),), ()))["parts"][0]


def test_interleaved_groups_are_one_task_and_never_span_machines() -> None:
    plan = build_plan(_matrix(machines=("a", "b")))
    units = plan_units(plan, isolate=True)
    assert [len(unit.items) for unit in units] == [2, 2, 2, 2]
    assert [unit.machine for unit in units] == ["a", "a", "b", "b"]
    assert all(len({item.case.batch for item in unit.items}) == 1 for unit in units)
    sequential = build_plan(_matrix(settings=MeasureSettings(interleave=False)))
    assert [len(unit.items) for unit in plan_units(sequential, isolate=True)] == [1, 1, 1, 1]
    assert [len(unit.items) for unit in plan_units(plan[:4], isolate=False)] == [1, 1, 1, 1]


def test_a_plan_with_machine_classes_resumes_only_on_a_cluster(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    results = ResultsFile(created="2026-12-01T00:00:00+00:00", environment={})
    store_plan(results, StoredPlan((_matrix(machines=("a",)),), ("infermeter", "bench")))
    write_results(path, results)
    before = path.read_bytes()
    proc = run_cli("bench", "--resume", str(path), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "give --cluster ADDRESS" in " ".join(proc.stderr.split())
    assert path.read_bytes() == before
