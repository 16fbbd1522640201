"""The INT8 record of a case at `--precision int8` (`results.records.Int8Run`): the quantizer that made its graph
(from the build stage's artifact), the precision and per-layer mix read back from the loaded session, and, where
the backend profiles per node (`Backend.profiling_options`), an untimed profile pass after the case is measured:
the same artifact loaded again with the engine's counters on, and the float model compiled the same way (its FP32
twin) when the INT8 graph was made from one. Called by `measure.execute.CaseRunner`; nothing here is timed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infermeter.backends.base import Session
from infermeter.backends.registry import get_backend
from infermeter.core.case import Case
from infermeter.core.errors import describe_exception
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.records.int8_run import GIVEN, Int8Run, LayerProfile

# Untimed runs of the profile pass (per-node counters are averaged over them).
PROFILE_ITERATIONS = 20


def int8_run(case: Case, artifact: Artifact | None, session: Session) -> Int8Run:
    """What an INT8 case ran, read back from its loaded session: requested and effective precision, the
    quantizer (`given` when the model came quantized), whose graph it was (`own`, `cross-fed`, `given`) and the
    per-layer precision mix."""
    quantizer = artifact.quantizer if artifact is not None and artifact.quantizer else GIVEN
    own = get_backend(case.backend).int8_quantizer
    source = GIVEN if quantizer == GIVEN else ("own" if quantizer == own else "cross-fed")
    return Int8Run(
        case.precision, session.effective_precision(), quantizer=quantizer, source=source, mix=session.layer_mix()
    )


def _profiled(case: Case, **changes: Any) -> Case | None:
    options = get_backend(case.backend).profiling_options
    if options is None:
        return None
    merged = tuple(sorted((dict(case.options) | dict(options)).items()))
    return replace(case, options=merged, **changes)


def _profile(spec: ModelSpec, case: Case, artifact: Artifact | None, prepared: Any) -> LayerProfile | None:
    from infermeter.build.case_build import load_session

    session = load_session(spec, case, artifact)
    try:
        return session.layer_profile(prepared, PROFILE_ITERATIONS)
    finally:
        session.close()


def with_profile(record: Int8Run, spec: ModelSpec, case: Case, artifact: Artifact | None, prepared: Any) -> Int8Run:
    """`record` with the per-node profile of the case's INT8 graph and of its FP32 twin (when the graph was made
    from `spec` on the fly), each loaded with the backend's profiling options on and run on `prepared`; a backend
    without per-node counters leaves the record as it is, and a failure is recorded (`profile_error`), never
    raised: the case's measurement stands."""
    profiled = _profiled(case)
    if profiled is None:
        return record
    try:
        profile = _profile(spec, profiled, artifact, prepared)
        twin = None
        if record.quantizer != GIVEN:
            twin_case = _profiled(case, precision="fp32")
            assert twin_case is not None
            twin = _profile(spec, twin_case, None, prepared)
    except Exception as exc:
        return replace(record, profile_error=describe_exception(exc))
    return replace(record, profile=profile, fp32_profile=twin)
