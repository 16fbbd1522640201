"""Every worker process enters through `isolation.worker_main`: the start-up all of them need, and one way back for
whatever a job raises."""

from __future__ import annotations

import os

from infermeter.measure import isolation
from infermeter.measure.isolation import WorkerFailure, WorkerProcess, WorkerSetup, call_in_worker


def test_a_job_that_raises_comes_back_as_one_failure_line_with_its_status() -> None:
    kind, payload = call_in_worker(int, ("not a number",), timeout_s=60)
    assert kind == "error"
    assert isinstance(payload, WorkerFailure)
    assert payload.status == "failed"
    assert payload.message.startswith("ValueError: invalid literal for int()")
    assert str(payload) == payload.message  # callers that format the payload read the reason


def test_the_setup_sets_the_thread_counts_before_the_job_runs() -> None:
    # A thread count the parent does not have, so the worker can only have it from its setup.
    threads = 3 if os.environ.get("OMP_NUM_THREADS") != "3" else 5
    worker = WorkerProcess(isolation._call, (os.getenv, ("OMP_NUM_THREADS",)), 60, None, setup=WorkerSetup(threads))
    try:
        assert worker.receive() == ("result", str(threads))
    finally:
        worker.join()
