"""Fixtures of the deploy tests: one optimize-shaped folder and one load results file per module."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from deploy_helpers import make_load_results, make_optimize_folder


@pytest.fixture(scope="module")
def optimize_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_cnn optimized: pick OpenVINO on the INT8 artifact, fallback ONNX Runtime FP32."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # random calibration: accuracy is not what these tests check
        return make_optimize_folder(tmp_path_factory.mktemp("opt") / "opt-tiny")


@pytest.fixture(scope="module")
def load_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`load -o` results of the pick's configuration."""
    return make_load_results(tmp_path_factory.mktemp("load") / "load.json")
