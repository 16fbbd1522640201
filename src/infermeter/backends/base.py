"""The backend contract: `Backend.load(model, case) -> Session`; sessions run one inference per call."""

from __future__ import annotations

import importlib.metadata
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from infermeter.case import Case
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec

if TYPE_CHECKING:
    from infermeter.backends.options import Option


def package_version(distribution: str) -> str | None:
    """Installed version of a distribution without importing it (fast, and safe when the import would crash)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


class Session(ABC):
    """A loaded model ready to run. The measurement core owns the clock; sessions never time themselves.

    `load_phases_s` names the slow steps `load` took (export, compile, session creation…) in seconds;
    `notes` records facts a reader of the results needs (fallbacks, settings read back); `cache_hit` says
    whether `load` reused a compiled artifact from the cache (None: the backend has no such cache).
    By convention `load_phases_s` uses `import_s` for importing the framework, `convert_s` for format conversion,
    `compile_s` for compilation / engine build, `session_create_s` for creating the runtime session.
    Backends honour the case option `cache=off` by neither reading nor writing their artifact cache.
    """

    def __init__(self) -> None:
        self.load_phases_s: dict[str, float] = {}
        self.notes: list[str] = []
        self.cache_hit: bool | None = None

    def prepare(self, feeds: Feeds) -> Any:
        """Convert numpy feeds to the backend's native inputs. Called outside the timed region."""
        return feeds

    @abstractmethod
    def run(self, prepared: Any) -> Any:
        """One inference on inputs returned by `prepare`; returns the backend's native outputs."""

    def stream_runner(self, index: int) -> Callable[[Any], Any]:
        """A `run` for concurrent stream `index` (`--streams N`). The default shares `run`, which is right for
        engines whose run is thread-safe (ONNX Runtime, PyTorch); engines with per-request state (OpenVINO infer
        requests, CUDA streams) return a runner bound to their own request or stream."""
        return self.run

    def sync(self) -> None:  # noqa: B027 - a real default: CPU backends have nothing to wait for
        """Block until device work has finished (no-op for CPU backends)."""

    def outputs_to_numpy(self, outputs: Any) -> list[np.ndarray]:
        """Native outputs as numpy arrays, in the model's output order (for parity checks, never timed)."""
        return [np.asarray(o) for o in outputs]

    @abstractmethod
    def effective_precision(self) -> str:
        """The precision the engine really computes in, read back from the engine where it can say."""

    def close(self) -> None:  # noqa: B027 - a real default: most engines free themselves when dropped
        """Release the engine's resources."""


@dataclass(frozen=True)
class TritonTarget:
    """How Triton runs what a backend ran: `key` is `platform` or `backend` in config.pbtxt, `name` its value,
    `filename` the model file in the version folder. `writable`: the file is the ONNX the case ran (TensorRT plans
    and TorchScript files are not kept by bench, so their repository cannot be filled from a results file).
    `aliases`: other spellings of `name` in config.pbtxt files (Triton's backend name for a platform)."""

    key: str
    name: str
    filename: str
    writable: bool = True
    aliases: tuple[str, ...] = ()


class BackendInfo(ABC):
    """What every registered backend, of any task (inference or generation), tells about itself without loading
    anything: its CLI word, device, framework distribution, options, and whether it can run here. The registry
    (`backends.registry`) lists these classes; `infermeter backends` shows them."""

    name: ClassVar[str]
    device: ClassVar[str] = "cpu"
    # The distribution whose version is recorded with each result (and in every results file's environment).
    distribution: ClassVar[str | None] = None
    # Synthetic backends (test doubles) are never part of a default "every available backend" set.
    synthetic: ClassVar[bool] = False
    description: ClassVar[str] = ""
    # The `-O KEY=VALUE` options `load` reads, checked while the plan is built (`backends.options`).
    options: ClassVar[tuple[Option, ...]] = ()

    @classmethod
    def version(cls) -> str | None:
        """The framework's version, or None when it is not installed."""
        return package_version(cls.distribution) if cls.distribution else None

    @classmethod
    @abstractmethod
    def available(cls) -> str | None:
        """None when the backend can run here, else why not and how to fix it (install hint)."""


class Backend(BackendInfo):
    """An inference framework. `name` is its CLI word; `load` does all slow work and returns a Session.

    The capability flags below are what the rest of infermeter asks of a backend (optimize, quantize, parity,
    deploy); nothing outside `backends/` keeps a list of backend names."""

    precisions: ClassVar[tuple[str, ...]] = ("fp32",)
    # True when `--precision int8` on a float model should be served as an INT8 (QDQ) ONNX graph made on the fly.
    quantizes_on_the_fly: ClassVar[bool] = False
    # True when `load` reads the model's ONNX form (`models.convert.onnx_for`): a sweep exports it once, before
    # any case runs, so that no case's load time or peak memory carries the one-time export.
    consumes_onnx: ClassVar[bool] = False
    # True when the engine compiles for fixed shapes in static mode and for symbolic ones in dynamic mode: the
    # backends on which static vs dynamic shapes is a real choice.
    shape_aware: ClassVar[bool] = False
    # True when `load` spends long in compilation: optimize tries such backends last.
    slow_to_load: ClassVar[bool] = False
    # True when the engine executes a quantized (QDQ) ONNX graph in int8 on its device.
    runs_quantized_onnx: ClassVar[bool] = False
    # True when the framework ships its own INT8 quantizer (`infermeter quantize --engine NAME`).
    quantizer: ClassVar[bool] = False
    # Model-file suffixes `load` takes as they are (`quantize` times a file on the first CPU backend that reads it).
    model_files: ClassVar[tuple[str, ...]] = ()
    # Set when the backend can be the fp32 reference of `infermeter parity`: the options it runs the reference with.
    reference_options: ClassVar[tuple[tuple[str, str], ...] | None] = None
    # How Triton serves what this backend ran (None: Triton has no backend for it).
    triton: ClassVar[TritonTarget | None] = None
    # The `infermeter[...]` extra that installs the framework (None: not installable through an extra, e.g. GPU).
    install_extra: ClassVar[str | None] = None

    @classmethod
    def not_installed(cls, framework: str) -> str:
        """`<framework> is not installed: <the install line of the backend's extra>`, for `available()`."""
        from infermeter.extras import install_line

        return f"{framework} is not installed" + (f": {install_line(cls.install_extra)}" if cls.install_extra else "")

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        """None when this backend can run `case` on `model` here, else the reason (checked before loading)."""
        if case.precision not in cls.precisions:
            return f"{cls.name} does not support precision {case.precision} here (supports {', '.join(cls.precisions)})"
        return None

    @abstractmethod
    def load(self, model: ModelSpec, case: Case) -> Session:
        """Convert, compile and load `model` for `case`; everything slow happens here, never in run()."""
