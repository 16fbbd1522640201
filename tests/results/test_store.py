"""History: real SQLite, several writer processes at once, a corrupt file, trends and the history command."""

from __future__ import annotations

import json
import multiprocessing
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from crafted_results import draw_samples, make_case, make_results
from infermeter.core.errors import ResultsError
from infermeter.history import case_trends
from infermeter.history.store import history_path, load_history, record_run
from infermeter.results.io import read_results


def _writer(db: str, worker: int, runs: int) -> None:
    for run in range(runs):
        case = make_case("null", 1, samples=draw_samples(1.0, 50, 0.05, seed=worker * 100 + run))
        record_run(make_results([case], created=f"w{worker}-r{run}"), Path(f"/tmp/w{worker}.json"), Path(db))


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(str(db), w, 5)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
        assert process.exitcode == 0
    points = load_history(db)
    assert len(points) == 20
    assert {p.created for p in points} == {f"w{w}-r{r}" for w in range(4) for r in range(5)}
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 20


def test_corrupt_database_warns_once_and_never_raises(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    db.write_bytes(b"this is not a database" * 100)
    warning = record_run(make_results([make_case("null", 1, 1.0)]), tmp_path / "r.json", db)
    assert warning is not None and "\n" not in warning and warning.startswith("warning: run not recorded in history")
    assert "results file is complete" in warning
    with pytest.raises(ResultsError, match=r"unusable.*move it aside or delete it"):
        load_history(db)


def test_bench_with_a_corrupt_history_keeps_its_json(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    db.write_bytes(b"\x00garbage" * 512)
    out = tmp_path / "r.json"
    bench = run_cli(
        "bench", "tiny_cnn", "-b", "null", "--batch", "1", "--iterations", "5", "--min-time", "0", "--target-ci", "0",
        "-o", str(out),
        env={"INFERMETER_HISTORY": str(db)},
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    assert "warning: run not recorded in history" in bench.stderr and "Traceback" not in bench.stderr
    assert read_results(out).cases[0].status == "ok"
    good_db = tmp_path / "good.db"
    bench = run_cli(
        "bench", "tiny_cnn", "-b", "null", "--batch", "1", "--iterations", "5", "--min-time", "0", "--target-ci", "0",
        "-o", str(out),
        env={"INFERMETER_HISTORY": str(good_db)},
    )  # fmt: skip
    assert bench.returncode == 0 and len(load_history(good_db)) == 1
    proc = run_cli("history", "--db", str(db))
    assert (
        proc.returncode == 2
        and proc.stderr.startswith("error: the history database")
        and "Traceback" not in proc.stderr
    )


def test_history_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INFERMETER_HISTORY", "off")
    assert history_path() is None
    record_run(make_results([make_case("null", 1, 1.0)]), None)  # disabled: nothing happens, nothing raised
    monkeypatch.setenv("INFERMETER_HISTORY", str(tmp_path / "h.db"))
    assert history_path() == tmp_path / "h.db"
    monkeypatch.delenv("INFERMETER_HISTORY")
    assert history_path() is not None and history_path().name == "history.db"  # type: ignore[union-attr]


def _record_series(db: Path, p50s: list[float], backend: str = "torch") -> None:
    for i, p50 in enumerate(p50s):
        case = make_case(backend, 1, samples=draw_samples(p50, 300, 0.03, seed=i))
        record_run(make_results([case], created=f"2026-01-0{i + 1}T00:00:00+00:00"), None, db)


def test_trend_flags_a_real_regression_and_not_noise(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    _record_series(db, [2.0, 2.0, 2.02, 1.99, 3.0])
    _record_series(db, [1.0, 1.01, 0.99, 1.0, 1.02], backend="onnxruntime")
    trends = {t.label.split()[1]: t for t in case_trends(load_history(db), threshold=0.10)}
    torch, ort = trends["torch"], trends["onnxruntime"]
    assert [p.regression for p in torch.points] == [False, False, False, False, True]
    assert torch.regressed and torch.points[-1].change == pytest.approx(1.5, rel=0.03)
    assert not any(p.regression for p in ort.points)
    only = load_history(db, backend="onnxruntime")
    assert {p.backend for p in only} == {"onnxruntime"} and len(only) == 5
    assert [p.judged for p in torch.points] == [False, False, False, True, True]  # 3 previous runs needed


def test_a_run_within_the_case_s_own_run_to_run_noise_is_not_a_regression(tmp_path: Path) -> None:
    # A case whose P50 moves ±10% from run to run: a latest run 20% above the median of the previous ones is
    # inside their band. (Its samples against the previous run's: a Mann-Whitney p far below 0.01.)
    db = tmp_path / "h.db"
    _record_series(db, [2.0, 2.3, 1.8, 2.2, 1.9, 2.4])
    (trend,) = case_trends(load_history(db), threshold=0.10)
    latest = trend.points[-1]
    assert latest.change is not None and latest.change > 1.15 and latest.band is not None
    assert latest.band[1] > 2.4 and not trend.regressed and trend.judged


def test_history_command_shows_runs_and_flags(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    _record_series(db, [2.0, 2.0, 2.0, 3.0])
    proc = run_cli("history", "--db", str(db), "--model", "tiny_cnn")
    assert proc.returncode == 0, proc.stderr
    assert "REGRESSION" in proc.stdout and re.search(r"\+(49|50)\.\d%", proc.stdout)
    assert "2026-01-03 00:00" in proc.stdout  # the run's own date
    assert "1 regressed in their latest run" in proc.stdout
    gate = run_cli("history", "--db", str(db), "--fail-on-regression")
    assert gate.returncode == 1 and "REGRESSION" in gate.stdout
    steady = tmp_path / "steady.db"
    _record_series(steady, [2.0, 2.0, 2.0])
    assert run_cli("history", "--db", str(steady), "--fail-on-regression").returncode == 0
    young = tmp_path / "young.db"
    _record_series(young, [2.0, 2.0, 3.0])  # two previous runs: their spread is unknown
    unjudged = run_cli("history", "--db", str(young), "--fail-on-regression")
    assert unjudged.returncode == 0 and "1 case(s) cannot be judged" in unjudged.stdout
    none = run_cli("history", "--db", str(db), "--backend", "tensorrt", "--fail-on-regression")
    assert none.returncode == 0 and "no recorded runs" in none.stdout
    missing = run_cli("history", "--db", str(tmp_path / "absent.db"))
    assert missing.returncode == 2 and "no history database" in missing.stderr
    stored = json.loads(sqlite3.connect(db).execute("SELECT samples_ms FROM cases LIMIT 1").fetchone()[0])
    assert len(stored) == 300 and np.isfinite(stored).all()
