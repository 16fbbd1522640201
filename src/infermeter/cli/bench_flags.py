"""`infermeter bench`'s option groups besides the shared measurement group (`cli.options`): the matrix (what runs),
the loop flags only bench takes and the run (where results go, how cases are started). `llm bench` declares its own
flags (`cli.bench_generate`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from infermeter.cli.common import parse_options, parse_positive_ints, split_values
from infermeter.cli.options import BACKEND, CLUSTER, INPUT, OPTION, RESHAPE, THREADS, Decorator, option_group
from infermeter.core.case import MeasureSettings
from infermeter.measure.request import BenchRequest
from infermeter.measure.scenarios import COLD_START, LATENCY, Scenario, scenario_of
from infermeter.measure.shapes import parse_sizes

# Convenience flags that set a backend option (the same as `-O key=value`).
OPTION_FLAGS = {
    "compile_mode": "torch-compile.mode",
    "ort_opt_level": "onnxruntime.opt_level",
    "ov_hint": "openvino.hint",
}


def _sizes(values: tuple[str, ...], flag: str, points: int = 8) -> tuple[tuple[str, tuple[int, ...]], ...]:
    parsed = [parse_sizes(text, flag, points) for text in values]
    return tuple((name, tuple(sizes)) for name, sizes in parsed)


@dataclass(frozen=True, kw_only=True)
class MatrixFlags:
    """The flags that decide which cases run: backends, batches, precisions, shapes, threads, inputs, options."""

    backend: tuple[str, ...]
    fallback: tuple[str, ...]
    batch: tuple[str, ...]
    precision: tuple[str, ...]
    shape_mode: tuple[str, ...]
    dynamic: tuple[str, ...]
    buckets: tuple[str, ...]
    seq_len: int | None
    streams: tuple[str, ...]
    threads: int
    inputs: tuple[str, ...]
    data: str | None
    reshape: tuple[str, ...]
    option: tuple[str, ...]
    compile_mode: str | None
    ort_opt_level: str | None
    ov_hint: str | None

    def request(self, models: tuple[str, ...], settings: MeasureSettings, allocators: tuple[str, ...]) -> BenchRequest:
        """The flags parsed into bench's request (UsageError for a malformed value)."""
        from infermeter.models.input_flags import parse_input_flags
        from infermeter.models.reshape import parse_reshape

        shortcuts = {"compile_mode": self.compile_mode, "ort_opt_level": self.ort_opt_level, "ov_hint": self.ov_hint}
        flag_options = [f"{OPTION_FLAGS[k]}={v}" for k, v in shortcuts.items() if v]
        shapes, values = parse_input_flags(self.inputs)
        return BenchRequest(
            models=tuple(split_values(models)),
            backends=tuple(split_values(self.backend)),
            fallback=tuple(tuple(split_values([chain])) for chain in self.fallback),
            batch=tuple(parse_positive_ints(self.batch, "--batch")),  # none: 1,16, or the batch the model fixes
            precision=tuple(split_values(self.precision)),
            shape_mode=tuple(split_values(self.shape_mode)),
            streams=tuple(parse_positive_ints(self.streams, "--streams")),
            threads=self.threads,
            inputs=shapes,
            options=parse_options([*flag_options, *self.option]),
            dynamic=_sizes(self.dynamic, "--dynamic", scenario_of(settings).dynamic_points),
            buckets=_sizes(self.buckets, "--buckets"),
            seq_len=self.seq_len,
            settings=settings,
            data=self.data,
            input_values=values,
            reshape=parse_reshape(self.reshape),
            allocators=allocators,
        )


matrix_options: Decorator = option_group(
    "matrix",
    MatrixFlags,
    BACKEND,
    click.option(
        "--fallback",
        multiple=True,
        help="A fallback chain: the first of these backends that runs here, e.g. "
        "tensorrt,onnxruntime-cuda,onnxruntime.",
    ),
    click.option(
        "--batch",
        multiple=True,
        help="Batch sizes, e.g. 1,16 (default: 1,16, or the batch the model fixes).",
    ),
    click.option(
        "--precision",
        multiple=True,
        help="fp32, fp16, bf16, int8 (default: the model's own, int8 for a quantized model, else fp32).",
    ),
    click.option("--shape-mode", multiple=True, default=["static"], show_default=True, help="static and/or dynamic."),
    click.option(
        "--dynamic", multiple=True, help="Dynamic mode: sizes a symbolic dim takes, e.g. seq=16..128 or batch=1,4,16."
    ),
    click.option(
        "--buckets", multiple=True, help="Dynamic mode: pad a dim up to the nearest bucket, e.g. seq=32,64,128."
    ),
    click.option("--seq-len", type=int, help="Sequence length of transformer models (their `seq` dim)."),
    click.option(
        "--streams", multiple=True, default=["1"], show_default=True, help="Concurrent inference requests, e.g. 1,4."
    ),
    THREADS,
    INPUT,
    click.option(
        "--data",
        help="Real inputs rotated through the loop, batched: an .npz, a folder of .npy or of images, or "
        "file.py:function.",
    ),
    RESHAPE,
    OPTION,
    click.option("--compile-mode", help="torch-compile mode (default, reduce-overhead, max-autotune...)."),
    click.option(
        "--ort-opt-level",
        type=click.Choice(["disable", "basic", "extended", "all"]),
        help="ONNX Runtime graph optimization level.",
    ),
    click.option("--ov-hint", type=click.Choice(["latency", "throughput"]), help="OpenVINO performance hint."),
)


@dataclass(frozen=True, kw_only=True)
class LoopFlags:
    """The measurement flags only bench takes, beside the shared group: replicates, order, build time, inputs."""

    repeat: int
    no_interleave: bool
    build_timeout: float
    input_sets: int
    check_parity: bool

    def settings_fields(self) -> dict[str, Any]:
        """These flags as `MeasureSettings` fields, to add to the shared group's."""
        return {
            "repeat": self.repeat,
            "interleave": not self.no_interleave,
            "build_timeout_s": self.build_timeout,
            "input_sets": self.input_sets,
            "check_parity": self.check_parity,
        }


loop_options: Decorator = option_group(
    "loop",
    LoopFlags,
    click.option(
        "--repeat",
        type=int,
        default=1,
        show_default=True,
        help="Run each case in this many fresh processes spread over the run; its P50 interval and `compare` then "
        "use the processes as replicates (costs N times the measuring time; docs/repeat.md).",
    ),
    click.option(
        "--no-interleave", is_flag=True, help="Time the cases of a comparison one after another, not in rounds."
    ),
    click.option(
        "--build-timeout",
        type=float,
        default=3600.0,
        show_default=True,
        help="Seconds one artifact's build (compilation, engine build, auto-tuning) may take, apart from the case.",
    ),
    click.option(
        "--input-sets", type=int, default=4, show_default=True, help="Distinct input sets rotated through the loop."
    ),
    click.option(
        "--check-parity",
        is_flag=True,
        help="Check each case's outputs against the fp32 reference; no speedup when wrong.",
    ),
)


@dataclass(frozen=True, kw_only=True)
class RunFlags:
    """Where the results go and how the cases are started: output, resume, history, the plan's scenario
    (`--cold-start`), isolation, cluster."""

    output: Path | None
    resume: Path | None
    resume_extend: bool
    no_roofline: bool
    no_history: bool
    scenario: Scenario
    no_isolation: bool
    cluster: str | None
    machines: tuple[str, ...]

    @property
    def plans(self) -> bool:
        """Whether the matrix flags make a plan: not with a bare --resume, which takes the file's plan."""
        return self.resume is None or self.resume_extend


run_options: Decorator = option_group(
    "run",
    RunFlags,
    click.option(
        "--output", "-o", type=click.Path(path_type=Path), help="Results file (default: results/bench-<time>.json)."
    ),
    click.option(
        "--resume",
        type=click.Path(path_type=Path),
        help="Finish the plan stored in a results file (its remaining cases, in order); no matrix flags with it.",
    ),
    click.option(
        "--resume-extend", is_flag=True, help="With --resume: add the cases of the matrix flags given to the plan."
    ),
    click.option(
        "--no-roofline", is_flag=True, help="Skip achieved GFLOP/s and the fraction of this machine's measured peak."
    ),
    click.option("--no-history", is_flag=True, help="Do not record this run in the history database."),
    click.option(
        "--cold-start",
        "scenario",
        is_flag=True,
        # The one place the flag becomes the plan's scenario.
        callback=lambda _ctx, _param, value: COLD_START if value else LATENCY,
        help="Time a fresh process to its first result per backend, without and with caches.",
    ),
    click.option("--no-isolation", is_flag=True, help="Run cases in this process (debugging only)."),
    CLUSTER,
    click.option(
        "--machines",
        multiple=True,
        help="With --cluster: the machine classes (node label infermeter.io/machine) every case runs on, e.g. "
        "xeon-amx,epyc-zen4, or all.",
    ),
)
