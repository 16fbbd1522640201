"""Model references for generation: the built-in `tiny-llama` (built offline, cached), HF folders, GGUF files.

References: `tiny-llama` (HF folder for transformers; F16 GGUF for llama-cpp), `tiny-llama:q4_k_m` (a GGUF
quantization level of it), a real model shipped in a package (`smollm2-135m`, `smollm2-135m:q8_0`; see
`generate.packaged`), a path to a `.gguf` file, or a path to a Hugging Face model folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from infermeter.core.errors import ModelError
from infermeter.llm.packaged import is_packaged, packaged_gguf
from infermeter.llm.tinyllama import TinyLlamaConfig, build_tiny_llama
from infermeter.models.convert import cache_root, cached_build

TINY = "tiny-llama"


def _cached_folder(kind: str, key: dict[str, object], build: Callable[[Path], str]) -> Path:
    """A cached directory built by `build(folder)`; built in a temporary folder and renamed into place."""
    root = cache_root() / kind
    root.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]
    target = root / digest
    if (target / "infermeter-complete.json").is_file():
        return target
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{digest}-"))
    try:
        start = time.perf_counter()
        note = build(tmp)
        (tmp / "infermeter-complete.json").write_text(
            json.dumps({"key": key, "note": note, "build_s": time.perf_counter() - start})
        )
        if target.exists():  # a half-built or concurrent entry: replace it
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "infermeter-complete.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def tiny_llama_folder(config: TinyLlamaConfig | None = None) -> Path:
    """The HF folder of the tiny test model (built on first use, then cached)."""
    config = config or TinyLlamaConfig()
    return _cached_folder("tiny-llama", config.key(), lambda folder: build_tiny_llama(folder, config))


def gguf_from_hf(folder: Path, out_type: str = "f16") -> Path:
    """The GGUF conversion of HF Llama `folder` (cached by the folder's weights and tokenizer checksums)."""
    from infermeter.llm.gguf_convert import convert_llama_to_gguf
    from infermeter.models.spec import file_sha256

    key: dict[str, object] = {"format": 1, "out_type": out_type}
    for name in sorted(p.name for p in folder.iterdir() if p.suffix in (".json", ".safetensors")):
        if name != "infermeter-complete.json":
            key[name] = file_sha256(folder / name)
    artifact = cached_build("gguf", key, ".gguf", lambda target: convert_llama_to_gguf(folder, target, out_type))
    return artifact.path


def resolve_hf_folder(ref: str) -> Path:
    """The HF model folder for `ref` (`tiny-llama` or a folder path); ModelError otherwise."""
    if ref == TINY:
        return tiny_llama_folder()
    path = Path(ref).expanduser()
    if path.suffix == ".gguf" or ref.startswith(f"{TINY}:") or is_packaged(ref):
        raise ModelError(f"{ref} is a GGUF model; the transformers/vllm backends need a Hugging Face folder")
    if not (path / "config.json").is_file():
        raise ModelError(f"{ref} is not a Hugging Face model folder (no config.json there)")
    return path


def resolve_gguf(ref: str) -> Path:
    """The GGUF file for `ref`: `tiny-llama` (F16), `tiny-llama:LEVEL`, a packaged model (`smollm2-135m`, its
    `:LEVEL` requantized from the shipped file), or a `.gguf` path; ModelError otherwise."""
    if ref == TINY:
        return gguf_from_hf(tiny_llama_folder(), "f16")
    if ref.startswith(f"{TINY}:"):
        from infermeter.llm.gguf_quant import quantized_gguf

        return quantized_gguf(gguf_from_hf(tiny_llama_folder(), "f32"), ref.split(":", 1)[1])
    if is_packaged(ref):
        name, _, level = ref.partition(":")
        if not level:
            return packaged_gguf(name)
        from infermeter.llm.gguf_quant import quantized_gguf

        return quantized_gguf(packaged_gguf(name), level)
    path = Path(ref).expanduser()
    if not path.is_file():
        raise ModelError(f"GGUF file {ref} does not exist; pass a .gguf path, `tiny-llama` or `smollm2-135m`")
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ModelError(f"{ref} is not a GGUF file (no GGUF magic); convert it with llama.cpp first")
    return path
