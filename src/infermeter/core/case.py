"""The controlled variables of one benchmark case, shared by every layer (plain data, no framework imports)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
SHAPE_MODES = ("static", "dynamic")


def identity_digest(identity: str, length: int = 12) -> str:
    """The hex digest that ends every case id (inference, generation and load cases alike): `compare` and `--resume`
    pair cases by id, so every kind builds its id's digest here, from a text naming its controlled variables."""
    return hashlib.sha256(identity.encode()).hexdigest()[:length]


# Case ids: composed here for every kind of case (inference, generation, load, endpoint levels). `compare` and
# `--resume` pair cases by id, so a composer's text never changes: results files written before must keep theirs.


def inference_case_id(identity: dict[str, object]) -> str:
    """An inference case's id from its identity (`Case.id`: the controlled variables, later ones only when set)."""
    digest = identity_digest(json.dumps(identity, sort_keys=True))
    head = f"{identity['backend']}-{identity['precision']}-b{identity['batch']}-{identity['shape_mode']}"
    return f"{head}-t{identity['threads']}-{digest}"


def generation_case_id(
    model: str,
    backend: str,
    prompt_len: int,
    gen_len: int,
    batch: int,
    threads: int,
    options: Sequence[tuple[str, str]],
) -> str:
    """A generation case's id (`llm bench`)."""
    opts = ",".join(f"{k}={v}" for k, v in options)
    head = f"{backend}-p{prompt_len}-g{gen_len}-b{batch}-t{threads}" + (f"-{opts}" if opts else "")
    return f"{head}-{identity_digest(f'{model}|{opts}', 8)}"


def load_case_id(model: str, backend: str, precision: str, batch: int, scenario: str, options: dict[str, str]) -> str:
    """A load run's id (`infermeter load`): one per scenario and its rate or concurrency (in `options`)."""
    identity = "-".join(f"{k}={v}" for k, v in sorted(options.items()))
    digest = identity_digest(f"{model}|{backend}|{precision}|{batch}|{identity}")
    return f"load-{backend}-{precision}-b{batch}-{scenario}-{digest}"


def endpoint_case_id(identity: str, concurrency: int, prompt_len: int, gen_len: int) -> str:
    """An OpenAI-compatible endpoint level's id (`llm load`); `identity` names endpoint, model and API."""
    return f"openai-c{concurrency}-p{prompt_len}-g{gen_len}-{identity_digest(identity, 8)}"


def model_family(model: str) -> str:
    """A generation model without its GGUF level (`tiny-llama:q4_k_m` -> `tiny-llama`): the levels of one model are
    compared with each other. A path is its own family. (Not for inference refs: `file.py:factory` names a model.)"""
    name, sep, level = model.partition(":")
    return name if sep and name and "/" not in level and not Path(model).exists() else model


def comparison_key(
    model: str,
    batch: int,
    shape_mode: str,
    shapes: object,
    threads: int,
    streams: int,
    data_hash: str | None,
    input_values: Iterable[tuple[str, str]],
    machine: str | None,
) -> tuple[object, ...]:
    """The one definition of a comparison group: cases that differ only in backend, precision or options are
    compared (and interleaved) against the first of their group, never across inputs (shapes, `--data`,
    `--input NAME=VALUE`), threads or machines. `Case.group_key` (a case to run) and `report.summary
    .comparison_group` (a result) both build it here, each from what it holds."""
    return (model, batch, shape_mode, shapes, threads, streams, data_hash, tuple(sorted(input_values)), machine)


@dataclass(frozen=True, kw_only=True)
class MeasureSettings:
    """How long and how often to measure. Not part of a case's identity: changing them re-measures the same case."""

    warmup_iterations: int = 10
    min_iterations: int = 10
    min_time_s: float = 1.0
    max_time_s: float = 60.0
    input_sets: int = 4
    case_timeout_s: float = 600.0
    seed: int = 0
    check_parity: bool = False  # after measuring, compare the case's outputs with the fp32 reference
    target_ci: float = 0.01  # stop once the P50's 95% interval is within ±this fraction (0: no precision target)
    rounds: int = 10  # interleaved comparisons: at least this many rounds (see measure.interleave)
    interleave: bool = True  # a comparison group of 2+ cases runs in interleaved rounds
    build_timeout_s: float = 3600.0  # one artifact's build (compile, engine build, auto-tuning), apart from the case
    # A soak (`bench --soak N`, measure.soak_case) instead of the stop rule: N requests (0: no soak), or minutes.
    soak_requests: int = 0
    soak_minutes: float = 0.0
    soak_lengths: str = "uniform"  # the distribution of the --dynamic sizes (measure.soak_stream.LENGTHS)
    soak_sample_every: int = 100  # memory sampled every this many requests (and at least every 2 s)
    soak_recycle_after: int = 0  # the soak reloads its session after this many requests (serve --recycle-after)
    memory_limit_mb: float = 0.0  # each case under this much memory (measure.memlimit); 0: no limit
    repeat: int = 1  # each case in this many fresh processes spread over the run (measure.repeat)

    @property
    def soaking(self) -> bool:
        """Whether cases run a soak rather than the stop rule."""
        return self.soak_requests > 0 or self.soak_minutes > 0

    @property
    def burst_s(self) -> float:
        """Seconds of one case's burst in an interleaved round: --min-time spread over --rounds bursts."""
        return max(self.min_time_s / max(self.rounds, 1), 0.02)


@dataclass(frozen=True)
class DataSource:
    """Real inputs for a case (`--data`): an .npz, a folder of .npy files or of images, or `file.py:function`.

    `ref` is absolute (a worker may start elsewhere), `content_hash` identifies what it holds (so results of
    different data never share a case id) and `samples` is how many samples it gave when the plan was made."""

    ref: str
    content_hash: str
    samples: int

    def describe(self) -> str:
        """`REF (N samples, sha256 HASH)` for notes and results files."""
        return f"{self.ref} ({self.samples} samples, sha256 {self.content_hash})"


@dataclass(frozen=True)
class Case:
    """One point of the benchmark matrix: model × backend × precision × batch × shape mode × threads (+ options).

    `input_shapes` holds user overrides from `--input NAME:AxBxC` as (name, dims) pairs; `options` holds
    backend options from `--option key=value` as sorted (key, value) pairs, so the case stays hashable.
    In `dynamic` shape mode, `dynamic` lists the sizes each symbolic dim takes (`--dynamic seq=16..128`) and
    `buckets` the sizes inputs are padded up to (`--buckets seq=32,64,128`). `streams` is the number of
    concurrent inference requests (`--streams N`). `data` names real inputs (`--data`), rotated and batched
    instead of generated ones, and `input_values` the inputs set to a constant (`--input NAME=VALUE`).
    `machine` is the class of cluster node the case runs on (`bench --cluster --machines`), None to run here or on
    any node. `reshape` holds the dims written over the model's declared ones (`--reshape NAME:DIMS`,
    `models.reshape`): the model that runs is not the file as it was declared. `allocator` is the malloc its
    worker runs with (`--allocator`, measure.allocator; empty: the default).
    """

    model: str
    backend: str
    _: KW_ONLY  # the rest by keyword
    precision: str = "fp32"
    batch: int = 1
    shape_mode: str = "static"
    threads: int = 1
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    settings: MeasureSettings = field(default_factory=MeasureSettings, compare=False)
    dynamic: tuple[tuple[str, tuple[int, ...]], ...] = ()
    buckets: tuple[tuple[str, tuple[int, ...]], ...] = ()
    streams: int = 1
    data: DataSource | None = None
    input_values: tuple[tuple[str, str], ...] = ()
    machine: str | None = None
    reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()
    allocator: str = ""

    @property
    def id(self) -> str:
        """A stable identifier of the controlled variables, used by `--resume` and by `compare` to pair cases."""
        identity: dict[str, object] = {
            "model": self.model,
            "backend": self.backend,
            "precision": self.precision,
            "batch": self.batch,
            "shape_mode": self.shape_mode,
            "threads": self.threads,
            "input_shapes": [[name, list(dims)] for name, dims in self.input_shapes],
            "options": [list(kv) for kv in self.options],
        }
        # Added later: part of the identity only when set, so that older results keep their ids.
        if self.dynamic:
            identity["dynamic"] = [[name, list(sizes)] for name, sizes in self.dynamic]
        if self.buckets:
            identity["buckets"] = [[name, list(sizes)] for name, sizes in self.buckets]
        if self.streams != 1:
            identity["streams"] = self.streams
        if self.data is not None:
            identity["data"] = self.data.content_hash
        if self.input_values:
            identity["input_values"] = [list(kv) for kv in self.input_values]
        if self.machine is not None:
            identity["machine"] = self.machine
        if self.reshape:
            identity["reshape"] = [[name, list(dims)] for name, dims in self.reshape]
        if self.allocator:
            identity["allocator"] = self.allocator
        return inference_case_id(identity)

    @property
    def group_key(self) -> tuple[object, ...]:
        """The comparison group: cases that differ only in backend, precision or options are compared (and
        interleaved) against the first of their group; never across machines."""
        return comparison_key(
            self.model,
            self.batch,
            self.shape_mode,
            (self.input_shapes, self.reshape),
            self.threads,
            self.streams,
            self.data.content_hash if self.data is not None else None,
            self.input_values,
            self.machine,
        )

    @property
    def label(self) -> str:
        """How a progress display names the case: `model · backend precision bN shape`."""
        return f"{self.model} · {self.backend} {self.precision} b{self.batch} {self.shape_mode}"

    def option(self, key: str, default: str | None = None) -> str | None:
        """The value of backend option `key` (as given with `--option key=value`), or `default`."""
        for name, value in self.options:
            if name == key:
                return value
        return default
