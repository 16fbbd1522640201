"""The served model: sessions loaded through the backend contract (one per worker), warm-up, request
validation against the model's inputs, and shape buckets (`serve.buckets`: pad along a dynamic axis; the outputs
sliced back here)."""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.backends.base import Session
from infermeter.backends.registry import get_backend
from infermeter.build.case_build import open_session
from infermeter.core.case import Case, DataSource
from infermeter.core.errors import BackendUnavailable, InputSpecError, describe_exception
from infermeter.models.inputs import resolve_shapes
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec
from infermeter.serve.buckets import BucketSpec, pad_to_bucket, parse_buckets
from infermeter.serve.protocol import ProtocolError, datatype_of
from infermeter.serve.request_check import check_names, check_tensor, request_signature

if TYPE_CHECKING:
    from infermeter.models.samples import SampleSet


@dataclass(frozen=True)
class ServeConfig:
    """Everything `infermeter serve` is told: the model, the backend case and the batching policy."""

    model: str
    backend: str
    _: KW_ONLY  # the rest by keyword
    precision: str = "fp32"
    max_batch: int = 8
    max_delay_ms: float = 2.0
    buckets: tuple[str, ...] = ()
    workers: int = 1
    max_queue: int = 256
    threads: int = 0
    options: tuple[tuple[str, str], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    name: str | None = None
    api_key: str | None = None
    max_body_mb: float = 64.0
    warmup_iterations: int = 3
    data: str | None = None  # real samples for the warm-up (`--data`)
    input_values: tuple[tuple[str, str], ...] = ()  # constants a request may leave out (`--input NAME=VALUE`)
    reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()  # declared dims rewritten (`--reshape`, models.reshape)
    triton_config: str | None = None  # the config.pbtxt the model came from (`serve REPO`)
    repository: str | None = None  # the Triton repository it belongs to, when a whole one was given
    recycle_after: int = 0  # a worker reloads its session after this many batches (0: never), `--recycle-after`


@dataclass
class PreparedRequest:
    """A validated request: feeds padded to their buckets, its batch rows, signature, and how to slice back."""

    feeds: dict[str, np.ndarray]
    rows: int
    signature: Hashable
    # (axis, original length, padded length): outputs with that axis at the padded length are sliced back.
    unpad: tuple[int, int, int] | None = None


@dataclass
class ServedModel:
    """A model loaded for serving. `load()` does the slow work; `ready` turns true after warm-up."""

    config: ServeConfig
    spec: ModelSpec = field(init=False)
    _: KW_ONLY  # the rest by keyword
    name: str = field(init=False)
    buckets: tuple[BucketSpec, ...] = field(init=False)
    options: tuple[tuple[str, str], ...] = field(init=False)
    sessions: list[Session] = field(default_factory=list)
    output_meta: list[dict[str, Any]] = field(default_factory=list)
    precision_effective: str | None = None
    load_s: float | None = None
    ready: bool = False
    warmup_errors: list[str] = field(default_factory=list)
    data: tuple[DataSource, SampleSet] | None = None
    served: list[int] = field(default_factory=list)  # batches each worker's session has run since it was loaded
    recycles: int = 0

    def __post_init__(self) -> None:
        self.spec = resolve_model(self.config.model, self.config.reshape)
        self.name = self.config.name or (Path(self.spec.ref).stem if self.spec.kind != "zoo" else self.spec.name)
        self.buckets = parse_buckets(self.config.buckets, self.spec.inputs)
        backend = get_backend(self.config.backend)
        reason = backend.available()
        if reason:
            raise BackendUnavailable(f"backend {self.config.backend} is not available here: {reason}")
        from infermeter.backends.options import options_for

        # Checked here, before any session loads: a bad `-O` is a usage error, not a failed worker.
        self.options = options_for(self.config.backend, self.config.options)
        from infermeter.models.feeds_data import check_input_values, open_data

        check_input_values(self.spec.inputs, self.config.input_values)
        if self.config.data is not None:
            self.data = open_data(self.spec.inputs, self.config.input_values, self.config.data)

    def case(self, threads: int) -> Case:
        """The backend case of one worker's session: dynamic shapes, batch up to max_batch."""
        return Case(
            self.spec.ref,
            self.config.backend,
            precision=self.config.precision,
            batch=self.config.max_batch,
            shape_mode="dynamic",
            threads=threads,
            input_shapes=self.config.input_shapes,
            options=self.options,
            reshape=self.spec.reshape,
        )

    def load(self, threads: int) -> None:
        """Load one session per worker, then warm each up (every bucket size once); sets `ready`."""
        backend = get_backend(self.config.backend)
        case = self.case(threads)
        reason = backend.unsupported_reason(self.spec, case)
        if reason:
            raise BackendUnavailable(reason)
        started = time.perf_counter()
        for _ in range(self.config.workers):
            self.sessions.append(open_session(self.spec, case))
        self.served = [0] * len(self.sessions)
        self.load_s = time.perf_counter() - started
        self.precision_effective = self.sessions[0].effective_precision()
        for feeds in self._warmup_feeds():
            for session in self.sessions:
                try:
                    for _ in range(self.config.warmup_iterations):
                        outputs = self.run(session, feeds)
                except Exception as exc:
                    # Generated inputs may be out of the model's domain (token ids beyond its vocabulary): the
                    # first real requests warm it up instead; a broken model shows in their 500s.
                    self.warmup_errors.append(describe_exception(exc))
                    continue
                self.output_meta = [
                    {"name": name, "datatype": datatype_of(out.dtype), "shape": [-1, *out.shape[1:]]}
                    for name, out in zip(self.output_names(len(outputs)), outputs, strict=True)
                ]
        self.ready = True

    def _warmup_feeds(self) -> list[dict[str, np.ndarray]]:
        from infermeter.models.feeds_data import batched_sets, generated_feed_sets, with_constants

        values = self.config.input_values
        if self.data is not None:  # a few real samples, one per request, as requests will come
            samples = self.data[1]
            sets = batched_sets(self.spec.inputs, samples, 1, min(samples.count, 4))
            return [with_constants(self.spec.inputs, values, self._constant_shapes(), [feeds])[0] for feeds in sets]
        lengths: list[int | None] = [*sorted({size for bucket in self.buckets for size in bucket.sizes})] or [None]
        feed_sets = []
        for length in lengths:
            overrides = dict(self.config.input_shapes)
            for bucket in self.buckets:
                spec = next(s for s in self.spec.inputs if s.name == bucket.input_name)
                dims = [d if isinstance(d, int) else 1 for d in spec.shape]
                dims[bucket.axis] = length or 1
                overrides.setdefault(spec.name, tuple(dims))
            try:
                shapes = resolve_shapes(self.spec.inputs, 1, tuple(overrides.items()))
            except InputSpecError:
                continue  # a dynamic dim we cannot guess: the first request warms it instead
            feed_sets.extend(generated_feed_sets(self.spec.inputs, values, shapes, 1, seed=0))
        return feed_sets

    def _constant_shapes(self) -> dict[str, tuple[int, ...]]:
        names = dict(self.config.input_values)
        constant = [spec for spec in self.spec.inputs if spec.name in names]
        return resolve_shapes(constant, 1, self.config.input_shapes)

    def output_names(self, count: int) -> list[str]:
        """The model's output names, or output_0.. when the backend returned a different number."""
        names = list(self.spec.output_names)
        return names if len(names) == count else [f"output_{i}" for i in range(count)]

    @staticmethod
    def run(session: Session, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """One inference through the backend contract: prepare, run, sync, outputs as numpy."""
        outputs = session.run(session.prepare(feeds))
        session.sync()
        return session.outputs_to_numpy(outputs)

    def count_and_recycle(self, worker: int, threads: int) -> bool:
        """Count a batch run by `worker`; after `recycle_after` of them, close its session, give the freed heap
        back to the system and load a fresh one, warmed up (only that worker's thread calls this, so no other
        request is using the session). Releases what an engine's arena, shape caches and a fragmented heap held;
        True when it recycled."""
        self.served[worker] += 1
        if not self.config.recycle_after or self.served[worker] < self.config.recycle_after:
            return False
        from infermeter.measure.allocator import release_memory

        self.sessions[worker].close()
        release_memory()
        session = open_session(self.spec, self.case(threads))
        for feeds in self._warmup_feeds():
            try:
                self.run(session, feeds)
            except Exception:  # as at load: real requests warm up what generated inputs could not
                continue
        self.sessions[worker] = session
        self.served[worker] = 0
        self.recycles += 1
        return True

    def close(self) -> None:
        """Close every session."""
        for session in self.sessions:
            session.close()
        self.sessions.clear()

    def metadata(self) -> dict[str, Any]:
        """Model metadata (Open Inference Protocol) plus infermeter's backend and effective precision."""
        inputs = [
            {
                "name": s.name,
                "datatype": datatype_of(s.dtype),
                "shape": [d if isinstance(d, int) else -1 for d in s.shape],
            }
            for s in self.spec.inputs
        ]
        outputs = self.output_meta or [{"name": n, "datatype": "", "shape": []} for n in self.spec.output_names]
        return {
            "name": self.name,
            "versions": ["1"],
            "platform": f"infermeter_{self.config.backend}",
            "inputs": inputs,
            "outputs": outputs,
            "parameters": {
                "backend": self.config.backend,
                "precision": self.config.precision,
                "precision_effective": self.precision_effective,
                "max_batch": self.config.max_batch,
                "max_delay_ms": self.config.max_delay_ms,
                "workers": self.config.workers,
                "buckets": [{"input": b.input_name, "axis": b.axis, "sizes": list(b.sizes)} for b in self.buckets],
                **self._input_parameters(),
            },
        }

    def _input_parameters(self) -> dict[str, Any]:
        """The constants a request may leave out, and the data the server warmed up on, when given."""
        out: dict[str, Any] = {}
        if self.config.input_values:
            out["constant_inputs"] = dict(self.config.input_values)
        if self.data is not None:
            out["data"] = self.data[0].describe()
        return out

    def validate(self, inputs: dict[str, np.ndarray]) -> PreparedRequest:
        """Check a request's tensors against the model (names, dtypes, ranks, fixed dims, batch), pad them to
        their buckets; ProtocolError(400) says what does not fit. Constant inputs (`--input NAME=VALUE`) may be
        left out: the server fills them in."""
        from infermeter.models.feeds_data import fill_constants

        expected = {s.name: s for s in self.spec.inputs}
        try:
            inputs = fill_constants(self.spec.inputs, self.config.input_values, inputs)
        except InputSpecError as exc:
            raise ProtocolError(400, str(exc)) from None
        check_names(list(expected), inputs)
        rows: int | None = None
        feeds: dict[str, np.ndarray] = {}
        unpad: tuple[int, int, int] | None = None
        batched = self.batched
        for name, spec in expected.items():
            array = inputs[name]
            check_tensor(spec, array, name in batched)
            if spec.batch_axis is not None and name in batched:  # a control vector's first dim is no batch
                count = array.shape[spec.batch_axis]
                if rows is not None and count != rows:
                    raise ProtocolError(400, f"inputs disagree on the batch size ({rows} vs {count} in {name!r})")
                rows = count
            for bucket in self.buckets:
                if bucket.input_name == name:
                    array, padding = pad_to_bucket(array, bucket)
                    unpad = unpad or padding
            feeds[name] = array
        rows = rows or 1
        if rows < 1 or rows > self.config.max_batch:
            raise ProtocolError(400, f"a request may carry 1 to {self.config.max_batch} rows (--max-batch); got {rows}")
        return PreparedRequest(feeds, rows, request_signature(feeds, batched), unpad)

    @property
    def batched(self) -> set[str]:
        """The inputs whose first axis is the batch (`models.inputs.batched_inputs`); the others (a control vector,
        a scalar) hold one value per request, which only requests of the same value share in a batch."""
        from infermeter.models.inputs import batched_inputs

        return batched_inputs(self.spec.inputs)

    def unpad(self, outputs: list[np.ndarray], request: PreparedRequest) -> list[np.ndarray]:
        """Slice outputs that carry the padded axis back to the request's own length."""
        if request.unpad is None:
            return outputs
        axis, original, padded = request.unpad
        sliced = []
        for output in outputs:
            if output.ndim > axis and output.shape[axis] == padded and original != padded:
                index = [slice(None)] * output.ndim
                index[axis] = slice(0, original)
                output = output[tuple(index)]
            sliced.append(output)
        return sliced


def worker_threads(total_threads: int, workers: int) -> int:
    """Intra-op threads per worker session so that all workers together use `total_threads` cores."""
    return max(1, math.floor(total_threads / workers))
