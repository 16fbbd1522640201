"""This machine's ceilings: compute per precision (GFLOP/s, GOP/s for int8) and memory bandwidth (GB/s).

Method (so that a figure can be reproduced and trusted):
- Compute: an n x n by n x n matrix product (n = 512 and 1024 on CPU, the faster counts; 8192 on GPU; 2n^3
  operations) through every framework we have -- numpy's BLAS, torch, ONNX Runtime, OpenVINO -- per precision;
  the ceiling of a precision is the fastest engine's figure, and the winner is recorded. Engines that cannot run
  a precision here are listed with the reason. OpenVINO's precision is read back from its runtime model, never assumed.
- Bandwidth: streaming copies (read + write) and the STREAM triad (2 reads + 1 write) over arrays several times
  the last-level cache; write-allocate traffic is not counted (as in STREAM).
- Timing: `default_threads()` threads; every probe is visited in rounds, round-robin, so that its visits lie
  seconds apart (on a shared or virtual machine, interference -- a busy neighbour, a lower clock -- comes in
  bursts that last seconds; one contiguous visit can fall wholly inside one), until a whole round raises no
  ceiling by more than CONVERGED_GAIN (MIN_ROUNDS to MAX_ROUNDS rounds). Each visit: a warm-up, then
  TRIALS trials of at least MIN_TRIAL_S each, every call timed on its own. The ceiling is the fastest call of
  all visits -- interference can only slow a call down, never speed it up, so the maximum is the most
  repeatable estimate of what the hardware can do (and it is measured the way a case's latency is: per call).
  The median call and every trial's best are kept beside it. On a GPU the same with CUDA events as timers.
- Cached per machine (`graph.peak_cache`): CPU model + ISA flags + core counts + threads + framework versions
  (+ GPU names) form the key of a JSON file under `cache_root()/peak/`.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infermeter.machine.ceiling_probes import CPU_PROBES, ProbeSkipped, Workload
from infermeter.results.schema import now_iso

METHOD_VERSION = 3
MIN_ROUNDS = 3
MAX_ROUNDS = 8
CONVERGED_GAIN = 0.02
TRIALS = 2
MIN_TRIAL_S = 0.1
WARMUP_S = 0.05
PRECISION_KEYS = {"fp32": "fp32_gflops", "bf16": "bf16_gflops", "fp16": "fp16_gflops", "int8": "int8_gops"}
UNITS = {"fp32": "GFLOP/s", "bf16": "GFLOP/s", "fp16": "GFLOP/s", "tf32": "GFLOP/s", "int8": "GOP/s"}
ProgressFn = Callable[[str], None]
# The frameworks whose kernels the probes time: a new version of one of them can move a ceiling.
PEAK_FRAMEWORKS = ("numpy", "torch", "onnxruntime", "onnxruntime-gpu", "openvino")


def _llc_bytes() -> int:
    """Last-level cache size from sysfs (0 when unknown)."""
    best = 0
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in base.glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best


def bandwidth_array_bytes() -> int:
    """Per-array size of the bandwidth probes: 2x the last-level cache, within [64 MiB, 512 MiB] and 1/8 of RAM."""
    import psutil

    size = max(2 * _llc_bytes(), 64 << 20)
    return int(min(size, 512 << 20, psutil.virtual_memory().available // 8))


def time_workload(
    workload: Workload, trials: int = TRIALS, min_trial_s: float = MIN_TRIAL_S
) -> tuple[list[float], list[float]]:
    """Per-trial best rates and every per-call rate (work units per second).

    Each call is timed on its own (device timer on a GPU): on a shared machine a call that the scheduler
    interrupts is slow, one that is not shows what the hardware does, exactly as a case's median latency does;
    timing a long batch of calls instead would charge other processes' time slices to the ceiling.
    """
    calls = 0
    start = time.perf_counter()
    while calls < 2 or time.perf_counter() - start < WARMUP_S:
        workload.run()
        workload.sync()
        calls += 1
    best_per_trial: list[float] = []
    every_call: list[float] = []
    for _ in range(trials):
        trial_start = time.perf_counter()
        best = 0.0
        while True:
            if workload.device_timer is not None:
                elapsed_s = workload.device_timer(workload.run, 1)
            else:
                t0 = time.perf_counter()
                workload.run()
                workload.sync()
                elapsed_s = time.perf_counter() - t0
            rate = workload.work / max(elapsed_s, 1e-12)
            every_call.append(rate)
            best = max(best, rate)
            if time.perf_counter() - trial_start >= min_trial_s:
                break
        best_per_trial.append(best)
    return best_per_trial, every_call


def _summarize(
    engine: str, precision: str, size: int, rates: tuple[list[float], list[float]], note: str
) -> dict[str, Any]:
    unit = "GB/s" if precision == "bandwidth" else UNITS.get(precision, "GFLOP/s")
    giga = [r / 1e9 for r in rates[0]]
    return {
        "engine": engine,
        "precision": precision,
        "size": size,
        "unit": unit,
        "best": max(giga),
        "median": statistics.median(rates[1]) / 1e9,
        "calls": len(rates[1]),
        "spread": (max(giga) - min(giga)) / max(giga) if max(giga) > 0 else 0.0,
        "trials": [round(g, 3) for g in giga],
        "note": note,
    }


def run_probe(
    engine: str, precision: str, builder: Callable[[int, int], Workload], threads: int, size: int
) -> dict[str, Any]:
    """Build and time one probe; a missing framework or unsupported precision becomes a `skipped` entry."""
    try:
        workload = builder(threads, size)
    except ImportError as exc:
        return {"engine": engine, "precision": precision, "skipped": f"not installed ({exc.name or exc})"}
    except ProbeSkipped as exc:
        return {"engine": engine, "precision": precision, "skipped": str(exc)}
    except Exception as exc:  # a framework failing on this machine is a finding for the report, not a crash
        return {"engine": engine, "precision": precision, "skipped": f"{type(exc).__name__}: {exc}"}
    note = workload.note
    try:
        rates = time_workload(workload, TRIALS, MIN_TRIAL_S)  # read at call time: tests shorten them
    finally:
        workload.cleanup()
        del workload
        gc.collect()
    return _summarize(engine, precision, size, rates, note)


def _ceilings(probes: list[dict[str, Any]]) -> dict[str, Any]:
    """Best figure per precision and the engine that reached it."""
    out: dict[str, Any] = {}
    engines: dict[str, str] = {}
    for precision, key in (*PRECISION_KEYS.items(), ("tf32", "tf32_gflops"), ("bandwidth", "bandwidth_gbs")):
        candidates = [p for p in probes if p["precision"] == precision and "best" in p]
        if not candidates:
            out[key] = None
            continue
        winner = max(candidates, key=lambda p: p["best"])
        out[key] = winner["best"]
        engines[precision] = winner["engine"]
    out["engines"] = engines
    return out


UNSTEADY_SPEED_RATIO = 1.25


def speed_variation(probes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How much this machine's own speed moved during the measurement: for the compute probe whose trials
    varied most, its fastest trial over its slowest. Every trial does the same work on the same engine, so a
    ratio well above 1 is the machine (a busy neighbour on a shared or virtual machine, frequency scaling),
    not the method -- and ceilings measured on such a machine move run to run by up to that much."""
    worst: dict[str, Any] | None = None
    for probe in probes:
        trials = [t for t in probe.get("trials", []) if t > 0]
        if probe.get("precision") == "bandwidth" or len(trials) < 2:  # a bandwidth trial holds only a few calls
            continue
        ratio = max(trials) / min(trials)
        if worst is None or ratio > worst["ratio"]:
            worst = {"ratio": round(ratio, 2), "engine": probe["engine"], "precision": probe["precision"]}
    if worst is not None:
        worst["steady"] = worst["ratio"] <= UNSTEADY_SPEED_RATIO
    return worst


def merge_visits(visits: list[dict[str, Any]]) -> dict[str, Any]:
    """One probe's result from its visits: the fastest call of all, the median of the visits' medians, every
    trial kept (in visit order); a probe skipped at any visit is reported skipped."""
    skipped = [v for v in visits if "best" not in v]
    if skipped:
        return skipped[0]
    merged = dict(visits[0])
    trials = [t for v in visits for t in v["trials"]]
    merged.update(
        best=max(v["best"] for v in visits),
        median=statistics.median(v["median"] for v in visits),
        calls=sum(v["calls"] for v in visits),
        trials=trials,
        spread=(max(trials) - min(trials)) / max(trials) if max(trials) > 0 else 0.0,
        visits=len(visits),
    )
    return merged


ProbeTask = tuple[str, str, Callable[[int, int], Workload], int]  # engine, precision, builder, size


def _fastest_per_probe(tasks: list[ProbeTask], visits: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One result per (engine, precision): the task (matrix size) whose merged visits were fastest."""
    by_probe: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for index, (engine, precision, _, _) in enumerate(tasks):
        if visits[index]:
            by_probe.setdefault((engine, precision), []).append(merge_visits(visits[index]))
    probes = []
    for results in by_probe.values():
        timed = [r for r in results if "best" in r]
        probes.append(max(timed, key=lambda r: r["best"]) if timed else results[0])
    return probes


def _largest_gain(before: dict[str, Any], after: dict[str, Any]) -> float:
    """How much the latest round raised any ceiling, relative to what it was."""
    gains = [
        (after[key] - before[key]) / before[key]
        for key in after
        if isinstance(after.get(key), float) and isinstance(before.get(key), float) and before[key] > 0
    ]
    return max(gains, default=0.0)


def visit_round_robin(
    tasks: list[ProbeTask], threads: int, progress: ProgressFn | None
) -> tuple[list[dict[str, Any]], int]:
    """Visit every task round-robin until a whole round raises no ceiling by more than CONVERGED_GAIN (at least
    MIN_ROUNDS, at most MAX_ROUNDS rounds); returns one result per (engine, precision) and the rounds run.

    Why adaptive: on a quiet machine the ceilings settle in MIN_ROUNDS; on a shared one the fast windows are
    rarer, and stopping early would report whichever share of the hardware this run happened to get."""
    visits: dict[int, list[dict[str, Any]]] = {index: [] for index in range(len(tasks))}
    ceilings_before: dict[str, Any] = {}
    probes: list[dict[str, Any]] = []
    rounds = 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        for index, (engine, precision, builder, size) in enumerate(tasks):
            if visits[index] and "best" not in visits[index][0]:
                continue  # skipped once (framework missing, precision unsupported): that will not change
            if progress is not None:
                progress(f"{engine} {precision} (round {rounds})")
            visits[index].append(run_probe(engine, precision, builder, threads, size))
        probes = _fastest_per_probe(tasks, visits)
        ceilings = _ceilings(probes)
        if rounds >= MIN_ROUNDS and _largest_gain(ceilings_before, ceilings) <= CONVERGED_GAIN:
            break
        ceilings_before = ceilings
    return probes, rounds


def measure_cpu_peak(threads: int, matrix_size: int = 2048, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Time every CPU probe and return the ceilings (see the module docstring for the method)."""
    array_bytes = bandwidth_array_bytes()
    # Two matrix sizes: the smaller one's calls are short enough to run between other processes' time slices,
    # the larger one is more efficient on an idle many-core machine. The faster of the two counts.
    tasks = [
        (engine, precision, builder, size)
        for engine, precision, builder in CPU_PROBES
        for size in ((array_bytes,) if precision == "bandwidth" else (matrix_size // 2, matrix_size))
    ]
    probes, rounds = visit_round_robin(tasks, threads, progress)
    return {
        "device": "cpu",
        "threads": threads,
        "rounds": rounds,
        "matrix_size": matrix_size,
        "bandwidth_array_mb": round(array_bytes / 2**20, 1),
        "speed_variation": speed_variation(probes),
        **_ceilings(probes),
        "probes": probes,
    }


def measure_gpu_peak(progress: ProgressFn | None = None) -> dict[str, Any] | None:
    """The same ceilings on the first CUDA device with CUDA-event timers; None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    from infermeter.machine.ceilings_gpu import GPU_MATRIX_SIZE, GPU_PROBES, gpu_bandwidth_bytes

    tasks = [
        (engine, precision, builder, gpu_bandwidth_bytes() if precision == "bandwidth" else GPU_MATRIX_SIZE)
        for engine, precision, builder in GPU_PROBES
    ]
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    try:
        probes, rounds = visit_round_robin(tasks, 0, progress)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    return {
        "device": f"cuda:0 {torch.cuda.get_device_name(0)}",
        "matrix_size": GPU_MATRIX_SIZE,
        "rounds": rounds,
        "speed_variation": speed_variation(probes),
        **_ceilings(probes),
        "probes": probes,
    }


def measure_peak(threads: int | None = None, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Measure the CPU ceilings (and the GPU's when CUDA is present), uncached."""
    from infermeter.results.env import default_threads

    threads = threads or default_threads()
    start = time.perf_counter()
    matrix_size = 1024 if threads <= 16 else 2048
    result = measure_cpu_peak(threads, matrix_size, progress)
    gpu = measure_gpu_peak(progress)
    if gpu is not None:
        result["gpu"] = gpu
    result["measured_at"] = now_iso()
    result["duration_s"] = round(time.perf_counter() - start, 2)
    result["method"] = (
        f"fastest single call over {result['rounds']} round-robin visits per probe (until a round raised no ceiling "
        f"by > {CONVERGED_GAIN:.0%}), each {TRIALS} trials of >= {MIN_TRIAL_S}s after warm-up; compute: "
        f"{matrix_size // 2}^3 and {matrix_size}^3 matrix products (2n^3 ops) per engine and precision, fastest wins; "
        "bandwidth: copy (2x bytes) and STREAM triad "
        "(3x bytes) over arrays > last-level cache"
    )
    return result
