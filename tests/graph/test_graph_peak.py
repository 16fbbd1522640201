"""`peak`: every probe runs and counts its work right; the result's structure; the per-machine cache is used.
(Repeatability within 10% is shown by benchmarks/peak_repeatability.py, not asserted here.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cli_helpers import run_cli, run_main
from infermeter.machine import ceilings as peak_module
from infermeter.machine import ceilings_cache as peak_cache
from infermeter.machine.ceiling_probes import CPU_PROBES, Workload, numpy_copy, numpy_fp32
from infermeter.machine.ceilings import (
    PRECISION_KEYS,
    merge_visits,
    run_probe,
    speed_variation,
    time_workload,
    visit_round_robin,
)
from infermeter.machine.ceilings_cache import load_or_measure_peak, peak_cache_key


@pytest.fixture(autouse=True)
def no_full_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run_probe` runs a full garbage collection after each probe, to free its arrays before the next one is
    timed. In a test process holding a whole suite's objects each takes about a second, and what these tests
    check (counting, rounds, structure, the cache) does not depend on it."""
    monkeypatch.setattr(peak_module, "gc", SimpleNamespace(collect=lambda: 0))


@pytest.fixture
def quick_probes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Short trials, tiny sizes and two probes, counting how often a probe is built."""
    built: list[str] = []

    def counted(builder: Any, name: str) -> Any:
        def build(threads: int, size: int) -> Workload:
            built.append(name)
            return builder(threads, min(size, 64) if name == "fp32" else size)

        return build

    monkeypatch.setattr(peak_module, "TRIALS", 3)
    monkeypatch.setattr(peak_module, "MIN_TRIAL_S", 0.01)
    monkeypatch.setattr(peak_module, "MIN_ROUNDS", 1)
    monkeypatch.setattr(peak_module, "MAX_ROUNDS", 1)
    monkeypatch.setattr(peak_module, "bandwidth_array_bytes", lambda: 1 << 20)
    monkeypatch.setattr(peak_module, "measure_gpu_peak", lambda progress=None: None)
    monkeypatch.setattr(
        peak_module,
        "CPU_PROBES",
        (("numpy", "fp32", counted(numpy_fp32, "fp32")), ("numpy copy", "bandwidth", counted(numpy_copy, "copy"))),
    )
    return built


def test_time_workload_counts_work_per_second() -> None:
    calls = []
    workload = Workload(lambda: calls.append(1), work=1e6)
    best_per_trial, every_call = time_workload(workload, trials=4, min_trial_s=0.005)
    assert len(best_per_trial) == 4 and all(r > 0 for r in best_per_trial)
    assert max(best_per_trial) == max(every_call)  # each trial keeps its fastest call
    assert len(calls) >= len(every_call) + 2  # warm-up calls are not timed


@pytest.mark.parametrize(("engine", "precision", "builder"), CPU_PROBES, ids=[f"{e}-{p}" for e, p, _ in CPU_PROBES])
def test_every_cpu_probe_runs_or_says_why_not(
    engine: str, precision: str, builder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peak_module, "TRIALS", 2)
    monkeypatch.setattr(peak_module, "MIN_TRIAL_S", 0.005)
    size = 1 << 20 if precision == "bandwidth" else 64
    result = run_probe(engine, precision, builder, 1, size)
    if "skipped" in result:
        assert result["skipped"]  # a reason, e.g. OpenVINO not running bf16 on a CPU without it
        return
    assert result["best"] > 0 and result["best"] >= result["median"]
    assert result["unit"] == {"bandwidth": "GB/s", "int8": "GOP/s"}.get(precision, "GFLOP/s")
    assert len(result["trials"]) == 2


def test_matmul_probes_compute_real_products() -> None:
    # The timed callable must do the product it claims (2 n^3 operations), not something cheaper.
    workload = numpy_fp32(1, 32)
    product = workload.run()
    assert workload.work == 2 * 32**3
    assert isinstance(product, np.ndarray) and product.shape == (32, 32) and np.abs(product).sum() > 0
    workload.cleanup()


def _paced_builder(seconds_per_call: list[float]) -> Any:
    """A probe whose n-th build sleeps seconds_per_call[n] per call (1 unit of work): a machine whose speed
    moves from visit to visit, as a shared one does."""
    built = iter(seconds_per_call)

    def build(threads: int, size: int) -> Workload:
        pause_s = next(built)
        return Workload(lambda: time.sleep(pause_s), work=1e9)

    return build


def test_rounds_stop_once_no_ceiling_rises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peak_module, "TRIALS", 1)
    monkeypatch.setattr(peak_module, "MIN_TRIAL_S", 0.0)
    monkeypatch.setattr(peak_module, "WARMUP_S", 0.0)
    monkeypatch.setattr(peak_module, "MIN_ROUNDS", 2)
    monkeypatch.setattr(peak_module, "MAX_ROUNDS", 6)
    # Steady from the first visit: stops after MIN_ROUNDS.
    probes, rounds = visit_round_robin([("steady", "fp32", _paced_builder([0.02] * 6), 1)], 1, None)
    assert rounds == 2 and probes[0]["visits"] == 2
    # Faster at every visit (the neighbour leaving): goes on while the ceiling rises, up to MAX_ROUNDS.
    rising = _paced_builder([0.04, 0.03, 0.02, 0.01, 0.005, 0.0025])
    probes, rounds = visit_round_robin([("rising", "fp32", rising, 1)], 1, None)
    assert rounds == 6 and probes[0]["best"] > 300  # the fastest visit's rate (1 GFLOP per 2.5 ms), not an average


def test_merging_visits_keeps_the_fastest_call_and_every_trial() -> None:
    visit = {"engine": "e", "precision": "fp32", "best": 10.0, "median": 8.0, "calls": 5, "trials": [9.0, 10.0]}
    slower = {**visit, "best": 6.0, "median": 5.0, "calls": 7, "trials": [6.0, 5.5]}
    merged = merge_visits([visit, slower])
    assert merged["best"] == 10.0 and merged["calls"] == 12 and merged["trials"] == [9.0, 10.0, 6.0, 5.5]
    assert merged["median"] == 6.5 and merged["spread"] == pytest.approx(0.45) and merged["visits"] == 2
    skipped = {"engine": "e", "precision": "fp32", "skipped": "no bf16 here"}
    assert merge_visits([skipped]) == skipped


def test_speed_variation_names_the_least_steady_compute_probe() -> None:
    probes = [
        {"engine": "a", "precision": "fp32", "trials": [100.0, 98.0]},
        {"engine": "b", "precision": "int8", "trials": [1000.0, 500.0, 990.0]},
        # Not counted: a bandwidth trial holds only a few calls.
        {"engine": "copy", "precision": "bandwidth", "trials": [30.0, 10.0]},
        {"engine": "c", "precision": "bf16", "skipped": "unsupported"},
    ]
    assert speed_variation(probes) == {"ratio": 2.0, "engine": "b", "precision": "int8", "steady": False}
    assert speed_variation(probes[:1]) == {"ratio": 1.02, "engine": "a", "precision": "fp32", "steady": True}


def test_peak_structure_and_cache(quick_probes: list[str], cache_dir: Path) -> None:
    first, hit = load_or_measure_peak(refresh=True, threads=1)
    assert not hit and quick_probes == ["fp32", "fp32", "copy"]  # two matrix sizes, one array size
    assert first["fp32_gflops"] > 0 and first["bandwidth_gbs"] > 0
    assert first["engines"] == {"fp32": "numpy", "bandwidth": "numpy copy"}
    assert first["int8_gops"] is None and first["bf16_gflops"] is None  # not probed here: unknown, not zero
    assert set(PRECISION_KEYS.values()) <= set(first)
    assert first["threads"] == 1 and first["key"] == peak_cache_key(1)
    assert all(len(p["trials"]) == 3 for p in first["probes"])
    files = list((cache_dir / "peak").glob("*.json"))
    assert any(json.loads(f.read_text()).get("measured_at") == first["measured_at"] for f in files)

    second, hit = load_or_measure_peak(threads=1)
    assert hit and second == first and len(quick_probes) == 3  # nothing measured again

    _, hit = load_or_measure_peak(refresh=True, threads=1)
    assert not hit and len(quick_probes) == 6

    for f in files:  # a corrupt cache entry is measured again, never trusted
        f.write_text("{not json")
    _, hit = load_or_measure_peak(threads=1)
    assert not hit and len(quick_probes) == 9


def test_cli_reads_the_cache(cache_dir: Path) -> None:
    from infermeter.results.env import default_threads

    key = peak_cache_key(default_threads())
    fake = {"fp32_gflops": 1234.5, "bandwidth_gbs": 67.8, "engines": {"fp32": "numpy"}, "probes": [], "key": key}
    path = peak_cache.cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fake))
    proc = run_cli("peak", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["cache_hit"] is True and data["fp32_gflops"] == 1234.5
    # The table and the refusal through the CLI's entry point in this process (the run above goes end to end).
    table = run_main("peak")
    assert table.returncode == 0 and "1,234.5 GFLOP/s" in table.stdout and "cached" in table.stdout
    bad = run_main("peak", "--threads", "0")
    assert bad.returncode == 2 and "--threads 0 must be positive" in bad.stderr
