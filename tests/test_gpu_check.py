"""benchmarks/gpu_check.py where there is no GPU: it says so and exits 0; its table, its per-path timeouts, a path
run in its own process (skipped here, with the engine's reason) and a hung path's whole process group killed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from infermeter.backends._gpu import nvidia_gpu_reason

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(nvidia_gpu_reason() is None, reason="a GPU is present: the script would run every path")
def test_without_a_gpu_it_says_so_and_exits_0() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no GPU here: ") and "nothing to check" in done.stdout
    assert "nvidia-smi" in done.stdout  # the reason, as the GPU backends give it


def test_table_has_one_aligned_line_per_path(gpu_check: ModuleType) -> None:
    row = gpu_check.CheckRow
    rows = [
        row("tensorrt", "ok", "P50 0.412 ms", seconds=31.25),
        row("vllm (generate)", "skipped", detail="vllm is not installed", seconds=0.4),
        row("onnxruntime-tensorrt", "failed", detail="timed out after 70 s", seconds=70.0),
    ]
    lines = gpu_check.format_table(rows).splitlines()
    assert lines[0].split() == ["path", "status", "key", "figure", "seconds"] and set(lines[1]) <= {"-", " "}
    assert len(lines) == 2 + len(rows)
    assert lines[2].startswith("tensorrt ") and "P50 0.412 ms" in lines[2] and lines[2].endswith("31.2")
    assert "skipped: vllm is not installed" in lines[3] and " — " in lines[3] and lines[3].endswith("0.4")
    assert "failed: timed out after 70 s" in lines[4] and lines[4].endswith("70.0")
    figure_at = lines[0].index("key figure")
    assert all(line[figure_at:].startswith(("P50", "—", "key")) for line in (lines[0], *lines[2:]))
    assert len({len(line) for line in lines}) == 1  # every column aligned


def test_the_paths_fit_the_budget_and_cover_every_gpu_path(gpu_check: ModuleType) -> None:
    assert sum(path.timeout_s for path in gpu_check.PATHS) < gpu_check.TOTAL_BUDGET_S == 8 * 60
    names = " ".join(path.name for path in gpu_check.PATHS)
    for engine in ("tensorrt", "onnxruntime-cuda", "onnxruntime-tensorrt", "peak", "vllm", "tensorrt-llm"):
        assert engine in names


def test_a_path_runs_in_its_own_process_and_is_skipped_with_the_reason(gpu_check: ModuleType) -> None:
    path = next(p for p in gpu_check.PATHS if p.name == "onnxruntime-cuda")
    row = gpu_check.check(path)
    assert row.status == "skipped" and "onnxruntime-gpu" in row.detail and row.seconds > 0, row


def test_a_hung_path_is_killed_with_its_children(gpu_check: ModuleType) -> None:
    started = time.perf_counter()
    code, out, _ = gpu_check.run_child(["sh", "-c", "sleep 60 & echo $!; wait"], timeout_s=1)
    assert code is None and time.perf_counter() - started < 10
    grandchild = int(out.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"  # a zombie is dead, waiting to be reaped
