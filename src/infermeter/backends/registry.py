"""The backend registry: CLI words to backend classes, imported lazily so that `infermeter --help` stays fast."""

from __future__ import annotations

import importlib

from infermeter.backends.base import Backend
from infermeter.errors import UsageError

# CLI word -> "module:Class". Importing a backend module never imports its framework.
_BACKENDS: dict[str, str] = {
    "null": "infermeter.backends.null:NullBackend",
    "torch": "infermeter.backends.torch_eager:TorchEagerBackend",
    "onnxruntime": "infermeter.backends.onnxruntime:OnnxRuntimeBackend",
    "torch-compile": "infermeter.backends.torch_compile:TorchCompileBackend",
    "torchscript": "infermeter.backends.torchscript:TorchScriptBackend",
    "openvino": "infermeter.backends.openvino_backend:OpenVinoBackend",
    "onnxruntime-cuda": "infermeter.backends.onnxruntime_gpu:OnnxRuntimeCudaBackend",
    "onnxruntime-tensorrt": "infermeter.backends.onnxruntime_gpu:OnnxRuntimeTensorRTBackend",
    "tensorrt": "infermeter.backends.tensorrt_backend:TensorRTBackend",
    "tflite": "infermeter.backends.tflite:TFLiteBackend",
}


def backend_names() -> list[str]:
    """Every known backend's CLI word, in registry order."""
    return list(_BACKENDS)


def get_backend(name: str) -> type[Backend]:
    """The backend class for CLI word `name`, or UsageError listing the known ones."""
    target = _BACKENDS.get(name)
    if target is None:
        raise UsageError(
            f"unknown backend {name!r}; known backends: {', '.join(_BACKENDS)} (see `infermeter backends`)"
        )
    module_name, class_name = target.split(":")
    backend: type[Backend] = getattr(importlib.import_module(module_name), class_name)
    return backend


def default_backends() -> list[str]:
    """Every available, non-synthetic CPU backend: what `bench` runs when no --backend is given."""
    chosen = []
    for name in _BACKENDS:
        cls = get_backend(name)
        if not cls.synthetic and cls.device == "cpu" and cls.available() is None:
            chosen.append(name)
    return chosen
