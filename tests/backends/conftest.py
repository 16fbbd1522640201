"""Fixtures for backend tests: the tiny CNN and a case factory with fast measurement settings."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from backend_helpers import FAST
from infermeter.core.case import Case
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec

MakeCase = Callable[..., Case]


@pytest.fixture
def tiny_cnn() -> ModelSpec:
    """The zoo's 3x32x32 four-layer CNN."""
    return resolve_model("tiny_cnn")


@pytest.fixture
def make_case() -> MakeCase:
    """Case(tiny_cnn, backend, ...) with fast measurement settings and two threads."""

    def make(backend: str, **kwargs: object) -> Case:
        options = kwargs.pop("options", {})
        assert isinstance(options, dict)
        fields: dict[str, object] = {"batch": 2, "threads": 2, "settings": FAST, **kwargs}
        return Case("tiny_cnn", backend, options=tuple(sorted(options.items())), **fields)  # type: ignore[arg-type]

    return make
