"""The backend contract: `Backend.build(model, case, target)` makes an artifact once per artifact key (the build
stage, `case_build`), `Backend.load(model, case, artifact) -> Session` only deserializes it and creates the
session; sessions run one inference per call."""

from __future__ import annotations

import importlib.metadata
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from infermeter.backends.triton import TritonTarget
from infermeter.core.case import Case
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, ArtifactReport, BuildOutput

if TYPE_CHECKING:
    from infermeter.backends.options import Option
    from infermeter.results.records.int8_run import LayerMix, LayerProfile


def package_version(distribution: str) -> str | None:
    """Installed version of a distribution without importing it (fast, and safe when the import would crash)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


class Session(ABC):
    """A loaded model ready to run. The measurement core owns the clock; sessions never time themselves.

    `load_phases_s` names the steps `load` took in seconds, keyed by `results.artifact.Phase` values (import,
    conversion, deserialization, session creation…); `notes` records facts a reader of the results needs
    (fallbacks, settings read back); `cache_hit` says whether `load` reused a compiled artifact from a cache of the
    engine's own (None: no such cache; the build stage's own cache state is recorded apart).
    Backends honour the case option `cache=off` by neither reading nor writing their artifact cache.
    """

    def __init__(self) -> None:
        self.load_phases_s: dict[str, float] = {}
        self.notes: list[str] = []
        # (code, message) pairs of `stats.WARNING_CODES` that the case measured on this session carries.
        self.warnings: list[tuple[str, str]] = []
        self.cache_hit: bool | None = None
        # The precision of the weights the engine was given (None: the model file's own) and where the compute
        # precision was read from (`backends.compute_precision`), for the case's `ComputePrecision` record.
        self.stored_precision: str | None = None
        self.compute_evidence: str | None = None

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

    def read_compute(self, prepared: Any) -> None:  # noqa: B027 - a real default: most engines say it at load
        """One untimed run that reads what the engine computes in (torch: its profiler's operator dtypes), called
        after warm-up; engines that say it from the loaded model do nothing here."""

    @abstractmethod
    def effective_precision(self) -> str:
        """The precision the engine really computes in, read back from the engine where it can say."""

    def layer_mix(self) -> LayerMix | None:
        """The compute layers counted by the precision the engine runs each in, read back from the compiled model
        (None: the engine cannot say). Called once after loading, never timed."""
        return None

    def layer_profile(self, prepared: Any, iterations: int) -> LayerProfile | None:
        """A per-node breakdown of `iterations` runs on `prepared` from the engine's own counters (None: the engine
        has none, or this session was not loaded with the backend's `profiling_options`). Never timed."""
        return None

    def close(self) -> None:  # noqa: B027 - a real default: most engines free themselves when dropped
        """Release the engine's resources."""


@dataclass(frozen=True)
class AutoTuning:
    """How a compiler backend auto-tunes in its build stage, for `optimize` to plan it from the time budget:
    the option that sets the trial count, the one that bounds the tuning's minutes, and the seconds one trial
    costs before any has been measured (on a few-core CPU)."""

    trials_key: str
    minutes_key: str
    prior_s_per_trial: float


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
    # The engine's own INT8 quantizer, which makes the graph of `--precision int8` on a float model in the build
    # stage (`quantizers.onthefly.QUANTIZERS`: "ort-qdq", "trt-qdq", "nncf"); None: a float model cannot run int8 here.
    int8_quantizer: ClassVar[str | None] = None
    # How `quantize --to fp16|bf16` keeps chosen layers in FP32 on this engine: a key of
    # `quantize.fallback_engines.FALLBACK_PATHS` (None: no reduced-precision fallback path here).
    precision_fallback: ClassVar[str | None] = None
    # How `infermeter explain` profiles this engine per unit: a key of `explain.engines.PROFILERS` ("ort-kernels",
    # "ov-primitives", "torch-modules", "torchscript-modules"); None: no per-unit profile there, end-to-end time only.
    unit_profiler: ClassVar[str | None] = None
    # Options that make a session collect per-node counters (`Session.layer_profile`); None: no per-node profile.
    profiling_options: ClassVar[tuple[tuple[str, str], ...] | None] = None
    # True when `load` reads the model's ONNX form (`models.convert.onnx_for`): a sweep exports it once, before
    # any case runs, so that no case's load time or peak memory carries the one-time export.
    consumes_onnx: ClassVar[bool] = False
    # True when the engine compiles for fixed shapes in static mode and for symbolic ones in dynamic mode: the
    # backends on which static vs dynamic shapes is a real choice.
    shape_aware: ClassVar[bool] = False
    # True when `load` spends long in compilation: optimize tries such backends last.
    slow_to_load: ClassVar[bool] = False
    # How the engine auto-tunes in its build (None: it does not): optimize plans the trials from its budget.
    auto_tuning: ClassVar[AutoTuning | None] = None
    # False for engines `bench` runs only when named (`-b tvm`): compilers whose build takes minutes would turn a
    # newcomer's first `bench MODEL` into a long wait.
    runs_by_default: ClassVar[bool] = True
    # True when the engine executes a quantized (QDQ) ONNX graph in int8 on its device.
    runs_quantized_onnx: ClassVar[bool] = False
    # True when the framework ships its own INT8 quantizer (`infermeter quantize --engine NAME`).
    quantizer: ClassVar[bool] = False
    # Model-file suffixes `load` takes as they are (`quantize` times a file on the first CPU backend that reads it).
    model_files: ClassVar[tuple[str, ...]] = ()
    # Set when the backend can be the fp32 reference of `infermeter parity`: the options it runs the reference with.
    reference_options: ClassVar[tuple[tuple[str, str], ...] | None] = None
    # How Triton serves what this backend ran, its platform and settings both ways (None: Triton has no backend
    # for it; `backends.triton`).
    triton: ClassVar[TritonTarget | None] = None
    # True when `load` runs the model's PyTorch form (a zoo name, Python source or .pt2), which ONNX files lack.
    needs_torch_form: ClassVar[bool] = False
    # True when scoring a measured case's accuracy in the scorer's process would compile the model again
    # (torch.compile): optimize takes such a case's accuracy from its parity check instead.
    scorer_recompiles: ClassVar[bool] = False
    # The `infermeter[...]` extra that installs the framework (None: not installable through an extra, e.g. GPU).
    install_extra: ClassVar[str | None] = None

    @classmethod
    def not_installed(cls, framework: str) -> str:
        """`<framework> is not installed: <the install line of the backend's extra>`, for `available()`."""
        from infermeter.core.extras import install_line

        return f"{framework} is not installed" + (f": {install_line(cls.install_extra)}" if cls.install_extra else "")

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        """None when this backend can run `case` on `model` here, else the reason (checked before loading)."""
        if case.precision not in cls.precisions:
            return f"{cls.name} does not support precision {case.precision} here (supports {', '.join(cls.precisions)})"
        return None

    @classmethod
    def int8_quantizer_for(cls, case: Case) -> str | None:
        """The quantizer that makes `case`'s INT8 graph from a float model: the engine's own (`int8_quantizer`)
        unless the case's options cross-feed another's (OpenVINO's `openvino.int8_source=qdq`)."""
        return cls.int8_quantizer

    # The built artifact's file suffix (".onnx", ".so"…), or "/" when it is a folder.
    artifact_suffix: ClassVar[str] = ""

    def artifact_key(self, model: ModelSpec, case: Case) -> dict[str, object] | None:
        """What `case`'s built artifact depends on, beyond the model's content, the backend's name and version and
        the host's ISA (the build stage adds those), or None when this case has nothing to build and `load` does
        all the work. Only what changes the artifact belongs here (shapes, precision, the options that matter)."""
        return None

    def artifact_identity(self, model: ModelSpec, case: Case) -> dict[str, object]:
        """`artifact_key` with what every artifact depends on: the backend's name and version, the model's content,
        the precision and the host's ISA (`own` is None when the case has nothing of the backend's to build)."""
        from infermeter.results.env import host_signature

        return {
            "backend": case.backend,
            "version": self.version(),
            "model": model.content_hash,
            "precision": case.precision,
            "own": self.artifact_key(model, case),
            "host": host_signature(),
        }

    def build(self, model: ModelSpec, case: Case, target: Path) -> BuildOutput:
        """Make the artifact at `target` (a file, or an existing empty folder when `artifact_suffix` is "/"): the
        slow, cacheable work (conversion, compilation, engine build, auto-tuning), with each step's seconds under a
        build `Phase`. Called by the build stage once per artifact key, in a worker process of its own, never
        timed as part of any case's load."""
        raise NotImplementedError(f"{self.name} declares an artifact key but no build")

    @classmethod
    def artifact_report(cls, artifact: Artifact) -> ArtifactReport | None:
        """What this backend can tell about one of its built artifacts (None: nothing beyond the build record)."""
        return None

    @abstractmethod
    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        """Load `model` for `case`, from `artifact` when the backend builds one (None otherwise); everything slow
        that cannot be built ahead happens here, never in run()."""
