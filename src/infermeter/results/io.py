"""Reading and atomically writing results files."""

from __future__ import annotations

import json
from pathlib import Path

from infermeter.core.errors import ResultsError
from infermeter.core.files import write_text_atomically
from infermeter.results.schema import SCHEMA_VERSION, ResultsFile, results_from_dict, results_to_dict


def write_results(path: Path, results: ResultsFile) -> None:
    """Write `results` to `path` atomically: a temporary file in the same folder, fsync, then rename.

    A crash or Ctrl-C at any moment leaves either the previous complete file or the new complete file; a folder
    that cannot be written (read-only, disk full) raises ResultsError and leaves the previous file as it was.
    """
    payload = json.dumps(results_to_dict(results), indent=1, allow_nan=False)
    try:
        write_text_atomically(path, payload)
    except OSError as exc:
        raise ResultsError(f"cannot write results file {str(path)!r}: {exc.strerror or exc}") from exc


def read_results(path: Path) -> ResultsFile:
    """Load a results file, or raise ResultsError saying why it cannot be used."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ResultsError(f"cannot read results file {str(path)!r}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResultsError(f"{path} is not valid JSON ({exc}); is it an infermeter results file?") from exc
    if not isinstance(data, dict) or "schema_version" not in data or "cases" not in data:
        raise ResultsError(f"{path} is not an infermeter results file (no schema_version / cases)")
    if data["schema_version"] > SCHEMA_VERSION:
        raise ResultsError(
            f"{path} has schema_version {data['schema_version']}, newer than this infermeter understands "
            f"({SCHEMA_VERSION}); upgrade infermeter"
        )
    try:
        return results_from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultsError(f"{path} does not follow the results schema ({type(exc).__name__}: {exc})") from exc
