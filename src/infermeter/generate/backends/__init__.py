"""Generation backends, by CLI name, loaded lazily (frameworks are imported only by the backend that needs them)."""

from __future__ import annotations

import importlib

from infermeter.errors import UsageError
from infermeter.generate.backends.base import GenerationBackend

GENERATION_BACKENDS: dict[str, str] = {
    "llama-cpp": "infermeter.generate.backends.llama_cpp:LlamaCppBackend",
    "transformers": "infermeter.generate.backends.transformers_gen:TransformersBackend",
    "vllm": "infermeter.generate.backends.vllm_gen:VllmBackend",
    "tensorrt-llm": "infermeter.generate.backends.tensorrt_llm:TensorRTLLMBackend",
    "fake": "infermeter.generate.backends.fake:FakeBackend",
}


def get_generation_backend(name: str) -> type[GenerationBackend]:
    """The backend class called `name`; UsageError naming the known ones otherwise."""
    try:
        module_name, class_name = GENERATION_BACKENDS[name].split(":")
    except KeyError:
        known = ", ".join(n for n in GENERATION_BACKENDS if n != "fake")
        raise UsageError(f"unknown generation backend {name!r}; choose from {known}") from None
    backend: type[GenerationBackend] = getattr(importlib.import_module(module_name), class_name)
    return backend
