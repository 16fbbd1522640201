"""Shared fixtures. Every test run uses its own converted-model cache so that tests never touch the user's."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tiers import INTEGRATION, fast_tier_starts_no_process, mark_tiers

# Set at import time so that spawned worker processes inherit it too.
_CACHE = Path(tempfile.mkdtemp(prefix="infermeter-test-cache-"))
os.environ.setdefault("INFERMETER_CACHE_DIR", str(_CACHE))
os.environ.setdefault("INFERMETER_HISTORY", "off")


@pytest.fixture
def cache_dir() -> Path:
    """The converted-model cache of this test session."""
    return Path(os.environ["INFERMETER_CACHE_DIR"])


@pytest.fixture
def own_compile_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A converted-model and compile cache of this test alone (its workers inherit it), so that what the test
    builds is a cache miss whatever other tests built before it, in any order."""
    folder = tmp_path / "compile-cache"
    folder.mkdir()
    monkeypatch.setenv("INFERMETER_CACHE_DIR", str(folder))
    return folder


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{INTEGRATION}: processes, servers, engines compiling, Ray, venvs (tests/tiers.py)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_tiers(items)
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_tests:
        from infermeter.backends._gpu import nvidia_gpu_reason

        reason = nvidia_gpu_reason()
        for item in gpu_tests if reason else ():
            item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}"))


__all__ = ["fast_tier_starts_no_process"]
