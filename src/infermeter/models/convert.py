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

from infermeter.errors import ModelError
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
    """Export the torch form of `spec` to `target` with a dynamic batch axis on every input.

    Tries the torch.export-based exporter first and falls back to the TorchScript-based one; returns a note
    naming the exporter used (and why the first one was not).
    """
    import logging
    import warnings

    import torch

    from infermeter.models.inputs import generate_feeds, resolve_shapes
    from infermeter.models.spec import load_torch_module

    module = load_torch_module(spec)
    # Batch 2 for tracing: a batch of 1 lets exporters specialise the batch dimension away.
    overrides = [(i.name, tuple(d if isinstance(d, int) else 8 for d in i.shape)) for i in spec.inputs]
    shapes = resolve_shapes(spec.inputs, 2, overrides)
    feeds = generate_feeds(spec.inputs, shapes, 1)[0]
    args = tuple(torch.from_numpy(feeds[i.name]) for i in spec.inputs)
    input_names = [i.name for i in spec.inputs]
    dynamic_axes = {i.name: {axis: str(d) for axis, d in enumerate(i.shape) if isinstance(d, str)} for i in spec.inputs}
    for name in spec.output_names:
        dynamic_axes[name] = {0: "batch"}
    errors: list[str] = []
    # The exporter logs a warning per torchvision op it cannot register; that is noise for our models.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    for dynamo in (True, False):
        try:
            with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    module,
                    args,
                    str(target),
                    input_names=input_names,
                    output_names=list(spec.output_names),
                    dynamic_axes=dynamic_axes,
                    opset_version=opset,
                    dynamo=dynamo,
                )
            exporter = "torch.export-based" if dynamo else "TorchScript-based"
            reason = f" (torch.export-based failed: {errors[0]})" if errors else ""
            return f"exported with the {exporter} ONNX exporter{reason}"
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    raise ModelError(f"could not export {spec.ref!r} to ONNX: " + " | ".join(errors))


def onnx_for(spec: ModelSpec, opset: int = DEFAULT_OPSET) -> CachedArtifact:
    """The model as an ONNX file: the user's own file, or a cached export of its torch form."""
    if spec.kind == "onnx":
        assert spec.path is not None
        return CachedArtifact(Path(spec.path), True, 0.0, "user-supplied ONNX file")
    from importlib.metadata import version

    # The exporter's version from package metadata: importing torch here would add seconds to every load.
    key = {"model": spec.content_hash, "torch": version("torch"), "opset": opset, "dynamic": "batch", "v": 1}
    return cached_build("onnx", key, ".onnx", lambda target: export_onnx(spec, target, opset))
