"""Conversions between model forms (torch module -> ONNX), done once and cached on disk by content hash.

A cache entry is a file plus a sidecar `.json` holding the SHA-256 of the file and the key it was built
for; an entry whose file does not match its sidecar (truncated, edited, half-written) is rebuilt, never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infermeter.models.onnx_export import DEFAULT_OPSET
from infermeter.models.spec import ModelSpec, file_sha256


def cache_root() -> Path:
    """Where converted models are kept: $INFERMETER_CACHE_DIR, else the user's cache directory."""
    override = os.environ.get("INFERMETER_CACHE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("infermeter"))


@dataclass(frozen=True)
class CachedArtifact:
    """A converted artifact and how it was obtained (hit or rebuilt, and the build time when rebuilt)."""

    path: Path
    cache_hit: bool
    build_s: float
    note: str = ""


@dataclass(frozen=True)
class CacheEntry:
    """One cache entry: its path, how it was obtained (`CacheState` value), the metadata its build returned
    (kept in the sidecar, so a hit still knows what its build cost) and the seconds spent building it now."""

    path: Path
    state: str
    meta: dict[str, Any]
    built_here_s: float


def content_sha256(path: Path) -> str:
    """SHA-256 of a file, or of a folder's file names and contents (a compiled library with its database)."""
    if path.is_file():
        return file_sha256(path)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(item.relative_to(path)).encode())
        digest.update(file_sha256(item).encode())
    return digest.hexdigest()


def key_digest(key: dict[str, object]) -> str:
    """The short stable digest a cache entry of `key` is named by."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class EntryPlace:
    """Where the cache keeps the entry of one key: the entry (`target`), its sidecar, and the key as stored."""

    target: Path
    sidecar: Path
    key: dict[str, Any]

    @classmethod
    def of(cls, kind: str, key: dict[str, object], suffix: str) -> EntryPlace:
        """The place of `key` under `kind` (`suffix` "/": the entry is a folder)."""
        key_json = json.dumps(key, sort_keys=True, default=str)
        digest = key_digest(key)
        folder = cache_root() / kind
        target = folder / (digest if suffix == "/" else f"{digest}{suffix}")
        return cls(target, folder / f"{digest}.json", json.loads(key_json))

    def valid(self) -> tuple[dict[str, Any] | None, str]:
        """The sidecar's metadata when the entry matches it, else None and why the entry must be rebuilt."""
        return _valid_entry(self.target, self.sidecar, self.key)


def _valid_entry(target: Path, sidecar: Path, key: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    if not (target.exists() and sidecar.is_file()):
        return None, ""
    try:
        meta = json.loads(sidecar.read_text())
        if meta.get("sha256") == content_sha256(target) and meta.get("key") == key:
            return meta, ""
        return None, "cache entry did not match its checksum and was rebuilt"
    except (OSError, ValueError):
        return None, "cache entry was unreadable and was rebuilt"


def _temporary(folder: Path, suffix: str) -> Path:
    """A fresh empty folder (`suffix` "/") or file in `folder`, to build into before the rename."""
    if suffix == "/":
        return Path(tempfile.mkdtemp(dir=folder))
    fd, name = tempfile.mkstemp(suffix=suffix, dir=folder)
    os.close(fd)
    return Path(name)


def cached_entry(kind: str, key: dict[str, object], suffix: str, build: Callable[[Path], dict[str, Any]]) -> CacheEntry:
    """The cache entry for `key` under `kind`, built with `build(target) -> metadata` on a miss or a bad entry.

    `suffix` "/" makes the entry a folder. The build writes to a temporary path in the same folder that is renamed
    into place, so a crash mid-build never leaves a half-written entry under the final name."""
    place = EntryPlace.of(kind, key, suffix)
    target, sidecar, folder = place.target, place.sidecar, place.target.parent
    folder.mkdir(parents=True, exist_ok=True)
    is_dir = suffix == "/"
    meta, problem = place.valid()
    if meta is not None:
        return CacheEntry(target, "hit", meta, 0.0)
    start = time.perf_counter()
    tmp = _temporary(folder, suffix)
    try:
        built = dict(build(tmp))
        if is_dir:
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
    built_s = time.perf_counter() - start
    if problem:
        built["note"] = "; ".join(n for n in (problem, built.get("note", "")) if n)
    record = {**built, "sha256": content_sha256(target), "key": place.key}
    # A temporary name of its own: two processes (or two nodes on a shared cache) may finish the same key at once.
    sidecar_tmp = _temporary(folder, ".json.tmp")
    sidecar_tmp.write_text(json.dumps(record))
    os.replace(sidecar_tmp, sidecar)
    return CacheEntry(target, "rebuilt" if problem else "built", built, built_s)


def cached_build(kind: str, key: dict[str, object], suffix: str, build: Callable[[Path], str]) -> CachedArtifact:
    """Return the artifact file for `key`, building it with `build(target_path) -> note` on a miss or a bad entry
    (see `cached_entry`)."""
    entry = cached_entry(kind, key, suffix, lambda target: {"note": build(target)})
    return CachedArtifact(entry.path, entry.state == "hit", entry.built_here_s, str(entry.meta.get("note", "")))


def export_onnx(spec: ModelSpec, target: Path, opset: int = DEFAULT_OPSET) -> str:
    """Export the torch form of `spec` to `target` with every symbolic input dim dynamic (batch, and seq for
    transformers); returns a note naming the exporter used (and why the torch.export-based one was not).

    A thin wrapper over `infermeter.models.onnx_export.export_to_onnx`, the one exporter of the project."""
    from infermeter.models.onnx_export import export_to_onnx

    return export_to_onnx(spec, target, opset).note


def onnx_for(spec: ModelSpec, opset: int = DEFAULT_OPSET) -> CachedArtifact:
    """The model as an ONNX file: the user's own file, or a cached export of its torch form."""
    if spec.kind == "onnx":
        assert spec.path is not None
        return CachedArtifact(Path(spec.path), True, 0.0, "user-supplied ONNX file")
    if not spec.has_torch_form:
        from infermeter.core.errors import ModelError

        raise ModelError(
            f"{spec.ref} is a {spec.kind} model: it has no ONNX form (infermeter exports PyTorch models to ONNX; "
            "it does not convert between graph formats)"
        )
    from importlib.metadata import version

    from infermeter.core.extras import require_extra

    require_extra("torch", ["torch", "onnx"], f"exporting {spec.ref} to ONNX")
    # The exporter's version from package metadata: importing torch here would add seconds to every load.
    from infermeter.models.onnx_export import default_dynamic_axes

    dynamic = {name: sorted(axes.items()) for name, axes in default_dynamic_axes(spec).items()}
    key = {"model": spec.content_hash, "torch": version("torch"), "opset": opset, "dynamic": dynamic, "v": 2}
    return cached_build("onnx", key, ".onnx", lambda target: export_onnx(spec, target, opset))
