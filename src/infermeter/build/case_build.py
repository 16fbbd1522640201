"""One case's build, in this process: the slow, cacheable work done once per artifact key, and the session loaded
from it.

What a case loads may need building first: its model exported to ONNX, an INT8 graph made on the fly
(`--precision int8` on a float model), then the backend's own artifact (`Backend.build`: an optimized graph, a
compiled blob, an engine, a tuned library). `build_artifact` does it in the calling process, cached by content
(`models.convert.cached_entry`: a corrupt entry is rebuilt, `cache=off` builds into a folder of the case's own).
The build stage (`measure/buildstage.py`) runs those builds for a sweep, each key once, in a worker process with its
own timeout (`--build-timeout`), so a crash or a hang in a compiler fails the cases that needed it and nothing else.
A case's `load` then only deserializes: its result records the build apart (`CaseResult.loading.build`), with the cache
state.

It sits below `measure` (was `measure/build.py`): `measure` runs it in its workers, and the commands that need a
session rather than a measurement (`parity`, `serve`, optimize's accuracy) open theirs with `open_session` without
importing `measure`, which itself checks parity through `parity` (`--check-parity`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infermeter.backends.base import Session
from infermeter.backends.options import CACHE, QUANTIZE_OPTIONS
from infermeter.backends.registry import get_backend
from infermeter.core.case import Case
from infermeter.models.convert import key_digest
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, BuildOutput, CacheState, Phase

# Folders of `cache=off` builds are made under this prefix, and removed when the case ends.
PRIVATE_BUILD_PREFIX = "infermeter-build-"


def _quantized_on_the_fly(spec: ModelSpec, case: Case) -> str | None:
    """The quantizer that makes `case`'s INT8 graph from a float model (`Backend.int8_quantizer_for`: the engine's
    own, or the one its options cross-feed), or None: not int8, no quantizer, or a graph that came quantized."""
    quantizer = get_backend(case.backend).int8_quantizer_for(case) if case.precision == "int8" else None
    if quantizer is None:
        return None
    from infermeter.build.int8.onthefly import model_is_quantized

    return None if model_is_quantized(spec) else quantizer


def build_key(spec: ModelSpec, case: Case) -> dict[str, object] | None:
    """The full artifact key of `case` (the backend's `artifact_identity`, plus the on-the-fly quantizer's
    settings), or None when the case has nothing to build."""
    key = get_backend(case.backend)().artifact_identity(spec, case)
    quantize = _quantized_on_the_fly(spec, case)
    if key["own"] is None and not quantize:
        return None
    if quantize:
        key["quantize"] = {option.key: option.text(case) for option in QUANTIZE_OPTIONS} | {"quantizer": quantize}
    return key


def _entry_kind_and_suffix(case: Case) -> tuple[str, str]:
    """Where the cache keeps `case`'s artifacts (one folder per backend) and their suffix ("/": a folder)."""
    return f"build-{case.backend}", get_backend(case.backend).artifact_suffix or "/"


def _build(spec: ModelSpec, case: Case, target: Path) -> dict[str, Any]:
    """The build itself, into `target`, the engines' log captured (`backends.engine_log`)."""
    from infermeter.backends.engine_log import capture_engine_log, engine_log

    with capture_engine_log() as capture:
        meta = _build_steps(spec, case, target)
    log = engine_log(capture)
    if log.warnings or log.other_lines:
        meta["engine_log"] = log.to_dict()
    return meta


def _build_steps(spec: ModelSpec, case: Case, target: Path) -> dict[str, Any]:
    """The on-the-fly INT8 graph if any, then the backend's own artifact."""

    backend = get_backend(case.backend)()
    model, phases, notes, warnings, model_path = spec, {}, [], [], None
    quantizer = _quantized_on_the_fly(spec, case)
    if quantizer is not None:
        from infermeter.build.int8.onthefly import quantize_on_the_fly

        start = time.perf_counter()
        made = quantize_on_the_fly(spec, case, quantizer)
        phases[Phase.QUANTIZE.value] = time.perf_counter() - start
        notes.append(f"int8: quantized on the fly by {quantizer} to {made.path}")
        warnings = [[w.code, w.message] for w in made.warnings]
        model, model_path = _int8_spec(spec, str(made.path)), str(made.path)
    # Nothing of the backend's own to build: the artifact is the INT8 graph (`model_path`), `own` false.
    own = backend.artifact_key(model, case) is not None
    output = backend.build(model, case, target) if own else BuildOutput()
    if own and not backend.synthetic:
        from infermeter.build.validate import check_compiled

        # A wrong build is refused here, before any timing (and never cached): `build_invalid`.
        check_compiled(backend, spec, model, case, target)
    phases.update(output.phases_s)
    warnings += [[code, message] for code, message in output.warnings]
    return {"phases_s": phases, "notes": notes + output.notes, "warnings": warnings, "model_path": model_path,
            "quantizer": quantizer, "own": own}  # fmt: skip


def _int8_spec(spec: ModelSpec, path: str) -> ModelSpec:
    """The INT8 graph made from `spec`, as a model: its file's identity, the float model's inputs (the same names,
    with the dimension names and defaults a graph file may not keep)."""
    from dataclasses import replace

    from infermeter.models.resolve import resolve_model

    return replace(resolve_model(path), inputs=spec.inputs, task=spec.task)


def _artifact(entry_path: Path, digest: str, state: str, meta: dict[str, Any], built_here_s: float) -> Artifact:
    return Artifact(
        path=str(entry_path),
        key=digest,
        cache=state,
        build_phases_s=dict(meta.get("phases_s", {})),
        notes=tuple(meta.get("notes", ())) + ((meta["note"],) if meta.get("note") else ()),
        built_here_s=built_here_s,
        model_path=meta.get("model_path"),
        warnings=tuple((code, message) for code, message in meta.get("warnings", ())),
        quantizer=meta.get("quantizer"),
        own=bool(meta.get("own", True)),
        engine_log=meta.get("engine_log"),
    )


def build_artifact(spec: ModelSpec, case: Case) -> Artifact | None:
    """`case`'s artifact, in this process: from the cache, or built now (None: nothing to build).

    With `cache=off` it is built into a private folder (removed by `discard_private`), never read from or written
    to the cache. The build stage calls this in its worker; `open_session` and in-process runs call it directly."""
    key = build_key(spec, case)
    if key is None:
        return None
    from infermeter.models.convert import cached_entry

    kind, suffix = _entry_kind_and_suffix(case)
    digest = key_digest(key)
    if not CACHE.value(case):
        folder = Path(tempfile.mkdtemp(prefix=PRIVATE_BUILD_PREFIX))
        target = folder / "artifact"
        if suffix == "/":
            target.mkdir()
        start = time.perf_counter()
        meta = _build(spec, case, target)
        return _artifact(target, digest, CacheState.OFF, meta, time.perf_counter() - start)
    entry = cached_entry(kind, key, suffix, lambda target: _build(spec, case, target))
    return _artifact(entry.path, digest, entry.state, entry.meta, entry.built_here_s)


def cached_artifact(case: Case, key: dict[str, object]) -> Artifact | None:
    """`case`'s artifact for its full `key` (`build_key`) when the cache already holds a valid one, without building
    or importing any framework (None: `cache=off`, or a miss). The build stage skips a worker for these."""
    if not CACHE.value(case):
        return None
    from infermeter.models.convert import EntryPlace

    kind, suffix = _entry_kind_and_suffix(case)
    place = EntryPlace.of(kind, key, suffix)
    meta, _problem = place.valid()
    return None if meta is None else _artifact(place.target, key_digest(key), CacheState.HIT, meta, 0.0)


def discard_private(artifact: Artifact | None) -> None:
    """Remove a `cache=off` artifact's private folder (nothing else is ever removed)."""
    if artifact is not None and artifact.cache == CacheState.OFF:
        folder = Path(artifact.path).parent
        if folder.name.startswith(PRIVATE_BUILD_PREFIX):
            shutil.rmtree(folder, ignore_errors=True)


def load_model(spec: ModelSpec, artifact: Artifact | None) -> ModelSpec:
    """The model `load` reads: the case's own, or the one its artifact was built from (an INT8 graph)."""
    if artifact is None or artifact.model_path is None:
        return spec
    return _int8_spec(spec, artifact.model_path)


def load_session(spec: ModelSpec, case: Case, artifact: Artifact | None) -> Session:
    """`case` loaded by its backend from `artifact`: the model it was built from (`load_model`), and the artifact
    itself only when the backend built one of its own (an INT8 graph alone is read as the model)."""
    own = artifact if artifact is not None and artifact.own else None
    return get_backend(case.backend)().load(load_model(spec, artifact), case, own)


def open_session(spec: ModelSpec, case: Case) -> Session:
    """A loaded session for `case` in this process, its artifact built (or found cached) first: for callers
    that need a session rather than a measurement (serve, parity, accuracy evaluation)."""
    artifact = build_artifact(spec, case)
    try:
        return load_session(spec, case, artifact)
    finally:
        discard_private(artifact)


@dataclass(frozen=True)
class BuildFailure:
    """A build that did not produce an artifact: `status` failed, crashed or timeout, and why."""

    status: str
    error: str


# What the build stage gives a case: its artifact, or why it could not be built.
BuildOutcome = Artifact | BuildFailure
