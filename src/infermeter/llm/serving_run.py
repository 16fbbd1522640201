"""A serving sweep run to its results file: the file started once (`machine.environment.new_results_file`), each
level kept and written before the next one starts, and, with `find_peak`, the peak search from the one rate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from infermeter.results.schema import CaseResult, ResultsFile

if TYPE_CHECKING:
    from infermeter.llm.serving_sweep import SweepSettings
    from infermeter.load.peak import PeakSearch


@dataclass(frozen=True)
class LevelDone:
    """One level measured, as the progress line tells it: its name (`rate 2`, `concurrency 4`), the error that
    ended it (None when it ran), and the failure its requests had (short outputs, errors), if any."""

    name: str
    error: str | None
    failure: str | None


@dataclass
class ServingRun:
    """A finished serving sweep: its results file (every level, in the order measured) and, with `find_peak`, the
    peak search."""

    results: ResultsFile
    search: PeakSearch | None = None

    @property
    def any_ok(self) -> bool:
        """Whether any level had a successful request (a sweep with none is a failed run)."""
        return any(case.status == "ok" for case in self.results.cases)


def level_done(mode: str, result: CaseResult) -> LevelDone:
    """The progress record of one level's case."""
    from infermeter.results.records import ServingLevel, read_record

    level = read_record(result, ServingLevel)
    name = f"{mode} {level.level:g}" if level else mode
    if result.status != "ok":
        return LevelDone(name, result.error or "", None)
    return LevelDone(name, None, level.failure if level and level.failure else None)


def run_serving(
    settings: SweepSettings,
    output: Path | None,
    command: Sequence[str],
    find_peak: bool = False,
    on_level: Callable[[LevelDone], None] | None = None,
) -> ServingRun:
    """Run the sweep (or, with `find_peak`, the peak search from its one rate) for `command` (the command line,
    handed in by the caller), writing the results file to `output` after each level; `on_level` hears of each."""
    from infermeter.llm.serving_peak import find_rate_peak
    from infermeter.llm.serving_sweep import run_sweep
    from infermeter.machine.environment import new_results_file

    run = ServingRun(new_results_file(command))
    sink = _level_sink(run.results, settings.mode, output, on_level)
    if find_peak:
        _, run.search = find_rate_peak(settings, sink)
    else:
        run_sweep(settings, sink)
    return run


def _level_sink(
    results: ResultsFile, mode: str, output: Path | None, on_level: Callable[[LevelDone], None] | None
) -> Callable[[CaseResult], None]:
    """What is done with each level measured: kept, written (before the next level starts), told to `on_level`."""
    from infermeter.results.io import write_results

    def sink(result: CaseResult) -> None:
        results.cases.append(result)
        if output is not None:
            write_results(output, results)
        if on_level is not None:
            on_level(level_done(mode, result))

    return sink
