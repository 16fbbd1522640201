"""Conversions between model forms (torch module -> ONNX), done once and cached on disk by content hash.

A cache entry is a file plus a sidecar `.json` holding the SHA-256 of the file and the key it was built
for; an entry whose file does not match its sidecar (truncated, edited, half-written) is rebuilt, never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infermeter.models.spec import ModelSpec, file_sha256

DEFAULT_OPSET = 18


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


def cached_build(kind: str, key: dict[str, object], suffix: str, build: Callable[[Path], str]) -> CachedArtifact:
    """Return the artifact for `key`, building it with `build(target_path) -> note` on a miss or a bad entry.

    The build writes to a temporary path in the same folder and is renamed into place, so a crash mid-build
    never leaves a half-written file under the final name.
    """
    folder = cache_root() / kind
    folder.mkdir(parents=True, exist_ok=True)
    key_json = json.dumps(key, sort_keys=True, default=str)
    digest = hashlib.sha256(key_json.encode()).hexdigest()[:24]
    target = folder / f"{digest}{suffix}"
    sidecar = folder / f"{digest}.json"
    note = ""
    if target.is_file() and sidecar.is_file():
        try:
            meta = json.loads(sidecar.read_text())
            if meta.get("sha256") == file_sha256(target) and meta.get("key") == json.loads(key_json):
                return CachedArtifact(target, True, 0.0, meta.get("note", ""))
            note = "cache entry did not match its checksum and was rebuilt"
        except (OSError, ValueError):
            note = "cache entry was unreadable and was rebuilt"
    start = time.perf_counter()
    fd, tmp_name = tempfile.mkstemp(suffix=suffix, dir=folder)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        build_note = build(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    build_s = time.perf_counter() - start
    full_note = "; ".join(n for n in (note, build_note) if n)
    sidecar_tmp = sidecar.with_suffix(".json.tmp")
    sidecar_tmp.write_text(json.dumps({"sha256": file_sha256(target), "key": json.loads(key_json), "note": full_note}))
    os.replace(sidecar_tmp, sidecar)
    return CachedArtifact(target, False, build_s, full_note)


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
    from importlib.metadata import version

    from infermeter.extras import require_extra

    require_extra("torch", ["torch", "onnx"], f"exporting {spec.ref} to ONNX")
    # The exporter's version from package metadata: importing torch here would add seconds to every load.
    from infermeter.models.onnx_export import default_dynamic_axes

    dynamic = {name: sorted(axes.items()) for name, axes in default_dynamic_axes(spec).items()}
    key = {"model": spec.content_hash, "torch": version("torch"), "opset": opset, "dynamic": dynamic, "v": 2}
    return cached_build("onnx", key, ".onnx", lambda target: export_onnx(spec, target, opset))
