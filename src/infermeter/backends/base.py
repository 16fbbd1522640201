"""The backend contract: `Backend.load(model, case) -> Session`; sessions run one inference per call."""

from __future__ import annotations

import importlib.metadata
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from infermeter.case import Case
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec


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


class Backend(ABC):
    """An inference framework. `name` is its CLI word; `load` does all slow work and returns a Session."""

    name: ClassVar[str]
    device: ClassVar[str] = "cpu"
    # The distribution whose version is recorded with each result.
    distribution: ClassVar[str | None] = None
    # Synthetic backends are never part of the default "every available backend" set.
    synthetic: ClassVar[bool] = False
    precisions: ClassVar[tuple[str, ...]] = ("fp32",)
    description: ClassVar[str] = ""
    # True when `--precision int8` on a float model should be served as an INT8 (QDQ) ONNX graph made on the fly.
    quantizes_on_the_fly: ClassVar[bool] = False
    # True when `load` reads the model's ONNX form (`models.convert.onnx_for`): a sweep exports it once, before
    # any case runs, so that no case's load time or peak memory carries the one-time export.
    consumes_onnx: ClassVar[bool] = False

    @classmethod
    def version(cls) -> str | None:
        """The framework's version, or None when it is not installed."""
        return package_version(cls.distribution) if cls.distribution else None

    @classmethod
    @abstractmethod
    def available(cls) -> str | None:
        """None when the backend can run here, else why not and how to fix it (install hint)."""

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        """None when this backend can run `case` on `model` here, else the reason (checked before loading)."""
        if case.precision not in cls.precisions:
            return f"{cls.name} does not support precision {case.precision} here (supports {', '.join(cls.precisions)})"
        return None

    @abstractmethod
    def load(self, model: ModelSpec, case: Case) -> Session:
        """Convert, compile and load `model` for `case`; everything slow happens here, never in run()."""
