"""`bench --cluster` on a real local Ray cluster (`ray.cluster_utils.Cluster`): a head without a slot and one node per
machine class, each with one `infermeter_slot` and its class label. A null sweep across two classes, tiny_cnn on ONNX
Runtime, a node killed under a case, and Ctrl-C on the driver followed by `--resume`."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import load_json, run_cli
from fault_harness import FAST
from infermeter.cluster import MACHINE_LABEL, SLOT_RESOURCE
from infermeter.core.case import MeasureSettings
from infermeter.measure.benchrun import SilentDisplay, new_sweep, run_bench
from infermeter.measure.plan import Matrix
from infermeter.measure.planfile import stored_plan
from infermeter.measure.scenarios import LATENCY
from infermeter.measure.sweep import SweepEvent
from infermeter.models.convert import onnx_for
from infermeter.models.resolve import resolve_model
from infermeter.results.io import read_results
from infermeter.results.records import NodeRecord, read_record

pytest.importorskip("ray")
from ray.cluster_utils import Cluster

pytestmark = pytest.mark.cluster

QUIET = ["--no-roofline", "--no-history"]
# The head notices a dead node within about 1.5 s (Ray's default is tens of seconds).
HEAD = {"num_cpus": 0, "include_dashboard": False, "_system_config": {"health_check_period_ms": 500}}


def _add(cluster: Cluster, machine: str) -> Any:
    return cluster.add_node(num_cpus=1, resources={SLOT_RESOURCE: 1}, labels={MACHINE_LABEL: machine})


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, dict[str, str]]]:
    """The cluster and its nodes' ids by class (a and b)."""
    cluster = Cluster(initialize_head=True, head_node_args=HEAD)
    try:
        nodes = {machine: _add(cluster, machine).node_id for machine in ("a", "b")}
        cluster.wait_for_nodes()
        yield cluster, nodes
    finally:
        cluster.shutdown()


def _expected_machines(path: Path) -> dict[str, str | None]:
    """Each planned case's machine class, by id, from the plan stored in the results file."""
    plan = stored_plan(read_results(path), path, resolve_model)
    assert plan is not None
    return {case.id: case.machine for item in plan.items() for case in item.chain}


def _nodes(path: Path) -> list[tuple[dict[str, Any], NodeRecord]]:
    results = read_results(path)
    records = [(case, read_record(case, NodeRecord)) for case in results.cases]
    assert all(record is not None for _, record in records)
    data = load_json(path)["cases"]
    return [(raw, record) for raw, (_, record) in zip(data, records, strict=True) if record is not None]


def _started_s(case: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(case["started"]).timestamp()


def test_a_null_sweep_lands_on_every_class_one_task_per_node_at_a_time(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    head, nodes = cluster
    out = tmp_path / "null.json"
    matrix = ["-b", "null,null:latency_ms=2", "--batch", "1,2", "--machines", "a,b", "--threads", "2"]
    proc = run_cli("bench", "tiny_cnn", *matrix, *FAST, *QUIET, "-O", "null.wait=sleep", "--cluster", head.address,
                   "-o", str(out), timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    expected = _expected_machines(out)
    cases = _nodes(out)
    assert sorted(case["id"] for case, _ in cases) == sorted(expected) and len(expected) == 8
    for case, node in cases:
        assert case["status"] == "ok", case["error"]
        assert node.machine == expected[case["id"]] and node.node_id == nodes[node.machine]
        # Ray set the task's OMP_NUM_THREADS to 1 (num_cpus=0); the case ran, and says it ran, with --threads.
        assert case["threads"] == 2 and node.environment["thread_env"]["OMP_NUM_THREADS"] == "2"
        assert node.held_until_s is not None
        assert node.held_from_s - 1 <= _started_s(case) <= node.held_until_s
        assert _started_s(case) + case["duration_s"] <= node.held_until_s + 1  # `started` is to the second
    # An interleaved pair is one task (its speedup paired per round); tasks on one node never overlap in time.
    assert sum(1 for case, _ in cases if case["timing"]["paired"]) == 4
    for node_id in nodes.values():
        held = sorted({(n.held_from_s, n.held_until_s) for _, n in cases if n.node_id == node_id})
        assert len(held) == 2
        assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(held))


def test_tiny_cnn_on_onnxruntime_runs_on_each_class(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    head, nodes = cluster
    pytest.importorskip("onnxruntime")
    # Exported once here: the test's nodes share one cache folder, which real nodes do not.
    onnx_for(resolve_model("tiny_cnn"))
    out = tmp_path / "ort.json"
    matrix = ["-b", "onnxruntime", "--batch", "1", "--machines", "all", "--threads", "1"]
    proc = run_cli("bench", "tiny_cnn", *matrix, *FAST, *QUIET, "--cluster", head.address, "-o", str(out), timeout=240)
    assert proc.returncode == 0, proc.stderr
    cases = _nodes(out)
    assert sorted(node.machine or "" for _, node in cases) == ["a", "b"]
    for case, node in cases:
        assert case["status"] == "ok", case["error"]
        assert not case["synthetic"] and case["latency_ms"]["p50"] > 0 and case["backend_version"]
        assert node.node_id == nodes[node.machine or ""]


_OPTIMIZE_ON_CLASS_B = """
import sys
from pathlib import Path
from infermeter.core.case import MeasureSettings
from infermeter.cluster.session import connected
from infermeter.optimize.pipeline import open_run
from infermeter.optimize.request import OptimizeRequest
from infermeter.optimize.steps.fp32 import step_fp32
from infermeter.optimize.steps.tuning import step_tuning

address, folder = sys.argv[1], Path(sys.argv[2])
settings = MeasureSettings(warmup_iterations=2, min_iterations=10, min_time_s=0.05, max_time_s=1, target_ci=0)
request = OptimizeRequest("tiny_cnn", folder, backends=("null",), settings=settings, threads=1,
                          options=(("null.trial_s", "0.001"),), cluster=address, machine="b")
with connected(address):
    run = open_run(request, lambda event: print("EVENT", event.message, flush=True))
    step_fp32(run, "torch")  # the null case, untuned
    step_tuning(run)  # and tuned: a second candidate, on a node of the same class
"""


def test_optimize_measures_its_candidates_on_nodes_of_the_machine_class(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    head, nodes = cluster
    folder = tmp_path / "opt"
    # In a process of its own: Ray's core worker stays loaded in a process that connected once.
    proc = subprocess.run([sys.executable, "-c", _OPTIMIZE_ON_CLASS_B, head.address, str(folder)],
                          capture_output=True, text=True, timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    measured = read_results(folder / "results.json").cases
    assert [case.status for case in measured] == ["ok", "ok"] and measured[1].options.get("null.tune_trials")
    for case in measured:
        node = read_record(case, NodeRecord)
        assert node is not None and (node.machine, node.node_id) == ("b", nodes["b"])
    assert "EVENT running on" in proc.stdout  # the live view says where each case runs


class _KillOnStart(SilentDisplay):
    """A display that, when the first task says which node it runs on, removes that node from the cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.killed = cluster, ""

    @contextmanager
    def progress(self, total: int) -> Iterator[Callable[[SweepEvent], None]]:
        def on_event(event: SweepEvent) -> None:
            if self.killed or not event.phase.startswith("running on"):
                return
            prefix = event.phase.split("[")[1].split("]")[0]
            node = next(n for n in self.cluster.worker_nodes if n.node_id.startswith(prefix))
            self.killed = node.node_id
            self.cluster.remove_node(node, allow_graceful=False)

        yield on_event


@contextmanager
def _watch_json(path: Path) -> Iterator[list[str]]:
    """Read `path` over and over while the block runs; the list collects every read that was not valid JSON."""
    invalid: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if path.exists():
                try:
                    json.loads(path.read_text())
                except ValueError as exc:
                    invalid.append(str(exc))
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield invalid
    finally:
        done.set()
        thread.join()


def test_a_node_killed_under_a_case_is_retried_on_another_of_its_class(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from infermeter.cluster.driver import run_on_cluster
    from infermeter.cluster.session import connected

    head, _ = cluster
    spares = {_add(head, "k").node_id for _ in range(2)}
    head.wait_for_nodes()
    settings = MeasureSettings(warmup_iterations=0, min_iterations=5, min_time_s=0.2, max_time_s=2, target_ci=0)
    # Each case spends 2 s loading: long enough to lose its node under it.
    matrix = Matrix((resolve_model("tiny_cnn"),), (("null",),), batches=(1, 2), threads=1, settings=settings,
                    options=(("null.load_s", "2"), ("null.wait", "sleep")), machines=("k",))  # fmt: skip
    out = tmp_path / "lost.json"
    display = _KillOnStart(head)
    with connected(head.address), _watch_json(out) as invalid:
        sweep = new_sweep(out, matrix, LATENCY, True, ["infermeter", "bench"], {})
        run_bench(sweep, display, roofline=False, history=False, cluster=run_on_cluster)
    assert display.killed in spares and not invalid
    cases = _nodes(out)
    assert [case["status"] for case, _ in cases] == ["ok", "ok"]
    retried = [node for _, node in cases if node.lost]
    assert len(retried) == 1 and retried[0].lost[0].node_id == display.killed
    assert retried[0].node_id in spares - {display.killed}
    assert "NodeDiedError" in retried[0].lost[0].reason


def test_ctrl_c_keeps_the_finished_cases_and_resume_finishes_the_rest(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    head, _ = cluster
    out = tmp_path / "int.json"
    options = ["-O", "null.wait=sleep", "-O", "null.load_s=1"]
    matrix = ["-b", "null", "--batch", "1,2,3,4", "--machines", "a", "--threads", "1", *FAST, *QUIET, *options]
    args = ["bench", "tiny_cnn", *matrix, "--cluster", head.address, "-o", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and load_json(out)["cases"]:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    saved = [case["id"] for case in load_json(out)["cases"]]
    assert 1 <= len(saved) < 4
    resumed = run_cli("bench", "--resume", str(out), "--cluster", head.address, timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    ids = [case["id"] for case in load_json(out)["cases"]]
    assert len(ids) == len(set(ids)) == 4 and ids[: len(saved)] == saved
    assert sorted(ids) == sorted(_expected_machines(out))
