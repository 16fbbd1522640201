"""The KubeRay manifest (deploy/kuberay/infermeter-cluster.yaml) says what the code expects: valid YAML, the pinned
Ray version, one slot and one machine label per worker pod, one benchmark pod per Kubernetes node, and a nightly
driver whose command `bench` accepts, naming the head's service and the worker groups' classes."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest

from infermeter.cli.bench import bench
from infermeter.cluster import MACHINE_LABEL, SLOT_RESOURCE
from venv_cells import ROOT, optional_dependencies

yaml = pytest.importorskip("yaml")

MANIFEST = ROOT / "deploy" / "kuberay" / "infermeter-cluster.yaml"


def _documents() -> dict[str, Any]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def _ray_pin() -> str:
    (pin,) = [r for r in optional_dependencies()["cluster"] if r.startswith("ray")]
    return pin.split("==")[1]


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec["template"]["spec"]["containers"])


def test_the_cluster_runs_the_pinned_ray_and_its_head_takes_no_case() -> None:
    cluster = _documents()["RayCluster"]
    assert cluster["apiVersion"] == "ray.io/v1"
    spec = cluster["spec"]
    assert spec["rayVersion"] == _ray_pin()
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    images = [c["image"] for group in groups for c in _containers(group)]
    images.append(_documents()["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"])
    assert all(image.endswith(f":{_ray_pin()}") for image in images), images
    head = spec["headGroupSpec"]["rayStartParams"]
    assert "resources" not in head and head["num-cpus"] == "0"


def test_every_worker_pod_is_one_slot_of_its_class_alone_on_its_machine() -> None:
    groups = _documents()["RayCluster"]["spec"]["workerGroupSpecs"]
    assert len(groups) >= 2
    for group in groups:
        params = group["rayStartParams"]
        # KubeRay hands the value to `ray start` through a shell, which takes one word of it.
        (resources,) = shlex.split(params["resources"])
        assert json.loads(resources) == {SLOT_RESOURCE: 1}
        assert params["labels"] == f"{MACHINE_LABEL}={group['groupName']}"
        (container,) = _containers(group)
        assert container["resources"]["requests"] == container["resources"]["limits"]
        assert re.fullmatch(r"\d+", container["resources"]["limits"]["cpu"])  # whole CPUs: Guaranteed QoS
        pod = group["template"]
        (rule,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert rule["topologyKey"] == "kubernetes.io/hostname"
        assert rule["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()


def test_the_nightly_driver_runs_a_command_bench_accepts_on_every_class() -> None:
    documents = _documents()
    groups = documents["RayCluster"]["spec"]["workerGroupSpecs"]
    (driver,) = documents["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    words = shlex.split(driver["args"][0])
    assert words[:2] == ["infermeter", "bench"]
    # The shell's date in the output name stands for any name here.
    args = [re.sub(r"\$\(.*\)", "DATE", word) for word in words[2:]]
    context = bench.make_context("bench", args)
    params = context.params
    assert params["cluster"] == f"{documents['RayCluster']['metadata']['name']}-head-svc:6379"
    assert params["machines"] == (",".join(group["groupName"] for group in groups),)
    worker_cpus = min(int(_containers(group)[0]["resources"]["limits"]["cpu"]) for group in groups)
    assert 0 < params["threads"] < worker_cpus  # a core left to Ray's own daemons on each node
