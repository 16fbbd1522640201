"""A KServe `InferenceService` (serving.kserve.io/v1beta1) serving the Triton repository with protocol v2.

Resources come from the case: CPU = intra-op threads × instances, requested and limited alike (Guaranteed QoS:
with the static CPU manager the pod then gets whole cores, so the measured thread count is not starved);
memory = measured peak RSS × instances, with headroom on the limit."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from infermeter.deploy.source import DeploySource
from infermeter.deploy.triton import platform_for

API_VERSION = "serving.kserve.io/v1beta1"
STORAGE_PLACEHOLDER = "s3://REPLACE-ME/model_repository"
# The limit above the request: Triton's own process and allocator slack come on top of what our process used.
MEMORY_LIMIT_HEADROOM = 1.5
# KServe's Triton runtime formats: `onnx` for ONNX Runtime models; any other Triton backend is format `triton`.
MODEL_FORMATS = {"onnxruntime_onnx": "onnx"}
PROTOCOLS = ("v1", "v2", "grpc-v2")
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Resources:
    """CPU cores and memory (MiB) for the predictor, with the sentence saying where each comes from."""

    cpu: int
    memory_request_mib: int
    memory_limit_mib: int
    cpu_origin: str
    memory_origin: str


def resources(source: DeploySource) -> Resources:
    """Requests and limits from the measured threads and peak memory of the case."""
    case = source.case
    instances = int(source.instances.value)
    cpu = max(1, case.threads) * instances
    if case.memory.peak_rss_mb is None:
        raise ValueError(f"case {case.id} has no measured peak memory")
    request = math.ceil(case.memory.peak_rss_mb * instances)
    return Resources(
        cpu=cpu,
        memory_request_mib=request,
        memory_limit_mib=math.ceil(request * MEMORY_LIMIT_HEADROOM),
        cpu_origin=f"case {case.id}: {case.threads} thread(s) x {instances} instance(s)",
        memory_origin=f"case {case.id}: peak RSS {case.memory.peak_rss_mb:.1f} MB x {instances} instance(s); "
        f"limit x{MEMORY_LIMIT_HEADROOM:g} for Triton's own memory",
    )


def manifest(source: DeploySource) -> dict[str, Any]:
    """The InferenceService as a dict (the YAML file is rendered from it)."""
    res = resources(source)
    platform = platform_for(source.case.backend)
    resources_block = {"cpu": str(res.cpu), "memory": f"{res.memory_request_mib}Mi"}
    return {
        "apiVersion": API_VERSION,
        "kind": "InferenceService",
        "metadata": {"name": source.name.replace("_", "-")},
        "spec": {
            "predictor": {
                "model": {
                    "modelFormat": {"name": MODEL_FORMATS.get(platform.name, "triton")},
                    "runtime": "kserve-tritonserver",
                    "protocolVersion": "v2",
                    "storageUri": STORAGE_PLACEHOLDER,
                    "env": [{"name": "OMP_NUM_THREADS", "value": str(max(1, source.case.threads))}],
                    "resources": {
                        "requests": resources_block,
                        "limits": {**resources_block, "memory": f"{res.memory_limit_mib}Mi"},
                    },
                }
            }
        },
    }


def check_manifest(document: Any) -> list[str]:
    """What the InferenceService CRD (v1beta1) requires and a document lacks; empty when it is valid."""
    problems = []
    if not isinstance(document, dict):
        return ["the document is not a mapping"]
    if document.get("apiVersion") != API_VERSION:
        problems.append(f"apiVersion must be {API_VERSION}")
    if document.get("kind") != "InferenceService":
        problems.append("kind must be InferenceService")
    name = (document.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > 63:
        problems.append(f"metadata.name {name!r} must be a DNS-1035 label (lowercase letters, digits, '-')")
    model = ((document.get("spec") or {}).get("predictor") or {}).get("model")
    if not isinstance(model, dict):
        return [*problems, "spec.predictor.model is required"]
    if not isinstance((model.get("modelFormat") or {}).get("name"), str):
        problems.append("spec.predictor.model.modelFormat.name is required")
    if model.get("protocolVersion") not in PROTOCOLS:
        problems.append(f"spec.predictor.model.protocolVersion must be one of {', '.join(PROTOCOLS)}")
    if not isinstance(model.get("storageUri"), str):
        problems.append("spec.predictor.model.storageUri must be a string")
    for part in ("requests", "limits"):
        block = (model.get("resources") or {}).get(part) or {}
        if not {"cpu", "memory"} <= set(block):
            problems.append(f"spec.predictor.model.resources.{part} needs cpu and memory")
    return problems


def _yaml_lines(value: Any, indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list):
                lines += [f"{pad}{key}:", *_yaml_lines(item, indent + 1)]
            else:
                lines.append(f"{pad}{key}: {json.dumps(item)}")
    else:
        for item in value:
            if not isinstance(item, dict | list):
                lines.append(f"{pad}- {json.dumps(item)}")
                continue
            inner = _yaml_lines(item, indent + 1)
            lines.append(f"{pad}- {inner[0].lstrip()}")
            lines += inner[1:]
    return lines


def render_manifest(source: DeploySource) -> str:
    """inference-service.yaml, with the origin of the resources in comments (JSON scalars are valid YAML)."""
    res = resources(source)
    header = [
        f"# KServe InferenceService written by `infermeter deploy` from {source.results_path.name}, "
        f"case {source.case.id}.",
        f"# storageUri is a placeholder: upload the model repository and put its URI there ({STORAGE_PLACEHOLDER}).",
        f"# cpu: {res.cpu_origin} (requests = limits: Guaranteed QoS keeps those cores for the threads).",
        f"# memory: {res.memory_origin}.",
    ]
    return "\n".join([*header, *_yaml_lines(manifest(source), 0)]) + "\n"
