"""The built distribution and the venv its wheel is installed into, made once per session: the distribution
tests check them, and the matrix runs its ONNX Runtime cell in that venv (tests/venv_cells.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from venv_cells import Dist, build_dist, wheel_venv


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """This checkout's sdist and wheel, built by `python -m build`."""
    return build_dist(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def wheel_python(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv holding the built wheel with [onnxruntime], installed offline."""
    return wheel_venv(tmp_path_factory.mktemp("wheel") / "venv", dist.wheel)
