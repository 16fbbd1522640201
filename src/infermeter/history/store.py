"""History: every `bench` run also lands in a local SQLite database, so that `infermeter history` can show how a
case moved over time. The JSON results file stays the source of truth; the database is a convenience that must
never cost a result.

Location: $INFERMETER_HISTORY when set (`off` disables it), else `history.db` in the user data dir (platformdirs).
Concurrency: WAL journal and a busy timeout, and every run is written in one IMMEDIATE transaction, so several
`bench` processes can record at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass, field, fields
from pathlib import Path

from infermeter.core.errors import ResultsError
from infermeter.results.env import COMPARABLE_KEYS
from infermeter.results.schema import ResultsFile, now_iso

HISTORY_ENV = "INFERMETER_HISTORY"
_OFF = {"off", "0", "false", "no", "none", ""}
BUSY_TIMEOUT_S = 30.0
SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    recorded TEXT NOT NULL,
    results_path TEXT,
    hostname TEXT,
    cpu_model TEXT,
    env_fingerprint TEXT,
    git_commit TEXT,
    environment TEXT
);
CREATE TABLE IF NOT EXISTS cases (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    case_id TEXT NOT NULL,
    model TEXT NOT NULL,
    backend TEXT NOT NULL,
    precision TEXT NOT NULL,
    precision_effective TEXT,
    batch INTEGER NOT NULL,
    shape_mode TEXT NOT NULL,
    threads INTEGER NOT NULL,
    status TEXT NOT NULL,
    p50_ms REAL,
    p99_ms REAL,
    throughput REAL,
    peak_rss_mb REAL,
    load_s REAL,
    samples_ms TEXT
);
CREATE INDEX IF NOT EXISTS cases_by_id ON cases(case_id, run_id);
CREATE INDEX IF NOT EXISTS cases_by_model ON cases(model, backend);
"""


@dataclass(frozen=True)
class HistoryPoint:
    """One case of one recorded run: its figures are the registry's metrics (`metrics.STORED`), the first
    five as fields, the rest in `extra` by key (None in a run recorded before the metric existed)."""

    run_id: int
    created: str
    _: KW_ONLY  # the rest by keyword
    recorded: str
    results_path: str | None
    git_commit: str | None
    env_fingerprint: str | None
    case_id: str
    model: str
    backend: str
    precision: str
    precision_effective: str | None
    batch: int
    shape_mode: str
    threads: int
    status: str
    p50_ms: float | None
    p99_ms: float | None
    throughput: float | None
    peak_rss_mb: float | None
    load_s: float | None
    samples_ms: list[float] = field(default_factory=list)
    extra: dict[str, float | None] = field(default_factory=dict)  # the registry's other metrics, by key


def history_path() -> Path | None:
    """Where history is kept, or None when $INFERMETER_HISTORY disables it."""
    value = os.environ.get(HISTORY_ENV)
    if value is not None:
        return None if value.strip().lower() in _OFF else Path(value).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("infermeter")) / "history.db"


def env_fingerprint(environment: dict[str, object]) -> str:
    """A short hash of what must match for two runs to be comparable (CPU, cores, versions, GPU)."""
    subset = {key: environment.get(key) for key in COMPARABLE_KEYS}
    frameworks = subset.get("frameworks")
    if isinstance(frameworks, dict):  # infermeter's own version does not change the machine's speed
        subset["frameworks"] = {k: v for k, v in frameworks.items() if k != "infermeter"}
    return hashlib.sha256(json.dumps(subset, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _git_commit(where: Path) -> str | None:
    # The commit of the project being benchmarked (the working directory), when it is a git checkout.
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=10", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@contextmanager
def open_history(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection with WAL, busy timeout and the schema in place; ResultsError when the file is not a usable
    database (corrupt, not SQLite, unreadable), saying what to do."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise ResultsError(f"cannot open the history database {path}: {exc}") from exc
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("BEGIN IMMEDIATE")
        for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
            connection.execute(statement)
        _add_metric_columns(connection)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
        yield connection
    except sqlite3.DatabaseError as exc:
        raise ResultsError(
            f"the history database {path} is unusable ({exc}); move it aside or delete it (results JSON files are "
            f"not affected), or point {HISTORY_ENV} at another file"
        ) from exc
    finally:
        connection.close()


# The cases table's columns before the metrics, and the metrics with a field of their own in HistoryPoint.
_CASE_COLUMNS = ("run_id", "case_id", "model", "backend", "precision", "precision_effective", "batch", "shape_mode",
                 "threads", "status")  # fmt: skip
# The first 15 columns of load_history's query, in their order: HistoryPoint's fields of the same names.
_FIXED_COLUMNS = [f.name for f in fields(HistoryPoint)][:15]
_TYPED = ("p50_ms", "p99_ms", "throughput", "peak_rss_mb", "load_s")


def _metric_keys() -> list[str]:
    """One REAL column per stored registry metric, named by its key (the five of _TYPED since the first schema)."""
    from infermeter.figures.metric_registry import STORED

    return [metric.key for metric in STORED]


def _add_metric_columns(connection: sqlite3.Connection) -> None:
    """Give a database written before a metric existed its column (NULL in the runs recorded before)."""
    present = {row[1] for row in connection.execute("PRAGMA table_info(cases)")}
    for key in _metric_keys():
        if key not in present:
            connection.execute(f'ALTER TABLE cases ADD COLUMN "{key}" REAL')


def insert_run(connection: sqlite3.Connection, results: ResultsFile, results_path: Path | None) -> int:
    """Insert one run and its cases in a single transaction; returns the run id."""
    from infermeter.figures.metric_registry import values_of

    environment = results.environment
    columns = [*_CASE_COLUMNS, *_metric_keys(), "samples_ms"]
    insert = f"INSERT INTO cases ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    connection.execute("BEGIN IMMEDIATE")
    try:
        cursor = connection.execute(
            "INSERT INTO runs (created, recorded, results_path, hostname, cpu_model, env_fingerprint, git_commit,"
            " environment) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                results.created,
                now_iso(),
                str(results_path) if results_path is not None else None,
                environment.get("hostname"),
                environment.get("cpu_model"),
                env_fingerprint(environment),
                environment.get("git_commit") or _git_commit(Path.cwd()),
                json.dumps(environment, sort_keys=True, default=str),
            ),
        )
        run_id = int(cursor.lastrowid or 0)
        for case in results.cases:
            head = (run_id, case.id, case.model, case.backend, case.precision, case.precision_effective, case.batch)
            values = values_of(case)
            figures = [values[key] for key in _metric_keys()]
            row = (*head, case.shape_mode, case.threads, case.status, *figures, json.dumps(case.timing.samples_ms))
            connection.execute(insert, row)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return run_id


def record_run(results: ResultsFile, results_path: Path | None, db_path: Path | None = None) -> str | None:
    """Store a finished `bench` run in the history database. Never raises: history must not make `bench` fail,
    so any problem (corrupt file, locked past the timeout, disk full) comes back as a one-line warning for the
    caller to show, and the results JSON, already written, is untouched. Does nothing when history is disabled."""
    path = db_path or history_path()
    if path is None:
        return None
    try:
        with open_history(path) as connection:
            insert_run(connection, results, results_path)
    except (ResultsError, sqlite3.Error, OSError) as exc:
        reason = str(exc).split("; move it aside")[0]
        return (
            f"warning: run not recorded in history ({reason}); the results file is complete. "
            f"Fix or delete {path}, or set {HISTORY_ENV}=off"
        )
    return None


def load_history(path: Path, model: str | None = None, backend: str | None = None) -> list[HistoryPoint]:
    """Every recorded case (optionally of one model and/or backend), oldest run first. ResultsError when the
    database does not exist or is unusable."""
    if not path.exists():
        raise ResultsError(f"no history database at {path}: run `infermeter bench` first (history is on by default)")
    keys = _metric_keys()
    query = (
        "SELECT r.id, r.created, r.recorded, r.results_path, r.git_commit, r.env_fingerprint, c.case_id, c.model,"
        " c.backend, c.precision, c.precision_effective, c.batch, c.shape_mode, c.threads, c.status, "
        + ", ".join(f'c."{key}"' for key in keys)
        + ", c.samples_ms FROM cases c JOIN runs r ON r.id = c.run_id"
    )
    conditions, params = [], []
    for column, value in (("c.model", model), ("c.backend", backend)):
        if value is not None:
            conditions.append(f"{column} = ?")
            params.append(value)
    if conditions:
        query += " WHERE " + " AND ".join(conditions)
    query += " ORDER BY r.id, c.rowid"
    with open_history(path) as connection:
        try:
            rows = connection.execute(query, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ResultsError(f"the history database {path} is unusable ({exc}); move it aside or delete it") from exc
    return [_point(row, keys) for row in rows]


def _point(row: tuple[object, ...], keys: list[str]) -> HistoryPoint:
    """A HistoryPoint from a row of load_history's query: 15 fixed columns, one per metric key, samples_ms."""
    values = dict(zip(keys, row[15:-1], strict=True))
    typed = [values.pop(key) for key in _TYPED]
    samples = json.loads(str(row[-1])) if row[-1] else []
    fixed = dict(zip(_FIXED_COLUMNS, row[:15], strict=True)) | dict(zip(_TYPED, typed, strict=True))
    return HistoryPoint(**fixed, samples_ms=samples, extra=values)  # type: ignore[arg-type]
