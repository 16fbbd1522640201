"""infermeter: measure, compare and optimize ML inference across frameworks, honestly.

The public Python API (docs/python-api.md): `bench(...)` runs what `infermeter bench` runs and returns `Results`;
`explain(...)` returns `infermeter explain`'s record.
Nothing heavy is imported here: frameworks load only inside the backend that needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Case",
    "CaseResult",
    "CaseRow",
    "MeasureSettings",
    "Results",
    "ResultsFile",
    "__version__",
    "bench",
    "comparison_table",
    "explain",
    "latency_stats",
    "load_results",
    "read_results",
    "resolve_model",
    "run_case",
]

if TYPE_CHECKING:
    from infermeter.api.calls import bench, explain
    from infermeter.api.results_view import CaseRow, Results, comparison_table, load_results
    from infermeter.core.case import Case, MeasureSettings
    from infermeter.figures.latency_stats import latency_stats
    from infermeter.measure.worker import run_isolated as run_case
    from infermeter.models.resolve import resolve_model
    from infermeter.results.io import read_results
    from infermeter.results.schema import CaseResult, ResultsFile

_LAZY = {
    "bench": "infermeter.api.calls",
    "explain": "infermeter.api.calls",
    "Results": "infermeter.api.results_view",
    "CaseRow": "infermeter.api.results_view",
    "load_results": "infermeter.api.results_view",
    "comparison_table": "infermeter.api.results_view",
    "Case": "infermeter.core.case",
    "MeasureSettings": "infermeter.core.case",
    "CaseResult": "infermeter.results.schema",
    "ResultsFile": "infermeter.results.schema",
    "read_results": "infermeter.results.io",
    "resolve_model": "infermeter.models.spec",
    "latency_stats": "infermeter.figures.latency_stats",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "run_case":
        return importlib.import_module("infermeter.measure.worker").run_isolated
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'infermeter' has no attribute {name!r}")
