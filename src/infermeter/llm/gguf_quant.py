"""GGUF quantization levels through llama.cpp's own quantizer (`llama_cpp.llama_model_quantize`).

`f16` and `f32` come from the converter; every other level is quantized from an F32 (or F16) GGUF. A source
that is itself quantized (a packaged Q4_1 model) is requantized: llama.cpp refuses that unless asked, and every
level's quality is then bounded by the source's, which the note says.
"""

from __future__ import annotations

from pathlib import Path

from infermeter.core.errors import BackendUnavailable, ModelError, UsageError
from infermeter.models.convert import cached_build
from infermeter.models.spec import file_sha256

# llama.cpp's enum llama_ftype (include/llama.h).
FTYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q8_0": 7,
    "q5_0": 8,
    "q4_k_s": 14,
    "q4_k_m": 15,
    "q5_k_s": 16,
    "q5_k_m": 17,
    "q6_k": 18,
}
UNQUANTIZED = ("f32", "f16", "bf16")
DEFAULT_LEVELS = ("q4_k_m", "q5_k_m", "q8_0", "f16")


def parse_levels(text: str) -> list[str]:
    """`q4_k_m,q8_0` -> ['q4_k_m', 'q8_0']; UsageError naming the known levels otherwise."""
    levels = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [level for level in levels if level not in FTYPES]
    if unknown or not levels:
        raise UsageError(f"unknown GGUF level(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(FTYPES)}")
    return levels


def quantize_gguf(source: Path, target: Path, level: str, threads: int = 0) -> str:
    """Quantize GGUF `source` to `level` at `target` with llama.cpp; returns a note."""
    try:
        import ctypes

        import llama_cpp
    except ImportError as exc:
        from infermeter.llm.gguf_file import INSTALL_HINT

        raise BackendUnavailable(INSTALL_HINT) from exc
    from infermeter.llm.gguf_file import gguf_file_type

    source_type = gguf_file_type(source)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[level]
    params.nthread = threads
    params.allow_requantize = source_type not in UNQUANTIZED
    code = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    if code != 0:
        raise ModelError(f"llama.cpp could not quantize {source} to {level} (code {code}); is it a valid GGUF?")
    if params.allow_requantize:
        return f"requantized to {level} by llama.cpp from a {source_type} source (quality bounded by the source's)"
    return f"quantized to {level} by llama.cpp"


def quantized_gguf(source: Path, level: str) -> Path:
    """The `level` variant of GGUF `source` (cached by the source's checksum)."""
    if level not in FTYPES:
        raise UsageError(f"unknown GGUF level {level!r}; choose from {', '.join(FTYPES)}")
    key = {"format": 1, "source_sha256": file_sha256(source), "level": level}
    return cached_build("gguf-quant", key, ".gguf", lambda target: quantize_gguf(source, target, level)).path
