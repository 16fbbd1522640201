"""The cluster tests' marker: `@pytest.mark.cluster` on the tests that start a local multi-node Ray cluster."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: starts a local multi-node Ray cluster (the `cluster` extra)")
