"""A case's `ComputePrecision` record from its loaded session: the weights' precision and what the engine computed
in (`backends.compute_precision` reads it from the engine)."""

from __future__ import annotations

from typing import Any

from infermeter.backends.base import Session
from infermeter.core.case import Case
from infermeter.models.spec import ModelSpec
from infermeter.results.records import write_record
from infermeter.results.records.precision import ComputePrecision
from infermeter.results.schema import CaseResult, CaseWarning


def read_back(spec: ModelSpec, case: Case, session: Session, prepared: Any, result: CaseResult) -> None:
    """After warm-up, untimed: what the engine computes in (`Session.read_compute` on the case's own feeds), into
    `precision_effective` and the `ComputePrecision` record, with the notes and warnings the reading added."""
    notes, warnings = len(session.notes), len(session.warnings)
    session.read_compute(prepared)
    result.notes += session.notes[notes:]
    result.warnings += [CaseWarning(code, message) for code, message in session.warnings[warnings:]]
    result.precision_effective = session.effective_precision()
    write_record(result, compute_record(spec, case, session, result.precision_effective))


def compute_record(spec: ModelSpec, case: Case, session: Session, computed: str) -> ComputePrecision:
    """The record of `session` (loaded for `case` of `spec`) that computed in `computed`. The storage precision is
    what the session says it was given, else the model file's own, else the precision asked for."""
    storage = session.stored_precision or spec.precision or ("fp32" if case.precision == "int8" else case.precision)
    own = spec.precision is not None and storage == spec.precision and spec.precision != "fp32"
    return ComputePrecision(storage, computed, own, session.compute_evidence or "")
