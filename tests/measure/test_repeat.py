"""`bench --repeat N`: each case in N fresh processes spread over the run, the processes as replicates in its
statistics, its paired speedups and `compare`; resumed when short of processes; bad N refused."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cli_helpers import load_json, run_cli, run_main
from crafted_results import make_case, make_results
from fault_harness import FAST, QUIET
from infermeter.compare.verdict import compare_results
from infermeter.figures.latency_stats import replicate_p50
from infermeter.measure.repeat import merge_process
from infermeter.report.summary import summary_table
from infermeter.results.io import read_results
from infermeter.results.records import ProcessRecord, ProcessRun, read_record, write_record
from infermeter.results.schema import ResultsFile

# Sleeping latencies of tens of ms: a spinning null case's wall time follows the machine's load (2 ms read as 8 ms
# on the shared 2-core machine), a sleeping one's only its wake-up delay.
REPEAT = ["--repeat", "3", "--rounds", "3", "-O", "null.wait=sleep"]


def _bench(out: Path, *extra: str) -> dict[str, Any]:
    done = run_cli("bench", "tiny_cnn", "--batch", "1", *FAST, *QUIET, *REPEAT, *extra, "-o", str(out), timeout=240)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = load_json(out)
    return data


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two --repeat 3 files of one interleaved group (null at 20 ms, and at 40 ms), made one after the other."""
    folder = tmp_path_factory.mktemp("repeat")
    paths = (folder / "base.json", folder / "new.json")
    for path in paths:
        _bench(path, "-b", "null,null:latency_ms=40", "-O", "null.latency_ms=20")
    return paths


def test_each_case_has_three_processes_and_its_p50_comes_from_them(pair: tuple[Path, Path]) -> None:
    results = read_results(pair[0])
    assert len(results.cases) == 2  # one merged case per plan item, not one per process
    for case in results.cases:
        record = read_record(case, ProcessRecord)
        assert record is not None and record.repeat == 3
        assert [run.index for run in record.runs] == [0, 1, 2]
        assert all(run.ok and run.samples > 0 and run.rounds >= 3 for run in record.runs)
        assert case.timing.iterations == sum(run.samples for run in record.runs)
        assert case.latency_ms is not None
        p50, ci = replicate_p50(record.medians_ms)
        assert case.latency_ms.p50 == pytest.approx(p50) and tuple(case.latency_ms.p50_ci95) == pytest.approx(ci)
        assert len(case.timing.rounds_p50_ms) == sum(
            run.rounds for run in record.runs
        )  # every process's rounds, pooled
    slower = results.cases[1]
    assert slower.timing.paired is not None and slower.timing.paired.rounds == 3  # three passes, each a paired ratio
    assert 0.3 < slower.timing.paired.ratio < 0.8  # 20 ms over 40 ms, on a loaded machine
    footnotes = summary_table(results.cases).footnotes
    assert any(note.startswith("P50: geometric mean of each case's process medians") for note in footnotes)
    assert not any("per-round ratios" in note for note in footnotes)  # a speedup shown is over the passes


def test_the_processes_ran_round_robin_over_the_plan(pair: tuple[Path, Path]) -> None:
    """Every case's first process ran before any case's second: drift over the run reaches every case alike."""
    cases = read_results(pair[0]).cases
    runs = [run for case in cases for run in (read_record(case, ProcessRecord) or ProcessRecord(1)).runs]
    by_pass = {index: [run.started or "" for run in runs if run.index == index] for index in range(3)}
    assert max(by_pass[0]) <= min(by_pass[1]) and max(by_pass[1]) <= min(by_pass[2])


def test_compare_of_two_repeated_files_uses_the_processes(pair: tuple[Path, Path]) -> None:
    comparison = compare_results(read_results(pair[0]), read_results(pair[1]))
    assert [change.replication for change in comparison.changes] == ["processes", "processes"]
    assert all(change.replicates == (3, 3) for change in comparison.changes)
    assert not comparison.regressions  # unchanged configuration
    assert comparison.method.startswith("replicates: 2 case(s) on per-process medians")
    shown = run_cli("compare", str(pair[0]), str(pair[1]))
    assert shown.returncode == 0 and "per-process medians (bench --repeat)" in shown.stdout


def test_a_shifted_file_is_flagged(tmp_path: Path) -> None:
    """One case timed alone (no rounds) per file, the new one twice as slow: judged on the processes, flagged.
    (A small shift is the crafted test below: this machine's load moves a null case by tens of percent.)"""
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    _bench(base, "-b", "null", "-O", "null.latency_ms=20")
    _bench(slow, "-b", "null", "-O", "null.latency_ms=40")
    comparison = compare_results(read_results(base), read_results(slow))
    (shifted,) = comparison.changes
    assert shifted.replication == "processes" and shifted.paired_by == "variables"
    assert shifted.regression and shifted.ratio is not None and 1.5 < shifted.ratio < 2.6
    shown = run_cli("compare", str(base), str(slow))
    assert shown.returncode == 1 and "REGRESSION" in shown.stdout


def _repeated(medians: list[float]) -> ResultsFile:
    """A file of one case measured in len(medians) processes with these medians."""
    case = make_case("null", p50_ms=medians[0], n=200, seed=0)
    write_record(case, ProcessRecord(len(medians), (ProcessRun.of(case, 0),)))
    for index, median in enumerate(medians[1:], start=1):
        case = merge_process(case, make_case("null", p50_ms=median, n=200, seed=index))
    return make_results([case])


def test_a_small_shift_is_flagged_and_noise_is_not() -> None:
    base = _repeated([1.0, 1.01, 0.99])
    same = compare_results(base, _repeated([1.005, 0.995, 1.012]))
    shifted = compare_results(base, _repeated([1.08, 1.09, 1.075]))
    assert same.changes[0].replication == shifted.changes[0].replication == "processes"
    assert not same.regressions and len(shifted.regressions) == 1
    ratio = shifted.changes[0].ratio
    assert ratio is not None and ratio == pytest.approx(1.08, rel=0.02)


def test_a_repeated_file_against_an_older_one_falls_back_to_rounds(pair: tuple[Path, Path]) -> None:
    """One side without processes (a file written before --repeat): today's method, on each file's rounds."""
    old = read_results(pair[1])
    for case in old.cases:
        case.extra.pop(ProcessRecord.KEY)
    comparison = compare_results(read_results(pair[0]), old)
    assert {change.replication for change in comparison.changes} == {"rounds"}
    assert "round medians within each run" in comparison.method


def test_resume_runs_only_the_missing_process(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    _bench(out, "-b", "null", "-O", "null.latency_ms=1")
    data = load_json(out)
    runs = data["cases"][0]["processes"]["runs"]
    data["cases"][0]["processes"]["runs"] = runs[:2]  # as if interrupted after the second process
    out.write_text(json.dumps(data))
    resumed = run_cli("bench", "--resume", str(out), "--no-history", "--no-roofline", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 of 1 planned case(s) remain" in resumed.stderr
    after = load_json(out)["cases"][0]["processes"]["runs"]
    assert [run["index"] for run in after] == [0, 1, 2]
    assert after[:2] == runs[:2] and after[2]["started"] >= runs[1]["started"]
    again = run_cli("bench", "--resume", str(out), "--no-history", "--no-roofline", timeout=120)
    assert again.returncode == 0 and "0 of 1 planned case(s) remain" in again.stderr


@pytest.mark.parametrize("value", ["0", "-2"])
def test_bad_repeat_is_a_usage_error(value: str) -> None:
    done = run_main("bench", "tiny_cnn", "-b", "null", "--repeat", value, *QUIET, "-o", "/dev/null")
    assert done.returncode == 2 and f"--repeat {value} must be positive" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--no-isolation"], "drop --no-isolation"), (["--cold-start"], "--repeat with --cold-start")],
)
def test_repeat_refused_where_it_cannot_run(flags: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    done = run_cli("bench", "tiny_cnn", "-b", "null", "--repeat", "2", *flags, *QUIET, "-o", str(out))
    assert done.returncode == 2 and message in done.stderr
    assert not out.exists()  # refused before anything was written


def test_api_refuses_a_bad_repeat() -> None:
    from infermeter import bench
    from infermeter.core.errors import UsageError

    with pytest.raises(UsageError, match="repeat 0 must be positive"):
        bench("tiny_cnn", backends=["null"], repeat=0)


def _with_runs(medians: list[float]) -> Any:
    case = make_case("null", p50_ms=medians[0], n=200, seed=0)
    write_record(case, ProcessRecord(3, (ProcessRun.of(case, 0),)))
    return case


def test_a_failed_process_is_kept_and_warned_about() -> None:
    case = _with_runs([1.0])
    second = make_case("null", p50_ms=1.1, n=200, seed=1)
    merged = merge_process(case, second)
    crashed = make_case("null", status="crashed", error="killed by SIGSEGV")
    merged = merge_process(merged, crashed)
    record = read_record(merged, ProcessRecord)
    assert record is not None and [run.status for run in record.runs] == ["ok", "ok", "crashed"]
    assert merged.ok and [w.code for w in merged.warnings].count("process_failed") == 1
    assert merged.latency_ms is not None
    expected = math.exp(float(np.mean(np.log(record.medians_ms))))
    assert merged.latency_ms.p50 == pytest.approx(expected)
    assert len(merged.timing.samples_ms) == 400 and merged.timing.iterations == 400
    assert (case.timing.iterations, len(case.timing.samples_ms)) == (200, 200)  # merging copied the groups it changes


def test_merged_files_round_trip(tmp_path: Path) -> None:
    from infermeter.results.io import write_results

    merged = merge_process(_with_runs([1.0]), make_case("null", p50_ms=1.05, n=200, seed=2))
    path = tmp_path / "m.json"
    write_results(path, ResultsFile(created="now", environment={}, cases=[merged]))
    back = read_results(path).cases[0]
    assert read_record(back, ProcessRecord) == read_record(merged, ProcessRecord)
