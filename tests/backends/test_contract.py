"""The backend contract over every registered backend (tests/backend_contract.py holds the checks): what each
declares is consistent, and every available inference backend loads, runs and measures through the isolated worker.
A backend that cannot run here is skipped with its own `available()` reason; a new backend is covered by registering
it, with no change here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend_contract import (
    check_capabilities,
    check_declaration,
    check_isolated,
    check_runs,
    contract_case,
    contract_model,
    onnx_file_model,
)
from infermeter.backends.base import Backend, Session
from infermeter.backends.null import NullBackend, NullSession
from infermeter.backends.registry import backend_class, backend_names, get_backend
from infermeter.core.case import Case
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact

ALL = backend_names("infer") + backend_names("generate")


def _available(name: str) -> type[Backend]:
    """The inference backend `name`, or a skip carrying the reason it gives for not running here."""
    cls = get_backend(name)
    reason = cls.available()
    if reason is not None:
        pytest.skip(f"{name} unavailable: {reason}")
    return cls


# Compiling backends spend tens of seconds in each load (torch-compile: ~27 s here for the two loads), which the
# whole suite would pay: their declarations are checked here, their runs by their own test files.
SLOW_SKIP = pytest.mark.skip(reason="slow_to_load: load and run are covered by the backend's own test file")


def _params(names: list[str]) -> list[object]:
    return [pytest.param(n, marks=SLOW_SKIP) if get_backend(n).slow_to_load else n for n in names]


@pytest.mark.parametrize("name", ALL)
def test_a_backend_declares_itself_consistently(name: str) -> None:
    cls = backend_class(name)
    check_declaration(cls, name)
    if issubclass(cls, Backend):
        check_capabilities(cls)


@pytest.mark.parametrize("name", _params(backend_names("infer")))
def test_a_backend_loads_runs_and_measures_in_its_worker(name: str, tmp_path: Path) -> None:
    cls = _available(name)
    spec = contract_model(cls, tmp_path)
    case = contract_case(spec, name)
    precision = check_runs(cls, spec, case)
    assert precision == "fp32" or cls.synthetic, f"an fp32 case of {name} computed in {precision}"
    check_isolated(spec, case, precision)


@pytest.mark.parametrize("name", _params([n for n in backend_names("infer") if get_backend(n).consumes_onnx]))
def test_a_backend_that_reads_onnx_takes_an_onnx_file_as_it_is(name: str) -> None:
    cls = _available(name)
    spec = onnx_file_model()
    assert spec.kind == "onnx"
    assert ".onnx" in cls.model_files, "a backend that reads ONNX loads .onnx files as they are"
    check_runs(cls, spec, contract_case(spec, name, batch=7))


def test_a_backend_that_cannot_run_here_says_why() -> None:
    """The skip reason is the backend's own: an unavailable one names what to install (never a blank reason)."""
    for name in ALL:
        reason = backend_class(name).available()
        assert reason is None or len(reason.split()) >= 3, (name, reason)


class _BrokenSession(NullSession):
    """Returns NaNs of the wrong batch: what the run contract must refuse."""

    def run(self, prepared: object) -> object:
        return [np.full((1, 1), np.nan, dtype=np.float32)]


class _BrokenBackend(NullBackend):
    """Declares an extra pyproject.toml does not have and loads a broken session."""

    install_extra = "no-such-extra"

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        return _BrokenSession(case)


def test_the_contract_refuses_a_broken_backend(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="no-such-extra"):
        check_capabilities(_BrokenBackend)
    with pytest.raises(AssertionError, match="the registry 'other'"):
        check_declaration(_BrokenBackend, "other")
    spec = contract_model(_BrokenBackend, tmp_path)
    with pytest.raises(AssertionError, match=r"\(1, 1\)"):
        check_runs(_BrokenBackend, spec, contract_case(spec, "null", batch=2))
