"""The sequential decision's parameters at the command line: a bad one is a usage error (exit 2) naming the flag
and the accepted range, before anything is measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_cli
from crafted_results import make_case, make_results
from infermeter.results.io import write_results


def _file(path: Path) -> Path:
    write_results(path, make_results([make_case("null", 1, 1.0, threads=1, sigma=0.02)]))
    return path


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--threshold", "0"], "--threshold 0 is out of range: it must be > 0"),
        (["--beta", "0.6"], "--beta 0.6 is out of range: it must lie in (0, 0.5)"),
        (["--rounds", "8", "--budget-rounds", "4"], "--budget-rounds 4 is out of range: it must be at least --rounds"),
    ],
)
def test_compare_rerun_refuses_a_bad_decision_parameter(tmp_path: Path, flags: list[str], says: str) -> None:
    base, new = _file(tmp_path / "base.json"), _file(tmp_path / "new.json")
    proc = run_cli("compare", str(base), str(new), "--rerun", *flags)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stderr
    assert "re-measuring" not in proc.stderr  # refused before measuring


def test_check_refuses_a_bad_delta(tmp_path: Path) -> None:
    proc = run_cli(
        "check", "tiny_cnn", "--baseline", "tiny_cnn", "--threshold", "0", "--config", str(_pyproject(tmp_path))
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--threshold 0 is out of range" in proc.stderr


def _pyproject(folder: Path) -> Path:
    path = folder / "pyproject.toml"
    path.write_text("[project]\nname = 'x'\n")
    return path
