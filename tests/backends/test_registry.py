"""One registry of every backend, inference and generation; everything else about a backend is on its class, and
the lists the rest of infermeter needs are derived from it (none kept outside `backends/`)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from cli_helpers import run_cli
from infermeter.backends.base import Backend
from infermeter.backends.registry import (
    REGISTRY,
    backend_class,
    backend_for_file,
    backend_names,
    get_backend,
    get_generation_backend,
)
from infermeter.core.errors import UsageError
from infermeter.llm.backends.base import GenerationBackend

SRC = Path(__file__).resolve().parents[2] / "src" / "infermeter"
# Where backends live: their own modules may name themselves and their siblings.
BACKEND_FOLDERS = ("backends", "llm/backends")
# Collections whose strings only look like backend names: (file, the statement's first words, why).
NOT_BACKEND_LISTS = (
    ("machine/ceilings.py", "PEAK_FRAMEWORKS", "distributions whose kernels the peak probes time, not backends"),
    ("deploy/repository.py", "KNOWN_ELSEWHERE", "Triton's own platform and backend names"),
    ("core/extras.py", "MODULE_EXTRAS", "import names of Python packages and the pip extras that install them"),
    ("core/extras.py", "_ENGINE_EXTRAS", "pip extras in the order the install hint recommends them"),
)


def test_every_registry_line_loads_a_class_of_its_task() -> None:
    for entry in REGISTRY:
        cls = backend_class(entry.name)
        assert cls.name == entry.name
        assert issubclass(cls, Backend if entry.task == "infer" else GenerationBackend), entry
    assert len({entry.name for entry in REGISTRY}) == len(REGISTRY)


def test_a_backend_of_the_other_task_is_named_as_such() -> None:
    with pytest.raises(UsageError, match="llama-cpp is a generate backend: use `infermeter llm bench`"):
        get_backend("llama-cpp")
    with pytest.raises(UsageError, match="unknown generation backend 'torch'; choose from llama-cpp"):
        get_generation_backend("torch")


def _backend_lists(path: Path, names: set[str]) -> list[tuple[str, set[str]]]:
    """(first line of the top-level statement, names) for each literal collection naming two or more backends."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for statement in ast.parse(source).body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                items = list(node.elts)
            elif isinstance(node, ast.Dict):
                items = [k for k in node.keys if k is not None] + list(node.values)
            else:
                continue
            named = {i.value for i in items if isinstance(i, ast.Constant) and i.value in names}
            if len(named) >= 2:
                found.append((lines[statement.lineno - 1], named))
    return found


def test_no_list_of_backend_names_outside_the_backend_folders() -> None:
    names = {entry.name for entry in REGISTRY}
    offenders, allowed_seen = [], set()
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith(tuple(f"{folder}/" for folder in BACKEND_FOLDERS)):
            continue
        for line, named in _backend_lists(path, names):
            allowed = [entry for entry in NOT_BACKEND_LISTS if entry[0] == relative and entry[1] in line]
            allowed_seen.update(entry[1] for entry in allowed)
            if not allowed:
                offenders.append(f"{relative}: {line.strip()} names {sorted(named)}")
    assert not offenders, "derive these from the registry (a capability on the backend class):\n" + "\n".join(offenders)
    present = {entry[1] for entry in NOT_BACKEND_LISTS if (SRC / entry[0]).is_file()}
    assert allowed_seen == present, "a stale NOT_BACKEND_LISTS entry"


def test_the_lists_derived_from_capabilities_are_the_ones_kept_before() -> None:
    from infermeter.backends.triton import servable_engines
    from infermeter.deploy.triton import platform_for
    from infermeter.machine.environment import framework_versions
    from infermeter.optimize.steps.int8 import int8_engines
    from infermeter.parity.run import reference_backends
    from infermeter.quantize.request import quantize_engines

    assert int8_engines("cpu") == ["onnxruntime", "openvino"]
    assert int8_engines("cuda") == ["onnxruntime-tensorrt", "tensorrt"]
    shape_aware = [n for n in backend_names() if get_backend(n).shape_aware]
    assert shape_aware == ["onnxruntime", "openvino", "onnxruntime-cuda", "onnxruntime-tensorrt", "tensorrt", "iree"]
    # tvm reads ONNX but compiles for static shapes only: no static/dynamic choice to compare.
    assert [n for n in backend_names() if get_backend(n).consumes_onnx] == [*shape_aware, "tvm"]
    assert [n for n in backend_names() if get_backend(n).slow_to_load] == ["torch-compile", "iree", "tvm"]
    # openvino is the reference of an OpenVINO IR (its FP32 run of the same IR), tflite (LiteRT) of a .tflite file;
    # torch and onnxruntime of the rest.
    assert reference_backends() == {
        "torch": (),
        "onnxruntime": (("onnxruntime.opt_level", "disable"),),
        "openvino": (),
        "tflite": (),
    }
    assert quantize_engines() == ["onnxruntime", "openvino"]
    assert (backend_for_file(".onnx"), backend_for_file(".XML")) == ("onnxruntime", "openvino")
    assert backend_for_file(".tflite") == "tflite"  # its own runtime, though OpenVINO reads it too
    assert servable_engines() == {
        "onnxruntime_onnx": "onnxruntime",
        "onnxruntime": "onnxruntime",
        "openvino": "openvino",
    }
    assert (platform_for("openvino").key, platform_for("openvino").kind) == ("backend", "KIND_CPU")
    assert (platform_for("tensorrt").name, platform_for("tensorrt").writable) == ("tensorrt_plan", False)
    assert platform_for("onnxruntime-cuda").kind == "KIND_GPU"
    with pytest.raises(UsageError, match="no Triton backend"):
        platform_for("torch")
    assert "numpy" in framework_versions()


def test_backends_lists_generation_backends_too() -> None:
    proc = run_cli("backends", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert list(rows) == [entry.name for entry in REGISTRY]
    assert {rows[n]["task"] for n in ("llama-cpp", "transformers", "vllm", "tensorrt-llm")} == {"generate"}
    assert rows["onnxruntime"]["task"] == "infer" and "onnxruntime.opt_level" in rows["onnxruntime"]["options"]
    assert all(row["available"] or row["reason"] for row in rows.values())
    table = run_cli("backends", timeout=60)
    assert table.returncode == 0 and "tensorrt-llm" in table.stdout and "generate" in table.stdout
