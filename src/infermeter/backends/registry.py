"""The backend registry: one line per backend, for every task (inference and LLM generation). CLI words map to
backend classes, imported lazily so that `infermeter --help` stays fast.

Everything else about a backend is on its class (`backends.base.BackendInfo` and `Backend`, or
`generate.backends.base.GenerationBackend`): lists such as "the backends that read ONNX" are derived from here.
Inference backends live in this package, generation backends in `infermeter.llm.backends`.

A backend kept outside infermeter (a plugin, or a test's own module) joins with `register(name, "module:Class")`, or
with the environment variable INFERMETER_BACKENDS (`name=module:Class[,name/generate=module:Class...]`) for a CLI
run; `register` writes that variable too, so that spawned workers, which import this module afresh, know it.
See docs/adding-a-backend.md.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from infermeter.core.errors import MissingExtra, UsageError

if TYPE_CHECKING:
    from infermeter.backends.base import Backend, BackendInfo
    from infermeter.llm.backends.base import GenerationBackend
    from infermeter.models.spec import ModelSpec

TASKS = ("infer", "generate")


@dataclass(frozen=True)
class Registered:
    """One registry line: the CLI word, the task it serves (`infer` or `generate`), and `module:Class`.
    Importing a backend module never imports its framework."""

    name: str
    task: str
    target: str


REGISTRY: tuple[Registered, ...] = (
    Registered("null", "infer", "infermeter.backends.null:NullBackend"),
    Registered("torch", "infer", "infermeter.backends.torch_eager:TorchEagerBackend"),
    Registered("onnxruntime", "infer", "infermeter.backends.onnxruntime:OnnxRuntimeBackend"),
    Registered("torch-compile", "infer", "infermeter.backends.torch_compile:TorchCompileBackend"),
    Registered("torchscript", "infer", "infermeter.backends.torchscript:TorchScriptBackend"),
    Registered("openvino", "infer", "infermeter.backends.openvino_backend:OpenVinoBackend"),
    Registered("onnxruntime-cuda", "infer", "infermeter.backends.onnxruntime_gpu:OnnxRuntimeCudaBackend"),
    Registered("onnxruntime-tensorrt", "infer", "infermeter.backends.onnxruntime_gpu:OnnxRuntimeTensorRTBackend"),
    Registered("tensorrt", "infer", "infermeter.backends.tensorrt_backend:TensorRTBackend"),
    Registered("tflite", "infer", "infermeter.backends.tflite:TFLiteBackend"),
    Registered("iree", "infer", "infermeter.backends.iree_backend:IreeBackend"),
    Registered("tvm", "infer", "infermeter.backends.tvm_backend:TvmBackend"),
    Registered("llama-cpp", "generate", "infermeter.llm.backends.llama_cpp:LlamaCppBackend"),
    Registered("transformers", "generate", "infermeter.llm.backends.transformers_gen:TransformersBackend"),
    Registered("vllm", "generate", "infermeter.llm.backends.vllm_gen:VllmBackend"),
    Registered("vllm-cpu", "generate", "infermeter.llm.backends.vllm_cpu:VllmCpuBackend"),
    Registered("tensorrt-llm", "generate", "infermeter.llm.backends.tensorrt_llm:TensorRTLLMBackend"),
    Registered("fake", "generate", "infermeter.llm.backends.fake:FakeBackend"),
)
_BY_NAME = {entry.name: entry for entry in REGISTRY}
# Lines added by `register` (after the built-in ones, in the order registered).
_ADDED: list[Registered] = []
ENV_VAR = "INFERMETER_BACKENDS"


def _environment_text() -> str:
    return ",".join(f"{e.name}{'' if e.task == 'infer' else '/' + e.task}={e.target}" for e in _ADDED)


def register(name: str, target: str, task: str = "infer") -> Registered:
    """Add backend `name` (class at `target`, `module:Class`, importable here and in workers) for `task`.
    UsageError when the name is taken or the task unknown. Built-in backends are the REGISTRY lines above."""
    if task not in TASKS:
        raise UsageError(f"unknown task {task!r} for backend {name!r}; tasks: {', '.join(TASKS)}")
    if name in _BY_NAME:
        raise UsageError(f"backend {name!r} is already registered ({_BY_NAME[name].target})")
    if ":" not in target:
        raise UsageError(f"backend {name!r}: target {target!r} is not of the form module:Class")
    entry = Registered(name, task, target)
    _ADDED.append(entry)
    _BY_NAME[name] = entry
    _registry_changed()
    return entry


def unregister(name: str) -> None:
    """Remove a backend added by `register` (built-in lines stay); UsageError for any other name."""
    entry = _BY_NAME.get(name)
    if entry is None or entry not in _ADDED:
        raise UsageError(f"backend {name!r} was not added by register()")
    _ADDED.remove(entry)
    del _BY_NAME[name]
    _registry_changed()


_GENERATION = [0]  # how many times the registry changed: what the option catalog is cached on


def registry_generation() -> int:
    """A number that changes whenever a backend is added or removed (caches of what the registry holds key on it)."""
    return _GENERATION[0]


def _registry_changed() -> None:
    """Keep the environment (read by spawned workers) in step with the registry, and move its generation on."""
    if _ADDED:
        os.environ[ENV_VAR] = _environment_text()
    else:
        os.environ.pop(ENV_VAR, None)
    _GENERATION[0] += 1


def _register_from_environment() -> None:
    for item in filter(None, (part.strip() for part in os.environ.get(ENV_VAR, "").split(","))):
        name_task, _, target = item.partition("=")
        name, _, task = name_task.partition("/")
        if name not in _BY_NAME:
            register(name.strip(), target.strip(), task.strip() or "infer")


def registered(task: str | None = None) -> list[Registered]:
    """The registry lines of `task` (every task when None), in registry order, then those added by `register`."""
    return [entry for entry in (*REGISTRY, *_ADDED) if task is None or entry.task == task]


def backend_names(task: str = "infer") -> list[str]:
    """Every known backend's CLI word for `task`, in registry order."""
    return [entry.name for entry in registered(task)]


def unknown_backend(name: str, why: str = "", known: Iterable[str] | None = None) -> UsageError:
    """The one message for a backend name that is not registered (`why`: when the name is a backend of another
    task); `known` lists the inference backends unless given."""
    names = ", ".join(backend_names() if known is None else known)
    return UsageError(f"unknown backend {name!r}{why}; known backends: {names} (see `infermeter backends`)")


def require_known_backends(names: Iterable[str]) -> None:
    """UsageError (the one message) for the first of `names` that is not a registered inference backend."""
    known = backend_names()
    for name in names:
        if name not in known:
            raise unknown_backend(name)


def _load(entry: Registered) -> type[BackendInfo]:
    module_name, class_name = entry.target.split(":")
    cls: type[BackendInfo] = getattr(importlib.import_module(module_name), class_name)
    return cls


def backend_class(name: str) -> type[BackendInfo]:
    """The class of backend `name`, whatever its task; UsageError listing the known ones."""
    entry = _BY_NAME.get(name)
    if entry is None:
        raise unknown_backend(name, known=_BY_NAME)
    return _load(entry)


def get_backend(name: str) -> type[Backend]:
    """The inference backend class for CLI word `name`, or UsageError listing the known ones."""
    entry = _BY_NAME.get(name)
    if entry is None or entry.task != "infer":
        other = f" ({name} is a {entry.task} backend: use `infermeter llm bench`)" if entry else ""
        raise unknown_backend(name, other)
    return cast("type[Backend]", _load(entry))


def get_generation_backend(name: str) -> type[GenerationBackend]:
    """The generation backend class called `name`; UsageError naming the known ones otherwise."""
    entry = _BY_NAME.get(name)
    if entry is None or entry.task != "generate":
        known = ", ".join(n for n in backend_names("generate") if not _load(_BY_NAME[n]).synthetic)
        raise UsageError(f"unknown generation backend {name!r}; choose from {known}")
    return cast("type[GenerationBackend]", _load(entry))


def inference_backends() -> list[type[Backend]]:
    """Every inference backend class, in registry order (for lists derived from their capabilities)."""
    return [get_backend(name) for name in backend_names()]


def default_backends() -> list[str]:
    """Every available, non-synthetic CPU backend that runs by default (`runs_by_default`): what `bench` runs when
    no --backend is given."""
    return [
        cls.name
        for cls in inference_backends()
        if not cls.synthetic and cls.device == "cpu" and cls.runs_by_default and cls.available() is None
    ]


def readers_hint(suffix: str) -> str:
    """Which backends take a `suffix` file as it is (from their `model_files`), for errors that need another form of
    the model (`models.spec.NoTorchForm`, completed so by the command line)."""
    readers = [cls.name for cls in inference_backends() if suffix and suffix in cls.model_files]
    if not readers:
        return "this command needs a PyTorch or ONNX model"
    return f"{suffix} files run as they are on {', '.join(readers)} (infermeter converts only from PyTorch)"


def backend_for_file(suffix: str, device: str = "cpu") -> str:
    """The real backend of `device` whose own format `suffix` is (the first of its `model_files`: LiteRT for
    .tflite, though OpenVINO reads it too), else the first that loads such files as they are; UsageError when
    none does."""
    readers = [cls for cls in inference_backends()
               if not cls.synthetic and cls.device == device and suffix.lower() in cls.model_files]  # fmt: skip
    native = [cls for cls in readers if cls.model_files[0] == suffix.lower()]
    if native or readers:
        return (native or readers)[0].name
    raise UsageError(f"no {device} backend loads {suffix} files")


def framework_distributions() -> list[str]:
    """The framework distribution of every registered backend (each once, registry order)."""
    seen: list[str] = []
    for entry in registered():
        distribution = _load(entry).distribution
        if distribution and distribution not in seen:
            seen.append(distribution)
    return seen


def require_torch_form(specs: Sequence[ModelSpec], backends: Iterable[str]) -> None:
    """Raise MissingExtra when a model exists only as PyTorch code (a built-in model, a Python factory, a .pt2) and
    torch is missing while a real backend would need it (every backend reads such a model through torch; the
    synthetic `null` backend does not read the model at all)."""
    from infermeter.core.extras import install_line, missing_modules

    if not missing_modules(["torch"]):
        return
    torch_models = [spec.ref for spec in specs if spec.has_torch_form]
    if not torch_models or all(get_backend(name).synthetic for name in backends):
        return
    raise MissingExtra(
        f"{', '.join(torch_models)} is defined in PyTorch, which is not installed: pass an .onnx file instead, "
        f"or {install_line('torch')}"
    )


_register_from_environment()
