"""A calibration set judged before it is used: too small, or unlike the evaluation data, gets a warning; and the
warning every quantization calibrated on generated inputs carries. The sets themselves are `models.samples`'s
`SampleSet`s.
"""

from __future__ import annotations

import numpy as np

from infermeter.models.samples import SampleSet
from infermeter.results.schema import CaseWarning

# Calibration samples drawn when no real data is given (every such model carries random_calibration_warning).
RANDOM_CALIBRATION_SAMPLES = 32

SMALL_CALIBRATION_SAMPLES = 100
# Beyond this Kolmogorov-Smirnov distance two value distributions are plainly different (0 = same, 1 = disjoint).
KS_DISTANCE_LIMIT = 0.25


def random_calibration_warning(
    count: int, remedy: str = "pass --calib with a few hundred representative samples"
) -> CaseWarning:
    """The warning every quantization calibrated on generated inputs carries; `remedy` says how to give real data."""
    return CaseWarning(
        "random_calibration",
        f"calibrated on {count} random inputs, not real data: activation ranges (and so accuracy) may be far from "
        f"what real inputs need; {remedy}",
        "random data",
    )


def _float_values(samples: SampleSet, name: str, max_values: int = 20000) -> np.ndarray:
    values = samples.arrays[name].reshape(-1).astype(np.float64)
    if values.size > max_values:  # a fixed subsample keeps the KS test fast and deterministic
        values = values[np.random.default_rng(0).choice(values.size, max_values, replace=False)]
    return values


def calibration_warnings(calib: SampleSet, reference: SampleSet | None) -> list[CaseWarning]:
    """Reasons to doubt a calibration set: fewer than 100 samples, or per-input values unlike the reference
    (evaluation) data by mean/std or by the Kolmogorov-Smirnov distance of their value distributions."""
    from scipy.stats import ks_2samp

    warnings: list[CaseWarning] = []
    if calib.count < SMALL_CALIBRATION_SAMPLES:
        warnings.append(
            CaseWarning(
                "small_calibration_set",
                f"calibration used {calib.count} samples (< {SMALL_CALIBRATION_SAMPLES}): activation ranges from "
                "so few samples may miss real inputs; give --calib at least a few hundred representative samples",
                f"{calib.count} samples",
            )
        )
    if reference is None:
        return warnings
    for name, array in calib.arrays.items():
        if array.dtype.kind != "f" or name not in reference.arrays:
            continue
        ours, theirs = _float_values(calib, name), _float_values(reference, name)
        mean_c, std_c, mean_r, std_r = ours.mean(), ours.std(), theirs.mean(), theirs.std()
        scale = max(std_r, 1e-12)
        distance = float(ks_2samp(ours, theirs).statistic)
        shifted = abs(mean_c - mean_r) > 0.5 * scale
        spread = std_c > 2 * std_r or std_c < 0.5 * std_r
        if distance > KS_DISTANCE_LIMIT or shifted or spread:
            detail = (
                f"{name}: mean {mean_c:.3g} vs {mean_r:.3g}, std {std_c:.3g} vs {std_r:.3g}, KS distance {distance:.2f}"
            )
            warnings.append(
                CaseWarning(
                    "calibration_unrepresentative",
                    f"calibration data look unlike the evaluation data ({detail}): ranges calibrated on them "
                    "will clip or waste int8 levels; calibrate on samples drawn like the real inputs "
                    "(same preprocessing)",
                    detail,
                )
            )
    return warnings
