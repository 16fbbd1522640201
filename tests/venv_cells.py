"""Virtual environments with a subset of infermeter's extras, for the packaging tests.

A matrix cell is a venv under `.venv-matrix/<name>` with the project installed editable plus some extras. It is
reused while the `[project]` table of pyproject.toml and the Python version are unchanged (a stamp file holds their
hash): the editable install follows source edits, so only a dependency change needs a new venv. A file lock keeps
two test runs from building the same cell at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / ".venv-matrix"
# pip's own resolver needs no more than the registry; its output is noise in a test log.
PIP_QUIET = ["--quiet", "--disable-pip-version-check"]


@dataclass(frozen=True)
class Cell:
    """A matrix cell: a venv name and the extras installed in it (none: the core alone)."""

    name: str
    extras: tuple[str, ...]

    @property
    def requirement(self) -> str:
        """The editable requirement pip installs: `.` or `.[a,b]`."""
        return f".[{','.join(self.extras)}]" if self.extras else "."


def project_table() -> dict[str, object]:
    """The `[project]` table of pyproject.toml (what a wheel's metadata is made from)."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        table: dict[str, object] = tomllib.load(handle)["project"]
    return table


def core_requirements() -> list[str]:
    """pyproject's core dependencies."""
    core = project_table()["dependencies"]
    assert isinstance(core, list)
    return core


def optional_dependencies() -> dict[str, list[str]]:
    """pyproject's extras: name -> requirement strings."""
    table = project_table()["optional-dependencies"]
    assert isinstance(table, dict)
    return table


def requirements_hash(extra: str = "") -> str:
    """Hash of what decides a venv's content: the project's dependencies, `extra`, and this Python."""
    text = json.dumps([project_table(), extra, sys.version], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@contextmanager
def locked(name: str) -> Iterator[None]:
    """An exclusive lock on `.venv-matrix/<name>.lock` (held while a venv or wheelhouse is built or checked)."""
    MATRIX.mkdir(exist_ok=True)
    with (MATRIX / f"{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pip(python: Path, *args: str, timeout: float = 900) -> None:
    """Run pip for the interpreter `python` (this venv's pip, `--python`: the new venvs carry no pip of their own).
    Without PYTHONPATH: a source tree on it (with the egg-info a build leaves in src/) reads as installed."""
    command = [sys.executable, "-m", "pip", "--python", str(python), *args, *PIP_QUIET]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def fresh_venv(folder: Path) -> Path:
    """A new, empty venv at `folder` (no pip, no system site-packages); returns its python."""
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return folder / "bin" / "python"


def cell_python(cell: Cell) -> Path:
    """The python of `cell`'s venv, built first when missing or when its requirements changed."""
    folder = MATRIX / cell.name
    stamp = folder / ".infermeter-matrix-stamp"
    wanted = requirements_hash(cell.requirement)
    with locked(cell.name):
        if stamp.is_file() and stamp.read_text() == wanted and (folder / "bin" / "python").exists():
            return folder / "bin" / "python"
        python = fresh_venv(folder)
        pip(python, "install", "-e", cell.requirement)
        stamp.write_text(wanted)
        return python


@dataclass(frozen=True)
class Dist:
    """The built sdist and wheel."""

    sdist: Path
    wheel: Path


def build_dist(out: Path) -> Dist:
    """`python -m build` of this checkout into `out`: its sdist and wheel."""
    command = [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dist(sdist, wheel)


def wheelhouse() -> Path:
    """Wheels of the core's and ONNX Runtime's dependencies, downloaded once per dependency set."""
    folder = MATRIX / "wheelhouse"
    stamp = folder / ".infermeter-matrix-stamp"
    wanted = requirements_hash("wheelhouse[onnxruntime]")
    requirements = [*core_requirements(), *optional_dependencies()["onnxruntime"]]
    with locked("wheelhouse"):
        if not (stamp.is_file() and stamp.read_text() == wanted):
            folder.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "pip", "download", "--only-binary", ":all:", "--dest", str(folder)]
            proc = subprocess.run([*command, *PIP_QUIET, *requirements], capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, proc.stderr[-3000:]
            stamp.write_text(wanted)
    return folder


def wheel_venv(folder: Path, wheel: Path) -> Path:
    """A fresh venv at `folder` holding `wheel` with its [onnxruntime] extra, installed offline from the
    wheelhouse (the install never reaches the registry); returns its python."""
    python = fresh_venv(folder)
    pip(python, "install", "--no-index", "--find-links", str(wheelhouse()), f"{wheel}[onnxruntime]")
    return python


def cli_env(cache: Path) -> dict[str, str]:
    """The environment for running a cell's CLI: its own model cache, no run history, no inherited venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(INFERMETER_CACHE_DIR=str(cache), INFERMETER_HISTORY="off")
    return env


def run_infermeter(
    python: Path, args: list[str], cache: Path, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run the `infermeter` console script of `python`'s venv, as a user of that venv would."""
    script = python.parent / "infermeter"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=timeout, env=cli_env(cache), cwd=cache
    )


def write_tiny_onnx(path: Path) -> Path:
    """A small float32 MLP (`input` [batch, 16] -> `logits` [batch, 4]) as an ONNX file, built with onnx.helper."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 4)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["input", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])],
        [w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
