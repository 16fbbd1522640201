"""Numerical parity: how far a backend's outputs are from a reference's, and whether that is acceptable.

Pure functions over numpy arrays (no framework imports). Running backends lives in `infermeter.parity.run`,
layer-by-layer localization in `infermeter.parity.localize`.

Definitions (per output, over every element of every sample; computed in float64):

- `max_abs_err`, `mean_abs_err`: of d = |cand - ref|.
- `scale`: max |ref| of the output (1.0 when the reference is all zeros). The absolute tolerance is expressed in
  units of it (see `Tolerance`).
- `max_rel_err`, `mean_rel_err`: of d / (|ref| + REL_FLOOR * scale). The floor keeps elements that are
  (numerically) zero from turning the relative error into a division by zero: an element a thousand times
  smaller than the output's largest has no meaningful relative accuracy after fp32 accumulation anyway.
- `cosine`: <ref, cand> / (|ref| |cand|) over the flattened output (1.0 when both are zero, 0.0 when one is).
- `sqnr_db`: 10 log10(sum ref^2 / sum (ref - cand)^2): +inf when the outputs are equal, -inf when the
  reference is all zeros and the candidate is not.
- `top1_agreement` (2-D outputs [rows, classes], 2+ classes): fraction of rows whose argmax is the same.
- `top5_agreement` (2-D, more than 5 classes): mean over rows of |top5(ref) ∩ top5(cand)| / 5.
- `worst_ratio`: max over elements of d / (atol * scale + rtol * |ref|): above 1 means out of tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from infermeter.core.errors import UsageError
from infermeter.results.records import write_record

# The record's names, importable from here as before they moved to results.records.
from infermeter.results.records.parity import STATUSES as STATUSES
from infermeter.results.records.parity import OutputMetrics, Tolerance
from infermeter.results.records.parity import ParityRecord as ParityRecord
from infermeter.results.schema import CaseResult

REL_FLOOR = 1e-3

_DEFAULTS = {
    "fp32": Tolerance("fp32", 1e-5, 1e-4, 0.99999),
    "fp16": Tolerance("fp16", 1e-2, 1e-2, 0.999),
    "bf16": Tolerance("bf16", 3e-2, 3e-2, 0.995),
    "int8": Tolerance("int8", None, None, 0.98, 0.9),
}


def default_tolerance(
    precision: str,
    atol: float | None = None,
    rtol: float | None = None,
    min_cosine: float | None = None,
) -> Tolerance:
    """The default tolerance for `precision`, with any of atol / rtol / min_cosine overridden. Giving only one
    of atol and rtol for int8 sets the other to 0 (an element-wise bound then applies).

    Defaults: fp32 atol 1e-5 / rtol 1e-4 (the seeds' 1e-5 bar; ONNX Runtime vs PyTorch on the zoo measures
    3e-7..6e-7 of scale, so this leaves a 15x margin for other kernels, never a bf16 engine's ~5e-3); fp16
    1e-2 / 1e-2 (unit roundoff 4.9e-4, accumulated over tens of layers); bf16 3e-2 / 3e-2 (unit roundoff
    3.9e-3); int8 has no element-wise bound (quantization error is per-tensor, not per-element small) and is
    judged by the task metrics: cosine >= 0.98 and, for classifiers, top-1 agreement >= 0.9.
    """
    base = _DEFAULTS.get(precision)
    if base is None:
        raise UsageError(f"no parity tolerance for precision {precision!r}; use one of {', '.join(_DEFAULTS)}")
    for value, flag in ((atol, "--atol"), (rtol, "--rtol")):
        if value is not None and (value < 0 or not math.isfinite(value)):
            raise UsageError(f"{flag} {value:g} must be a finite number >= 0")
    if min_cosine is not None and not -1.0 <= min_cosine <= 1.0:
        raise UsageError(f"--min-cosine {min_cosine:g} must lie in [-1, 1]")
    if atol is not None or rtol is not None:
        base = replace(
            base,
            atol=atol if atol is not None else (base.atol if base.atol is not None else 0.0),
            rtol=rtol if rtol is not None else (base.rtol if base.rtol is not None else 0.0),
        )
    if min_cosine is not None:
        base = replace(base, min_cosine=min_cosine)
    return base


def tolerance_for_reference(tolerance: Tolerance, reference_effective: str | None) -> Tolerance:
    """The tolerance to judge against a reference that ran `reference_effective`: the looser of the requested
    one and that precision's default. A model that is INT8 by design runs INT8 on the reference engine too, so
    nothing can be expected closer to it than INT8 tolerances (two engines running the same INT8 graph differ
    by a rounding step here and there, never by FP32's 1e-5)."""
    order = list(_DEFAULTS)
    if reference_effective not in _DEFAULTS or tolerance.precision not in _DEFAULTS:
        return tolerance
    if order.index(reference_effective) > order.index(tolerance.precision):
        return _DEFAULTS[reference_effective]
    return tolerance


def _topk_agreement(ref: np.ndarray, cand: np.ndarray, k: int) -> float:
    ref_top = np.argsort(-ref, axis=1, kind="stable")[:, :k]
    cand_top = np.argsort(-cand, axis=1, kind="stable")[:, :k]
    if k == 1:
        return float(np.mean(ref_top[:, 0] == cand_top[:, 0]))
    overlap = [len(set(r.tolist()) & set(c.tolist())) for r, c in zip(ref_top, cand_top, strict=True)]
    return float(np.mean(overlap) / k)


def _cosine(r: np.ndarray, c: np.ndarray) -> float:
    """Cosine similarity of two flat vectors: 1 when both are zero, 0 when only one is."""
    norm_r, norm_c = float(np.linalg.norm(r)), float(np.linalg.norm(c))
    if norm_r == 0 and norm_c == 0:
        return 1.0
    if norm_r == 0 or norm_c == 0:
        return 0.0
    return float(np.clip(np.dot(r, c) / (norm_r * norm_c), -1.0, 1.0))


def _sqnr_db(r: np.ndarray, diff: np.ndarray) -> float:
    """Signal to quantization-noise ratio in dB: inf without noise, -inf without signal."""
    signal, noise = float(np.sum(r * r)), float(np.sum(diff * diff))
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10 * math.log10(signal / noise)


def _outside_tolerance(
    r: np.ndarray, diff: np.ndarray, scale: float, exact: bool, tolerance: Tolerance | None
) -> tuple[float | None, int]:
    """(worst diff/bound ratio, values outside the bound): exact outputs allow no difference; float outputs are
    held to an elementwise `tolerance` when there is one (else nothing is outside and there is no ratio)."""
    if exact:
        return None, int(np.sum(diff > 0))
    if tolerance is None or not tolerance.elementwise:
        return None, 0
    bound = (tolerance.atol or 0.0) * scale + (tolerance.rtol or 0.0) * np.abs(r)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(diff == 0, 0.0, diff / bound)
    return (float(np.max(ratios)) if ratios.size else 0.0), int(np.sum(diff > bound))


def compare_output(name: str, ref: np.ndarray, cand: np.ndarray, tolerance: Tolerance | None = None) -> OutputMetrics:
    """Metrics of `cand` against `ref` (definitions in the module docstring). Integer and boolean outputs are
    required to match exactly; float outputs are measured against `tolerance` when given."""
    ref = np.asarray(ref)
    cand = np.asarray(cand)
    if ref.shape != cand.shape:
        return OutputMetrics(
            name, tuple(ref.shape), problem=f"shape {tuple(cand.shape)} differs from the reference {tuple(ref.shape)}"
        )
    exact = ref.dtype.kind in "iub"
    r = ref.astype(np.float64).ravel()
    c = cand.astype(np.float64).ravel()
    finite_r, finite_c = np.isfinite(r), np.isfinite(c)
    # Non-finite values agree only when both sides hold the same one (inf == inf, nan where nan).
    same_nonfinite = ~finite_r & ~finite_c & ((r == c) | (np.isnan(r) & np.isnan(c)))
    nonfinite_mismatch = int(np.sum((~finite_r | ~finite_c) & ~same_nonfinite))
    both = finite_r & finite_c
    r, c = r[both], c[both]
    diff = np.abs(c - r)
    scale = float(np.max(np.abs(r))) if r.size else 0.0
    scale = scale if scale > 0 else 1.0
    rel = diff / (np.abs(r) + REL_FLOOR * scale)
    cosine, sqnr_db = _cosine(r, c), _sqnr_db(r, diff)
    worst_ratio, outside = _outside_tolerance(r, diff, scale, exact, tolerance)
    top1 = top5 = None
    if ref.ndim == 2 and ref.shape[1] >= 2 and ref.dtype.kind == "f" and nonfinite_mismatch == 0:
        ref2, cand2 = ref.astype(np.float64), cand.astype(np.float64)
        top1 = _topk_agreement(ref2, cand2, 1)
        top5 = _topk_agreement(ref2, cand2, 5) if ref.shape[1] > 5 else None
    return OutputMetrics(
        name=name,
        shape=tuple(ref.shape),
        max_abs_err=float(np.max(diff)) if diff.size else 0.0,
        mean_abs_err=float(np.mean(diff)) if diff.size else 0.0,
        max_rel_err=float(np.max(rel)) if rel.size else 0.0,
        mean_rel_err=float(np.mean(rel)) if rel.size else 0.0,
        cosine=cosine,
        sqnr_db=sqnr_db,
        scale=scale,
        worst_ratio=worst_ratio,
        outside=outside,
        top1_agreement=top1,
        top5_agreement=top5,
        nonfinite_mismatch=nonfinite_mismatch,
        exact_required=exact,
    )


def output_failure(metrics: OutputMetrics, tolerance: Tolerance) -> str | None:
    """Why this output fails `tolerance` (which metric, its value, the threshold), or None when it passes."""
    m = metrics
    if m.problem:
        return f"output {m.name}: {m.problem}"
    size = math.prod(m.shape)
    if m.nonfinite_mismatch:
        return f"output {m.name}: {m.nonfinite_mismatch} of {size} values are NaN/inf on one side only"
    if m.exact_required:
        if m.outside:
            return f"output {m.name}: {m.outside} of {size} integer values differ (exact match required)"
        return None
    if m.worst_ratio is not None and m.worst_ratio > 1:
        return (
            f"output {m.name}: max abs err {m.max_abs_err:.3g} ({m.max_abs_err / m.scale:.3g}×scale) exceeds "
            f"{tolerance.describe()} ({m.outside} of {size} elements outside, worst at {m.worst_ratio:.3g}× the bound)"
        )
    if tolerance.min_cosine is not None and m.cosine < tolerance.min_cosine:
        return f"output {m.name}: cosine {m.cosine:.6g} < {tolerance.min_cosine:g}"
    if tolerance.min_top1 is not None and m.top1_agreement is not None and m.top1_agreement < tolerance.min_top1:
        return f"output {m.name}: top-1 agreement {m.top1_agreement:.3g} < {tolerance.min_top1:g}"
    return None


def badness(metrics: OutputMetrics) -> float:
    """How far an output is from passing: inf when unusable, else the worst element-wise ratio (or 1 - cosine)."""
    # Orders outputs from worst to best: unusable ones first, then by how far past the bound they are.
    if metrics.problem or metrics.nonfinite_mismatch or (metrics.exact_required and metrics.outside):
        return math.inf
    if metrics.worst_ratio is not None:
        return metrics.worst_ratio
    return 1.0 - metrics.cosine


def judge(outputs: Sequence[OutputMetrics], tolerance: Tolerance) -> tuple[bool, str, str | None]:
    """(passed, reason, worst output name). The reason names the first failing output, metric and threshold,
    or summarises the worst output on a pass."""
    if not outputs:
        return False, "no outputs to compare", None
    worst = max(outputs, key=badness)
    failures = [f for f in (output_failure(m, tolerance) for m in outputs) if f]
    if failures:
        more = f" (+{len(failures) - 1} more output(s) failing)" if len(failures) > 1 else ""
        return False, failures[0] + more, worst.name
    ratio = f", {worst.worst_ratio:.2g}× the bound" if worst.worst_ratio is not None else ""
    return True, f"within {tolerance.describe()} (worst: {worst.name}{ratio})", worst.name


def parity_to_dict(record: ParityRecord) -> dict[str, Any]:
    """The record's on-disk form (`ParityRecord.to_dict`), as `check_case_parity` returns it."""
    return record.to_dict()


def set_case_parity(result: CaseResult, record: ParityRecord) -> None:
    """Store `record` as the case's `parity` field (`results.records.write_record`)."""
    write_record(result, record)
