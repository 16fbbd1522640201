"""One engine's part of an explain run: its end-to-end P50 from a timed loop on the backend's own session, then a
separate profiled session (profiling changes timing) read by the engine's profiler. Engines without a per-unit
profiler keep their P50 row; an engine that fails keeps its error, in one line."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from infermeter.backends.registry import get_backend
from infermeter.core.case import Case
from infermeter.core.errors import describe_exception
from infermeter.explain.capture import captured_warnings
from infermeter.explain.original import OriginalGraph
from infermeter.explain.records import EngineProfile, Unit
from infermeter.models.spec import ModelSpec

WARMUP_RUNS = 3


@dataclass(frozen=True)
class EngineJob:
    """What every engine gets: the model (named as the alignment reads it), its generated feeds, the original
    graph, the case without its backend, and the profiled iteration count."""

    spec: ModelSpec
    feeds: dict[str, Any]
    original: OriginalGraph
    case: Case
    iterations: int


def timed_p50_us(session: Any, prepared: Any, iterations: int) -> float:
    """The median µs of `iterations` runs after a warm-up (run and sync only between the clock reads)."""
    for _ in range(WARMUP_RUNS):
        session.run(prepared)
        session.sync()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        session.run(prepared)
        session.sync()
        samples.append(time.perf_counter_ns() - start)
    return float(np.median(samples)) / 1e3


def _open(job: EngineJob, case: Case, profile: EngineProfile) -> Any:
    from infermeter.build.case_build import open_session

    with captured_warnings(profile.warnings):
        session = open_session(job.spec, case)
    profile.warnings.extend(text for _, text in session.warnings)
    return session


def _timed(job: EngineJob, case: Case, profile: EngineProfile) -> None:
    session = _open(job, case, profile)
    try:
        profile.p50_us = timed_p50_us(session, session.prepare(job.feeds), job.iterations)
        profile.precision = session.effective_precision()
    finally:
        session.close()


def _ort_units(job: EngineJob, case: Case, profile: EngineProfile) -> list[Unit]:
    """ONNX Runtime's units from a session made like the backend's, with profiling and the saved graph on."""
    import onnxruntime as ort

    from infermeter.backends.onnxruntime import OPT_LEVEL
    from infermeter.build.case_build import build_artifact, discard_private, load_model
    from infermeter.explain.engine_ort import profile_ort
    from infermeter.models.convert import onnx_for

    backend = get_backend(case.backend)()
    artifact = build_artifact(job.spec, case)  # an INT8 graph made on the fly is what the session reads
    model = load_model(job.spec, artifact)
    discard_private(artifact)

    def factory(hook: Any) -> Any:
        options = backend.session_options(ort, model, case, OPT_LEVEL.value(case))  # type: ignore[attr-defined]
        hook(options)
        with captured_warnings(profile.warnings):
            return backend.create(ort, str(onnx_for(model).path), options, case, model)  # type: ignore[attr-defined]

    feeds = {name: np.ascontiguousarray(value) for name, value in job.feeds.items()}
    return profile_ort(factory, feeds, job.iterations, job.original)


def _session_units(job: EngineJob, case: Case) -> tuple[Any, Any]:
    """The backend's own session loaded with its profiling options on, and the job's feeds prepared for it."""
    options = get_backend(case.backend).profiling_options or ()
    profiled = replace(case, options=tuple(sorted((dict(case.options) | dict(options)).items())))
    session = _open(job, profiled, EngineProfile(case.backend))  # its warnings were read from the timed load
    return session, session.prepare(job.feeds)


def _ov_units(job: EngineJob, case: Case, profile: EngineProfile) -> list[Unit]:
    """OpenVINO's primitives, from the backend's session compiled with PERF_COUNT on."""
    from infermeter.explain.engine_ov import ov_units

    session, prepared = _session_units(job, case)
    try:
        return ov_units(session, prepared, job.iterations, job.original)
    finally:
        session.close()


def _torch_units(job: EngineJob, case: Case, profile: EngineProfile) -> list[Unit]:
    """torch eager's module scopes, from the backend's session (its module, hooked for the profiled runs)."""
    from infermeter.explain.engine_torch import torch_units

    session, prepared = _session_units(job, case)
    try:
        return torch_units(session._module, lambda: session.run(prepared), job.iterations, job.original)
    finally:
        session.close()


def _torchscript_units(job: EngineJob, case: Case, profile: EngineProfile) -> list[Unit]:
    """TorchScript's module scopes, from the backend's session under torch.profiler, placed by the call order of
    one run of the same model in eager mode (`torch`, the case's options left out: they are TorchScript's)."""
    from infermeter.explain.engine_torchscript import torchscript_units

    session, prepared = _session_units(job, case)
    eager = _open(job, replace(case, backend="torch", options=()), EngineProfile("torch"))
    try:
        eager_prepared = eager.prepare(job.feeds)
        return torchscript_units(
            eager._module,
            lambda: eager.run(eager_prepared),
            lambda: session.run(prepared),
            job.iterations,
            job.original,
        )
    finally:
        eager.close()
        session.close()


# Per `Backend.unit_profiler` key: how its units are read, and whether a unit is a kernel the engine ran (fusions
# show) or a framework scope.
PROFILERS: dict[str, tuple[Callable[[EngineJob, Case, EngineProfile], list[Unit]], str]] = {
    "ort-kernels": (_ort_units, "kernel"),
    "ov-primitives": (_ov_units, "kernel"),
    "torch-modules": (_torch_units, "module"),
    "torchscript-modules": (_torchscript_units, "module"),
}


def profile_engine(engine: str, job: EngineJob) -> EngineProfile:
    """`engine`'s P50 and units; its error, in one line, when it cannot run or profile this model."""
    profile = EngineProfile(engine)
    case = replace(job.case, backend=engine)
    try:
        backend = get_backend(engine)
        reason = backend.available() or backend.unsupported_reason(job.spec, case)
        if reason:
            if backend.needs_torch_form and not job.spec.has_torch_form:
                reason = f"{engine} has no module map for a model given as ONNX ({reason})"
            profile.error = reason
            return profile
        _timed(job, case, profile)
        if backend.unit_profiler not in PROFILERS:
            profile.notes.append(f"{engine} gives no per-unit profile here: end-to-end time only")
            return profile
        read, profile.unit_kind = PROFILERS[backend.unit_profiler]
        profile.units = read(job, case, profile)
        profile.profiled = True
    except Exception as exc:
        profile.error = describe_exception(exc)
    return profile
