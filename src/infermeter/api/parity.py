"""`parity` as a library call's output: the backends' parity records as a results file (a blank case per backend
carrying its parity record), as `infermeter parity -o` writes it."""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.core.case import Case
from infermeter.machine.environment import new_results_file
from infermeter.measure.execute import blank_result
from infermeter.models.spec import ModelSpec
from infermeter.parity import set_case_parity
from infermeter.results.records import ParityRecord
from infermeter.results.schema import ResultsFile

# A parity record's status as a case's: a failed comparison still ran (`ok`, its parity field says `fail`).
_CASE_STATUS = {"pass": "ok", "fail": "ok", "error": "failed", "unavailable": "unavailable"}


def parity_results_file(
    spec: ModelSpec, cases: Sequence[Case], records: Sequence[ParityRecord], command: Sequence[str]
) -> ResultsFile:
    """One case per compared backend, each with its parity record and the precision the engine ran."""
    results = new_results_file(command)
    for case, record in zip(cases, records, strict=True):
        error = None if record.status == "pass" else record.reason
        result = blank_result(spec, case, _CASE_STATUS[record.status], error)
        result.precision_effective = record.precision_effective
        set_case_parity(result, record)
        results.cases.append(result)
    return results
