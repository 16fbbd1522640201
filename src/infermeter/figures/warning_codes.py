"""The closed set of warnings a measurement can carry: each code with what it means and its remedy."""

from __future__ import annotations

# code -> (what it means, what to do). The per-case message repeats the remedy with that case's figures.
WARNING_CODES: dict[str, tuple[str, str]] = {
    "high_cv": (
        "latency varies a lot between iterations",
        "close other programs, keep --threads at or below the physical cores, or raise --min-time",
    ),
    "too_few_samples": ("too few samples for a reported percentile", "raise --iterations or --min-time"),
    "slow_first_run": (
        "first inference much slower than steady state",
        "a cold process pays this once: warm services up before they take traffic; see --cold-start",
    ),
    "drift": (
        "latency drifted during the run",
        "thermal throttling, frequency scaling or background load: raise --warmup, rerun on an idle machine",
    ),
    "precision_mismatch": (
        "compared cases run in different effective precisions",
        "compare like with like: set --precision so that every engine runs the same one",
    ),
    "precision_not_requested": (
        "the engine runs a different precision than requested",
        "its speed is not a figure for the requested precision; compare it with cases of its own precision",
    ),
    "fp32_compute_storage": (
        "fp32 compute (fp16/bf16 storage): the engine computes this reduced-precision graph in fp32",
        "its speed is fp32 compute over smaller weights, not a reduced-precision figure: no such speedup is claimed; "
        "judge its accuracy with `quantize --to` (emulated) and time it on hardware with that arithmetic",
    ),
    "engine_warning": (
        "the engine said it could not optimize part of the model",
        "that part runs unoptimized and is a likely reason for the figure: see the engine's message under the table "
        "(the full text is in the results file's engine_log)",
    ),
    "generic_cpu_target": (
        "a compiler built the model for a generic CPU, not this one",
        "its code leaves this CPU's vector units unused, so its speed is not this machine's: build for the host "
        "(the backend's target option, e.g. -O iree.target_cpu=host)",
    ),
    "max_time_reached": (
        "the run stopped at --max-time before its stop rule was met",
        "raise --max-time, or accept a wider interval with --target-ci",
    ),
    "interference": (
        "other processes used the CPUs while the case was timed",
        "stop the other work (top shows it) and rerun; its speedup is not shown",
    ),
    "oversubscribed": (
        "the case runs more threads than the CPUs it may use",
        "lower --threads or --streams to fit the usable CPUs (affinity mask, cgroup quota)",
    ),
    "not_isolated": (
        "case ran without process isolation",
        "rerun without --no-isolation for per-case memory",
    ),
    "generator_lag": (
        "the load generator issued requests behind schedule",
        "latency still counts from the schedule; give the generator a free core or lower --qps",
    ),
    "random_calibration": (
        "int8 calibrated on random inputs",
        "its accuracy is unknown: calibrate on real data (--option quantize.calib=DATA) and check it "
        "(infermeter quantize --calib DATA --eval DATA)",
    ),
    "small_calibration_set": ("calibration set is small", "calibrate on at least 100 representative samples"),
    "calibration_unrepresentative": (
        "calibration data look unlike the evaluation data",
        "calibrate on data drawn from what the model will see in production",
    ),
    "accuracy_budget_missed": (
        "no quantized variant met the accuracy budget",
        "keep more layers in float (--max-drop), calibrate on more data, or fine-tune (--finetune)",
    ),
    "process_failed": (
        "one of the case's --repeat processes did not measure it",
        "its figures rest on the processes that did; see the case's `processes` runs for how the other ended",
    ),
    "memory_growth": (
        "resident memory grew steadily through the run",
        "allocator fragmentation under varying shapes: pad inputs into a few --buckets, or cap the shape range",
    ),
    "memory_growing": (
        "memory was still growing at the end of a soak, over shapes already seen",
        "pad into --buckets, narrow the --dynamic range, try --allocator jemalloc or arenas=2, or recycle the "
        "worker (serve --recycle-after N)",
    ),
}
