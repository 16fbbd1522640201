"""Every command degrades cleanly with any subset of engines: the same smoke set in venvs holding the core alone,
the core with ONNX Runtime, the core with OpenVINO, and everything for the CPU (the main venv, `[all-cpu,test]`).
The ONNX Runtime cell is the venv test_distribution.py installs the built wheel into with [onnxruntime] (the same
subset, one venv fewer to build on a clean clone); the others are editable installs under `.venv-matrix/`.

Each cell runs `backends`, `bench` on an ONNX file (or, without an engine, the one-line refusal and a `null` run),
`report` and `compare`, through the console script of its own venv. A missing engine must read `unavailable` with
its extra's install line; an error must be one `error:` line and exit code 2, never an internal error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from venv_cells import Cell, cell_python, run_infermeter, write_tiny_onnx

# Short, fixed measurements: the smoke set checks what runs, not how fast.
FAST = ["--batch", "1", "--warmup", "2", "--iterations", "10", "--min-time", "0", "--max-time", "2", "--rounds", "2"]
QUIET = ["--target-ci", "0", "--threads", "1", "--no-roofline", "--no-history"]
ENGINES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "torch": "torch", "tflite": "tflite"}


@dataclass(frozen=True)
class MatrixCase:
    """A cell and the CPU engines that must be available in it (every other one must be `unavailable`)."""

    cell: Cell | None  # None: the main venv, which `make test` installs with [all-cpu,test]
    engines: frozenset[str]
    from_wheel: bool = False  # the session's venv of the built wheel (conftest.py) rather than an editable cell

    @property
    def name(self) -> str:
        return self.cell.name if self.cell else "all-cpu"


MATRIX = [
    MatrixCase(Cell("core", ()), frozenset()),
    MatrixCase(Cell("onnxruntime", ("onnxruntime",)), frozenset({"onnxruntime"}), from_wheel=True),
    MatrixCase(Cell("openvino", ("openvino",)), frozenset({"openvino"})),
    MatrixCase(None, frozenset(ENGINES)),
]


@dataclass(frozen=True)
class Venv:
    """A matrix cell ready to run: its python, the engines it must have, and a scratch folder with an ONNX file."""

    python: Path
    case: MatrixCase
    work: Path

    @property
    def cell(self) -> Cell | None:
        return self.case.cell

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_infermeter(self.python, list(args), self.work)


@pytest.fixture(scope="module", params=MATRIX, ids=lambda case: case.name)
def venv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    case: MatrixCase = request.param
    if case.from_wheel:
        python = request.getfixturevalue("wheel_python")
    else:
        python = cell_python(case.cell) if case.cell else Path(sys.executable)
    work = tmp_path_factory.mktemp(f"matrix-{case.name}")
    write_tiny_onnx(work / "tiny.onnx")
    return Venv(python, case, work)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single `error:` line of a clean refusal (exit code 2, no traceback, no internal error)."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_backends_names_each_missing_engine_with_its_extra(venv: Venv) -> None:
    proc = venv.run("backends", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    for backend, extra in ENGINES.items():
        row = rows[backend]
        if backend in venv.case.engines:
            assert row["available"], row
        else:
            assert not row["available"] and f"pip install 'infermeter[{extra}]'" in row["reason"], row
    table = venv.run("backends")  # the console table too: it renders every reason
    assert table.returncode == 0, table.stderr
    assert all(backend in table.stdout for backend in ENGINES), table.stdout


def test_bare_bench_runs_or_says_what_to_install(venv: Venv) -> None:
    if "torch" in venv.case.engines:
        pytest.skip("with torch the default model runs; the main test suite measures it")
    line = one_error_line(venv.run("bench", *FAST, *QUIET))
    if venv.case.engines:
        assert "mobilenet_v2 is defined in PyTorch" in line and "pass an .onnx file" in line, line
        assert "--index-url https://download.pytorch.org/whl/cpu" in line, line
    else:
        assert "no inference engine is installed" in line and "'infermeter[onnxruntime]'" in line, line


def bench_file(venv: Venv) -> Path:
    """A results file measured in the cell: the ONNX file on the default backends, or, where no engine can read
    it, the refusal and then a built-in model on the synthetic backend (the harness needs no engine, no torch)."""
    model = str(venv.work / "tiny.onnx")
    output = venv.work / "a.json"
    if not venv.case.engines:
        line = one_error_line(venv.run("bench", model, *FAST, *QUIET, "-o", str(output)))
        assert "needs the onnx package" in line and "'infermeter[onnxruntime]'" in line, line
    engines = [] if venv.case.engines else ["tiny_cnn", "-b", "null"]
    proc = venv.run("bench", *(engines or [model]), *FAST, *QUIET, "-o", str(output))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return output


def test_bench_report_and_compare_run(venv: Venv) -> None:
    first = bench_file(venv)
    cases = json.loads(first.read_text())["cases"]
    expected = (venv.case.engines & {"onnxruntime", "openvino"}) or {"null"}
    assert {case["backend"] for case in cases} == expected
    assert all(case["status"] == "ok" for case in cases), [(c["backend"], c["error"]) for c in cases]
    for name in ("report.md", "report.csv"):
        report = venv.run("report", str(first), "-o", str(venv.work / name))
        assert report.returncode == 0 and (venv.work / name).stat().st_size > 0, report.stderr
    html = venv.run("report", str(first), "-o", str(venv.work / "report.html"))
    if venv.cell is None:  # plotly (the html extra) is part of all-cpu only
        assert html.returncode == 0, html.stderr
        assert "<html" in (venv.work / "report.html").read_text()[:2000].lower()
    else:
        assert "needs plotly" in one_error_line(html) and "'infermeter[html]'" in html.stderr
    # The file against itself: loading, pairing, statistics and the table, with a known answer.
    compare = venv.run("compare", str(first), str(first))
    assert compare.returncode == 0 and "no significant regression" in compare.stdout, (compare.stdout, compare.stderr)
