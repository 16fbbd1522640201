"""Produce GGUF quantization levels of one model and compare them: size on disk, memory, load, TTFT,
tokens/s and quality (perplexity on a packaged text, top-1 agreement with the F16 variant)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from infermeter.core.errors import ModelError
from infermeter.llm.backends.base import GenerateCase
from infermeter.llm.generation_metrics import SLO
from infermeter.llm.gguf_quant import quantized_gguf
from infermeter.llm.models import TINY, gguf_from_hf, resolve_gguf, resolve_hf_folder, tiny_llama_folder
from infermeter.llm.packaged import read_text
from infermeter.llm.plan import run_together
from infermeter.llm.quality import NextTokenScores, agreement, score_arrays
from infermeter.measure.isolation import call_in_worker
from infermeter.results.records import GgufQuality, read_record, write_record
from infermeter.results.schema import CaseResult

REFERENCE_LEVEL = "f16"


@dataclass(frozen=True)
class Variant:
    """One quantization level of a model, as a GGUF file."""

    level: str
    path: Path
    size_mb: float


def source_gguf(source: str) -> Path:
    """The highest-precision GGUF to quantize from: F32 conversion of `tiny-llama` / an HF folder, or the
    given GGUF file itself."""
    if source == TINY:
        return gguf_from_hf(tiny_llama_folder(), "f32")
    path = Path(source).expanduser()
    if path.is_dir():
        return gguf_from_hf(resolve_hf_folder(source), "f32")
    return resolve_gguf(source)


def make_variants(source: str, levels: list[str], out_dir: Path | None = None) -> list[Variant]:
    """Quantize `source` to each level (llama.cpp's quantizer; cached), copied into `out_dir` when given."""
    base = source_gguf(source)
    variants = []
    for level in levels:
        path = quantized_gguf(base, level)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            stem = Path(source).stem if source != TINY else TINY
            copy = out_dir / f"{stem}-{level}.gguf"
            shutil.copyfile(path, copy)
            path = copy
        variants.append(Variant(level, path, path.stat().st_size / 2**20))
    return variants


def score_variant(path: Path, threads: int, timeout_s: float, text_name: str = "lighthouse") -> NextTokenScores:
    """Perplexity/top-1 scores of one GGUF on packaged text `text_name`, in its own worker process."""
    kind, payload = call_in_worker(score_arrays, (path, read_text(text_name), threads), timeout_s)
    if kind != "result":
        raise ModelError(f"scoring {path.name} failed: {payload}")
    nll, top1 = payload
    return NextTokenScores(np.asarray(nll), np.asarray(top1))


def compare_levels(
    variants: list[Variant],
    template: GenerateCase,
    slo: SLO | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    text_name: str = "lighthouse",
) -> list[CaseResult]:
    """Benchmark every variant with `template` (its `model` replaced), all in interleaved rounds, and attach size
    and quality to each result; perplexity is measured on packaged text `text_name` (`generate.packaged.TEXTS`).

    Agreement is against the `f16` variant when it is among `variants`, else against the first one.
    """
    scores: dict[str, NextTokenScores] = {}
    results: list[CaseResult] = []
    # The levels are one comparison group: timed in interleaved rounds, paired speedups over the first.
    timed = run_together([replace(template, model=str(v.path), backend="llama-cpp") for v in variants], slo)
    for variant, result in zip(variants, timed, strict=True):
        quality = GgufQuality(variant.level, variant.size_mb, perplexity_text=text_name)
        try:
            scores[variant.level] = score_variant(variant.path, template.threads, template.timeout_s, text_name)
            quality = replace(quality, perplexity=scores[variant.level].perplexity)
            quality = replace(quality, scored_tokens=len(scores[variant.level].nll))
        except ModelError as exc:
            result.notes.append(f"quality not measured: {exc}")
        write_record(result, quality)
        results.append(result)
        if on_result:
            on_result(result)
    reference = REFERENCE_LEVEL if REFERENCE_LEVEL in scores else next(iter(scores), None)
    for result in results:
        measured = read_record(result, GgufQuality)
        assert measured is not None  # written above
        if reference is not None and measured.gguf_level in scores:
            top1 = agreement(scores[measured.gguf_level], scores[reference])
            write_record(result, replace(measured, top1_agreement=top1, agreement_reference=reference))
    return results
