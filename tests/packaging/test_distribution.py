"""A real distribution: `python -m build` makes an sdist and a wheel that pass `twine check`, carry the package data
and the one version, and the wheel installs into a fresh venv offline and benchmarks an ONNX file.

The offline install reads the core's and ONNX Runtime's wheels from a wheelhouse that `pip download` fills once
(kept under `.venv-matrix/`, refilled when the dependencies change); the install itself never reaches the registry.
The distribution and that venv are made once per session (conftest.py): test_matrix.py runs its ONNX Runtime cell
in the same venv.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from venv_cells import ROOT, Dist, cli_env, optional_dependencies, run_infermeter, write_tiny_onnx

PACKAGE_DATA = sorted(
    str(path.relative_to(ROOT / "src"))
    for pattern in ("infermeter/models/data/*.txt", "infermeter/llm/data/*.txt")
    for path in (ROOT / "src").glob(pattern)
)


def source_version() -> str:
    """`__version__` as written in src/infermeter/__init__.py, the one place the version is set."""
    text = (ROOT / "src" / "infermeter" / "__init__.py").read_text()
    match = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    assert match, "src/infermeter/__init__.py sets no __version__"
    return match.group(1)


def test_twine_check_passes(dist: Dist) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist.sdist), str(dist.wheel)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_wheel_and_sdist_carry_the_package_data_and_one_version(dist: Dist) -> None:
    assert PACKAGE_DATA, "no package data found under src/"
    version = source_version()
    assert dist.wheel.name.startswith(f"infermeter-{version}-py3-none-any")
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(f"infermeter-{version}.dist-info/METADATA").decode()
    assert set(PACKAGE_DATA) <= names, set(PACKAGE_DATA) - names
    assert f"\nVersion: {version}\n" in metadata
    extras = set(re.findall(r"^Provides-Extra: (.+)$", metadata, re.MULTILINE))
    assert extras == set(optional_dependencies())
    with tarfile.open(dist.sdist) as sdist:
        members = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {f"src/{name}" for name in PACKAGE_DATA} <= members
    assert not any(name.startswith(("tests/", ".venv", "benchmarks/")) for name in members)  # the package only


@pytest.mark.slow
def test_the_wheel_installs_offline_and_benchmarks_an_onnx_file(wheel_python: Path, tmp_path: Path) -> None:
    python = wheel_python  # a fresh venv, the wheel and [onnxruntime] installed offline (conftest.py)
    work = tmp_path / "work"
    work.mkdir()
    version = run_infermeter(python, ["--version"], work)
    assert version.returncode == 0 and source_version() in version.stdout, version
    # The package data is read from the installed wheel, not from this checkout.
    probe = "from infermeter.models.text_feeds import load_sentences as s; from infermeter.llm.tinyllama " + (
        "import corpus_text as c; import infermeter; print(infermeter.__file__, len(s()), len(c()))"
    )
    data = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=work, env=cli_env(work))
    location, sentences, corpus = data.stdout.split()
    assert str(python.parent.parent) in location and int(sentences) > 0 and int(corpus) > 0, data
    model = write_tiny_onnx(work / "tiny.onnx")
    output = work / "r.json"
    args = ["bench", str(model), "-b", "onnxruntime", "--batch", "1", "--max-time", "2", "--target-ci", "0"]
    proc = run_infermeter(python, [*args, "--no-roofline", "--no-history", "-o", str(output)], work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (case,) = json.loads(output.read_text())["cases"]
    assert case["status"] == "ok" and case["backend"] == "onnxruntime", case
