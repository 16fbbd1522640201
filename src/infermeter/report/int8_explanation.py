"""Why an INT8 row won or lost: its speed against the FP32 row of the same engine in the same results, with the
sentence its per-node profile gives (`results.records.int8_run.why_int8`), for the bench table's footnotes and
`optimize`'s journal."""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.results.records import Int8Run, read_record, why_int8
from infermeter.results.schema import CaseResult


def _plain_options(case: CaseResult) -> dict[str, str]:
    """The options of `case` as its FP32 twin carries them (without those that only make the INT8 graph)."""
    from infermeter.backends.options import for_precision

    return dict(for_precision(tuple(case.options.items()), "fp32"))


def fp32_twin(case: CaseResult, cases: Sequence[CaseResult]) -> CaseResult | None:
    """The ok FP32 row of the same model, engine, batch, shapes, threads and streams as `case`: the one with the
    same options when there is one, else one whose options differ only in how INT8 is made."""
    candidates = [
        other
        for other in cases
        if other.ok
        and other.precision == "fp32"
        and other.latency_ms is not None
        and (other.model, other.backend, other.batch, other.shape_mode, other.threads, other.streams)
        == (case.model, case.backend, case.batch, case.shape_mode, case.threads, case.streams)
    ]
    exact = [other for other in candidates if other.options == case.options]
    plain = [other for other in candidates if _plain_options(other) == _plain_options(case)]
    found = exact or plain
    return found[0] if found else None


def int8_speedup(case: CaseResult, cases: Sequence[CaseResult]) -> float | None:
    """FP32 P50 / INT8 P50 of `case` against its FP32 twin (None: no twin measured)."""
    twin = fp32_twin(case, cases)
    if twin is None or twin.latency_ms is None or case.latency_ms is None or case.latency_ms.p50 <= 0:
        return None
    return twin.latency_ms.p50 / case.latency_ms.p50


def int8_explanation(case: CaseResult, cases: Sequence[CaseResult]) -> str:
    """The sentence on where an INT8 row's time went (against its FP32 twin when measured); empty when the row
    carries no profile."""
    record = read_record(case, Int8Run)
    if record is None or not case.ok:
        return ""
    if record.profile is None:
        return f"no per-node profile: {record.profile_error}" if record.profile_error else ""
    return why_int8(record, int8_speedup(case, cases))
