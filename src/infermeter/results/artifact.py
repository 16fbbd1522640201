"""What the build stage hands to `load`: a built artifact (a compiled engine, an optimized graph, a tuned library),
how it was obtained (cache state), and the named phases of building and loading (one enum for both).

Plain data with no framework imports: the results schema, the sweep's parent process and every backend read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import Any


class Phase(StrEnum):
    """The named steps from nothing to a loaded session: the keys of `CaseResult.loading.load_phases_s` and of an
    artifact's `build_phases_s`. A backend names its steps with these, so tables show each under the right name.
    The build phases happen once per artifact key in the build stage; a backend with nothing built ahead (no
    cache, or an engine that compiles only in the process that runs, like torch.compile) may take them in `load`.
    """

    # Build phases.
    EXPORT = "export_s"  # the model's torch form exported to ONNX
    QUANTIZE = "quantize_s"  # an INT8 graph made on the fly (`--precision int8` on a float model)
    OPTIMIZE = "optimize_s"  # graph rewriting saved to disk (ONNX Runtime's optimized model)
    COMPILE = "compile_s"  # compilation to machine code, engine build
    TUNE = "tune_s"  # auto-tuning: measuring candidate kernels
    SERIALIZE = "serialize_s"  # writing the artifact
    # Load phases: in the case's own process, every time.
    IMPORT = "import_s"  # importing the framework
    MODEL_INIT = "model_init_s"  # instantiating the framework's model object (a torch module and its weights)
    CONVERT = "convert_s"  # reading the model and converting it to the engine's form
    DESERIALIZE = "deserialize_s"  # reading a built artifact back
    SESSION_CREATE = "session_create_s"  # creating the runtime session / infer request


BUILD_PHASES = frozenset({Phase.EXPORT, Phase.QUANTIZE, Phase.OPTIMIZE, Phase.COMPILE, Phase.TUNE, Phase.SERIALIZE})


class CacheState(StrEnum):
    """How a case's artifact was obtained."""

    HIT = "hit"  # found in the cache, valid
    BUILT = "built"  # not in the cache: built and stored
    REBUILT = "rebuilt"  # in the cache but corrupt or unreadable: rebuilt and stored again
    OFF = "off"  # `cache=off`: built for this case alone, never read from or written to the cache


@dataclass
class BuildOutput:
    """What `Backend.build` returns: the seconds of each build phase (`Phase` values), notes for the reader, and
    warnings, (code, message) pairs of `stats.WARNING_CODES` that every case using the artifact carries (a
    compiler that built for a generic CPU rather than this one)."""

    phases_s: Mapping[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Artifact:
    """A built artifact at `path` (a file or a folder) for one artifact key (`key`, a digest).

    `cache` says how it was obtained. `build_phases_s` are the phases of the build that made it: on a cache hit,
    those recorded when it was built (so a tuning cost is still known when it was paid in an earlier run), and
    `built_here_s` is what this run spent (0 on a hit). `model_path` is the model the artifact was built from when
    it is not the case's own (an INT8 graph made on the fly), and `load` reads that one; `path` is then that file
    itself when the backend has nothing of its own to build. `warnings` are (code, message) pairs every case
    using the artifact carries (calibration on random inputs). `quantizer` names the quantizer that made the INT8
    graph on the fly (`nncf`, `ort-qdq`; None: none ran); `own` is false when the backend had nothing of its own to
    build (the artifact is then only the INT8 graph at `model_path`, and `load` is given no artifact)."""

    path: str
    key: str
    _: KW_ONLY  # the rest by keyword
    cache: str
    build_phases_s: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    built_here_s: float = 0.0
    model_path: str | None = None
    warnings: tuple[tuple[str, str], ...] = ()
    quantizer: str | None = None
    own: bool = True
    # What the engines said while building it (`results.records.EngineLog`'s on-disk form; None: nothing): every
    # case using the artifact carries it, a cache hit too.
    engine_log: dict[str, Any] | None = None

    @property
    def build_s(self) -> float:
        """Total seconds of the build that made the artifact (whenever it ran)."""
        return sum(self.build_phases_s.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (results files, worker messages)."""
        return {
            "path": self.path,
            "key": self.key,
            "cache": self.cache,
            "build_phases_s": {k: round(v, 6) for k, v in self.build_phases_s.items()},
            "notes": list(self.notes),
            "built_here_s": round(self.built_here_s, 6),
            "model_path": self.model_path,
            "warnings": [list(w) for w in self.warnings],
            "quantizer": self.quantizer,
            "own": self.own,
            **({"engine_log": self.engine_log} if self.engine_log else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Artifact:
        """Inverse of `to_dict`; unknown keys are ignored (a later version's file still loads)."""
        return cls(
            path=str(data["path"]),
            key=str(data["key"]),
            cache=str(data["cache"]),
            build_phases_s={str(k): float(v) for k, v in data.get("build_phases_s", {}).items()},
            notes=tuple(data.get("notes", ())),
            built_here_s=float(data.get("built_here_s", 0.0)),
            model_path=data.get("model_path"),
            warnings=tuple((str(code), str(message)) for code, message in data.get("warnings", ())),
            quantizer=data.get("quantizer"),
            own=bool(data.get("own", True)),
            engine_log=data.get("engine_log"),
        )


@dataclass(frozen=True)
class ArtifactReport:
    """What a backend can tell about one of its built artifacts (`Backend.artifact_report`), shown by
    `infermeter inspect RESULTS.json`: e.g. which kernels auto-tuning spent its trials on and what each gained."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()
