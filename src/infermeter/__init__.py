"""infermeter: measure, compare and optimize ML inference across frameworks, honestly.

The public Python API. Nothing heavy is imported here: frameworks load only inside the backend that needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Case",
    "CaseResult",
    "MeasureSettings",
    "ResultsFile",
    "__version__",
    "latency_stats",
    "read_results",
    "resolve_model",
    "run_case",
]

if TYPE_CHECKING:
    from infermeter.case import Case, MeasureSettings
    from infermeter.measure.worker import run_isolated as run_case
    from infermeter.models.spec import resolve_model
    from infermeter.results.io import read_results
    from infermeter.results.schema import CaseResult, ResultsFile
    from infermeter.stats import latency_stats

_LAZY = {
    "Case": "infermeter.case",
    "MeasureSettings": "infermeter.case",
    "CaseResult": "infermeter.results.schema",
    "ResultsFile": "infermeter.results.schema",
    "read_results": "infermeter.results.io",
    "resolve_model": "infermeter.models.spec",
    "latency_stats": "infermeter.stats",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "run_case":
        return importlib.import_module("infermeter.measure.worker").run_isolated
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'infermeter' has no attribute {name!r}")
