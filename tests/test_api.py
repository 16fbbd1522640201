"""The Python API (`infermeter.bench`, `Results`, `load_results`): the CLI's run, table, file and comparison."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import infermeter as im
from cli_helpers import run_cli
from crafted_results import make_case, make_results, sample_results
from infermeter.core.errors import ModelError, UsageError
from infermeter.results.schema import PairedSpeedup

# The null backend spins 2 ms per inference: a fast, deterministic stand-in for a framework.
FAST: dict[str, Any] = dict(
    backends="null", warmup=2, iterations=20, min_time_s=0, max_time_s=5, target_ci=0, progress=False
)


def test_bench_measures_in_isolated_workers_and_keeps_the_cli_file(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    results = im.bench("tiny_cnn", batch=[1, 2], options={"null.latency_ms": 2}, output=out, **FAST)
    assert [(c.backend, c.batch, c.status, c.isolated) for c in results.cases] == [
        ("null", 1, "ok", True),
        ("null", 2, "ok", True),
    ]
    rows = results.rows()
    for row, case in zip(rows, results.cases, strict=True):
        assert case.latency_ms is not None
        assert row.p50_ms == case.latency_ms.p50 >= 2.0 and row.p99_ms == case.latency_ms.p99
        assert row.throughput == case.timing.throughput and row.samples == case.timing.iterations == 20
        # Each batch is its own comparison group, its own baseline (unless other work on this machine disturbed it).
        assert (row.speedup, row.speedup_note) in ((1.0, ""), (None, "interference"))
    # Written as it ran, with the plan: the CLI reads it, and `bench --resume` finds nothing left to run.
    assert results.path == out and json.loads(out.read_text())["plan"]["parts"][0]["batches"] == [1, 2]
    assert run_cli("report", str(out)).returncode == 0
    resumed = run_cli("bench", "--resume", str(out))
    assert resumed.returncode == 0 and "0 of 2 planned case(s) remain" in resumed.stderr


def test_the_cli_prints_the_table_the_api_renders(tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "null", "--batch", "1,3", "--warmup", "2", "--iterations", "20",
        "--min-time", "0", "--target-ci", "0", "-O", "null.latency_ms=1", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = im.load_results(out).table()
    assert "P50 ms" in table and "null" in table
    assert table in proc.stdout


def test_an_interleaved_group_gets_paired_speedups_as_in_the_cli() -> None:
    results = im.bench(
        "tiny_cnn", batch=1, precision=["fp32", "fp16"], options={"null.precision": "fp32"}, rounds=3, **FAST
    )
    base, other = results.cases
    assert (
        len(base.timing.rounds_p50_ms) >= 3
        and other.timing.paired is not None
        and other.timing.paired.baseline_id == base.id
    )
    row = results.rows()[1]
    if row.speedup_note == "interference":  # other work on this shared machine disturbed the pair: no claim
        assert row.speedup is None
    else:
        assert (row.speedup, row.speedup_low, row.speedup_high) == (
            other.timing.paired.ratio,
            other.timing.paired.ci_low,
            other.timing.paired.ci_high,
        )


def test_rows_follow_the_summary_table_refusals() -> None:
    data = sample_results()
    data.cases[3].timing.paired = PairedSpeedup(data.cases[0].id, 0.22, 0.2, 0.24, 10)  # not its group's baseline
    data.cases[4].timing.paired = PairedSpeedup(data.cases[3].id, 3.5, 3.4, 3.6, 10)
    results = im.Results(data)
    rows = {(r.backend, r.batch): r for r in results.rows()}
    assert rows["torch", 1].speedup == 1.0
    assert rows["onnxruntime", 1].speedup == pytest.approx(4.0, rel=0.1) and rows["onnxruntime", 1].speedup_low is None
    assert (rows["onnxruntime", 8].speedup, rows["onnxruntime", 8].speedup_low) == (3.5, 3.4)
    assert "3.50x [3.40–3.60]" in results.table()
    assert rows["openvino", 1].speedup is None and rows["openvino", 1].speedup_note == "parity"
    failed = rows["openvino", 8]
    assert (failed.status, failed.p50_ms, failed.speedup) == ("failed", None, None)
    assert failed.error == "openvino: model not supported"
    text = results.table()
    assert "FAILED" in text and "n/a‡" in text and "\x1b[" not in text


def test_save_report_and_compare_are_the_cli_s(tmp_path: Path) -> None:
    base = im.Results(sample_results())
    path = base.save(tmp_path / "base.json")
    assert im.load_results(path).data.cases[1].latency_ms == base.cases[1].latency_ms
    html = base.report(tmp_path / "r.html")
    assert html.read_text().lstrip().lower().startswith("<!doctype html")
    assert "onnxruntime" in base.report(tmp_path / "r.md").read_text()
    slower = make_results([make_case("onnxruntime", 1, 0.8, seed=9)])
    comparison = base.compare(im.Results(slower), threshold="5%")
    (change,) = comparison.changes
    assert change.base.backend == "onnxruntime" and change.ratio == pytest.approx(1.6, rel=0.1)
    assert change.verdict == "unreplicated" or change.regression
    text = im.comparison_table(comparison)
    assert "verdict" in text and "only in BASE" in text
    with pytest.raises(UsageError, match="cannot tell the format"):
        base.report(tmp_path / "r.txt")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_time_ms": 1}, UsageError, "did you mean min_time_s"),
        ({"backend": "null"}, UsageError, "did you mean backends"),
        ({"min_time": 1, "min_time_s": 1}, UsageError, "same setting"),
        ({"iterations": 0}, UsageError, "^iterations 0 must be positive"),
        ({"target_ci": "150%"}, UsageError, "target_ci"),
        ({"rounds": 2.5}, UsageError, "rounds=2.5: expected int"),
        ({"batch": 0}, UsageError, "batch 0 is not a positive integer"),
        ({"precision": "fp8"}, UsageError, "precision 'fp8' is not one of"),
        ({"backends": "nosuch"}, UsageError, "unknown backend 'nosuch'"),
        ({"dynamic": {"seq": [16]}}, UsageError, "add shape_mode dynamic"),
        ({"models": "no_such_model"}, ModelError, "no_such_model"),
    ],
)
def test_bad_input_raises_before_anything_runs(kwargs: dict[str, Any], error: type, message: str) -> None:
    arguments = {**FAST, "models": "tiny_cnn", **kwargs}
    with pytest.raises(error, match=message):
        im.bench(**arguments)


def test_to_pandas_names_the_install_line_without_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        im.Results(sample_results()).to_pandas()


def test_to_pandas_has_one_row_per_case() -> None:
    pytest.importorskip("pandas")
    frame = im.Results(sample_results()).to_pandas()
    assert list(frame["backend"]) == ["torch", "onnxruntime", "openvino"] * 2
    assert {"model", "precision", "batch", "p50_ms", "p99_ms", "throughput", "peak_rss_mb", "status"} <= set(frame)
    assert frame["p50_ms"].iloc[1] == pytest.approx(0.5, rel=0.1) and frame["status"].iloc[5] == "failed"


def test_import_stays_light_and_the_names_are_lazy() -> None:
    code = (
        "import sys, infermeter as im;"
        " heavy = [m for m in ('infermeter.api.calls', 'rich', 'numpy') if m in sys.modules];"
        " print(heavy, callable(im.bench), im.Results.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["[]", "True", "Results"], done.stderr
