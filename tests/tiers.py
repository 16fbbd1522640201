"""Test tiers: `make unit` runs the fast tier (`-m "not integration"`), `make test` and CI run every test.

A test is put in the `integration` tier automatically, from what it is and what it calls, so that nobody has to
remember a marker: it lives in a folder of process-heavy tests (packaging venvs, a Ray cluster), it carries a
marker that already says it is slow, it asks for a fixture that starts a server, or its code names a function
that starts processes or runs an engine (the CLI in a subprocess, a case in its isolated worker, a build, an
export, a server). The fast tier checks the classification while it runs: a unit-tier test that starts a process
fails and names the place to add the signal it missed, so the tier stays fast and the signals stay complete.
"""

from __future__ import annotations

import multiprocessing.process
import subprocess
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

INTEGRATION = "integration"
# Folders whose every test builds virtual environments or starts a cluster.
INTEGRATION_FOLDERS = frozenset({"packaging", "cluster"})
# Markers that already say a test runs real frameworks for seconds, needs a cluster or a GPU.
INTEGRATION_MARKERS = frozenset({"slow", "cluster", "gpu"})
# Fixtures that start servers, or measure whole sweeps, when set up.
INTEGRATION_FIXTURES = frozenset({"serve", "optimize_folder", "load_file", "tiny_folder", "gpu_check"})
# Names whose use means processes, servers, compiling or exporting a model: the CLI run as a user runs it, a case
# in its worker, a sweep, a build, an export, a server, a probe of the machine, a fault injected into a sweep.
INTEGRATION_CALLS = frozenset(
    {
        "run_cli",
        "subprocess",
        "Popen",
        "execute_case",
        "run_sweep",
        "run_group",
        "run_generation",
        "build_artifact",
        "build_isolated",
        "export_model",
        "export_to_onnx",
        "open_session",
        "check_backend",
        "check_case_parity",
        "run_probe",
        "run_trial",
        "lookup_model",
        "make_server",
        "ServerThread",
        "run_optimize",
        "quantize_model",
        "call_in_worker",
        "run_in_worker",
        "run_soak",
        "paired_decision",
        "fallback_candidate",
        "FallbackRequest",
        "WorkerProcess",
        "CaseWorker",
        "run_generate_isolated",
        "GenerationWorker",
        "BurstWorker",
        "run_together",
        "run_generation_sweep",
        "open_run",
        "rerun_comparison",
        "multiprocessing",
        "run_isolated",
        "spawn_server",
        "visit_round_robin",
        "record_run",
        "bench",
        "run_child",
        "time_arms",
        "allocator_unavailable",
    }
)
# Tests that start no process but still take seconds of pure computation (property tests with many examples).
SLOW_IN_PROCESS = frozenset({"test_plan_never_overlaps_live_tensors_and_beats_naive"})


TESTS_ROOT = Path(__file__).parent


def _code_names(code: types.CodeType) -> set[str]:
    """Every global and attribute name the code refers to, nested functions and lambdas included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _names(function: types.FunctionType, seen: set[types.CodeType] | None = None) -> set[str]:
    """The names a test function refers to, and those of the test helpers it calls (functions defined under
    tests/, followed through their globals), so that a helper that starts a sweep counts for its callers."""
    seen = set() if seen is None else seen
    if function.__code__ in seen:
        return set()
    seen.add(function.__code__)
    names = _code_names(function.__code__)
    # Where the names can be looked up: the function's module, and the test helper modules it imported
    # (`import backend_contract as contract` makes `contract.check_isolated` a name to follow).
    spaces = [function.__globals__] + [
        vars(value)
        for value in function.__globals__.values()
        if isinstance(value, types.ModuleType) and _defined_in_tests(value)
    ]
    for name in list(names):
        for space in spaces:
            helper = space.get(name)
            if isinstance(helper, types.FunctionType) and _defined_in_tests(helper):
                names |= _names(helper, seen)
    return names


def _defined_in_tests(thing: types.FunctionType | types.ModuleType) -> bool:
    """True for a function or module whose source file lies under tests/."""
    filename = thing.__code__.co_filename if isinstance(thing, types.FunctionType) else getattr(thing, "__file__", None)
    return filename is not None and Path(filename).resolve().is_relative_to(TESTS_ROOT.resolve())


def integration_reason(item: pytest.Item) -> str | None:
    """Why the test belongs to the integration tier, or None for the fast tier."""
    path = Path(str(item.fspath))
    if INTEGRATION_FOLDERS & set(path.parts):
        return f"folder {path.parent.name}"
    marks = {mark.name for mark in item.iter_markers()} & INTEGRATION_MARKERS
    if marks:
        return f"marker {sorted(marks)[0]}"
    fixtures = set(getattr(item, "fixturenames", ())) & INTEGRATION_FIXTURES
    if fixtures:
        return f"fixture {sorted(fixtures)[0]}"
    function = getattr(item, "function", None)
    if function is None:
        return None
    if function.__name__ in SLOW_IN_PROCESS:
        return "slow in process"
    calls = _names(function) & INTEGRATION_CALLS
    return f"calls {sorted(calls)[0]}" if calls else None


def mark_tiers(items: list[pytest.Item]) -> None:
    """Add the integration marker to every test that belongs to that tier."""
    for item in items:
        if integration_reason(item) is not None:
            item.add_marker(INTEGRATION)


def unit_tier_only(config: pytest.Config) -> bool:
    """True when this run selects the fast tier alone (`-m "not integration"`)."""
    return str(config.getoption("markexpr", "")).replace(" ", "") == f"not{INTEGRATION}"


def _refuse(what: str):  # type: ignore[no-untyped-def]
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(
            f"this fast-tier test {what}: it belongs to the integration tier, which tests/tiers.py did not see. "
            "Add the name of the function it calls to INTEGRATION_CALLS there (or a fixture to INTEGRATION_FIXTURES)."
        )

    return refuse


@pytest.fixture(autouse=True)
def fast_tier_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In the fast tier, starting a process fails the test: the classification missed a signal."""
    if unit_tier_only(request.config):
        monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("starts a subprocess"))
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", _refuse("starts a worker process"))
    yield
