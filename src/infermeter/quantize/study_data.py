"""The data an INT8 study calibrates and is judged on, chosen by one rule for `quantize` and `optimize`.

The policy (both commands, the same flags give the same sets, notes and warnings):
- Calibration: `--calib` (at most `calib_size` samples). Without it, a static quantization calibrates on
  `RANDOM_CALIBRATION_SAMPLES` generated inputs, with the `random_calibration` warning; a dynamic one needs no
  calibration (activation ranges are taken at run time), so none is generated, and a `--calib` given to it is
  noted as unused for calibration. optimize always quantizes statically.
- Evaluation: `--eval`, bounded to its first `eval_size` samples (`EVAL_SAMPLES` by default), since every
  probe of the sensitivity search scores the whole set again; a bound that cut the data is noted. Without
  `--eval`, the calibration data (agreement with FP32 on them), else `RANDOM_EVAL_SAMPLES` generated inputs.
- Real calibration data is checked against the evaluation data (`calibration_warnings`), and a note says what
  the evaluation set is and how it is scored.
Generated samples follow `--input` (shapes of symbolic dims, constant inputs) as bench's do.
"""

from __future__ import annotations

from dataclasses import dataclass

from infermeter.build.int8.calibration import (
    RANDOM_CALIBRATION_SAMPLES,
    calibration_warnings,
    random_calibration_warning,
)
from infermeter.build.int8.feeds import ModelInputs
from infermeter.models.samples import SampleSet
from infermeter.results.schema import CaseWarning

# Calibration samples used at most (`--calib-size`'s default).
CALIB_SAMPLES = 300
# Evaluation samples used at most: top-1 in steps of 0.1 points, finer than any accuracy budget in use, and the
# whole test split of a small task (the digits' 540) is scored.
EVAL_SAMPLES = 1000
# Generated evaluation samples when neither --eval nor --calib is given.
RANDOM_EVAL_SAMPLES = 64


@dataclass(frozen=True)
class DataFlags:
    """The flags that choose a study's data: `--calib`, `--eval`, their bounds, and the seed of generated ones."""

    calib: str | None = None
    eval: str | None = None
    calib_size: int = CALIB_SAMPLES
    eval_size: int = EVAL_SAMPLES
    seed: int = 0


@dataclass(frozen=True)
class StudyData:
    """Calibration and evaluation samples, with what a reader must know about them. `calib` is None only for a
    dynamic quantization without `--calib`."""

    calib: SampleSet | None
    evaluation: SampleSet
    notes: tuple[str, ...] = ()
    warnings: tuple[CaseWarning, ...] = ()

    @property
    def calibrated_on_random(self) -> bool:
        """True when calibration used generated inputs (accuracy of the INT8 model on real data unknown)."""
        return any(w.code == "random_calibration" for w in self.warnings)


def choose_study_data(inputs: ModelInputs, flags: DataFlags, static: bool = True) -> StudyData:
    """The calibration and evaluation sets of `flags`, by the policy in the module docstring."""
    notes: list[str] = []
    warnings: list[CaseWarning] = []
    calib = inputs.load(flags.calib, flags.calib_size) if flags.calib else None
    if calib is None and static:
        calib = inputs.random(RANDOM_CALIBRATION_SAMPLES, flags.seed + 1)
        warnings.append(random_calibration_warning(RANDOM_CALIBRATION_SAMPLES))
    elif flags.calib and not static:
        notes.append("--calib is not used by dynamic quantization (activation ranges are taken at run time)")
    evaluation, cut = _bounded(inputs, flags.eval, flags.eval_size) if flags.eval else (None, False)
    if calib is not None and flags.calib:
        warnings.extend(calibration_warnings(calib, evaluation))
    if evaluation is None:
        if calib is not None and flags.calib:
            evaluation = calib
            notes.append("no --eval: accuracy is agreement with FP32 on the calibration samples")
        else:
            evaluation = inputs.random(RANDOM_EVAL_SAMPLES, flags.seed + 2)
            notes.append(
                f"no --eval: accuracy is agreement with FP32 on {RANDOM_EVAL_SAMPLES} random inputs "
                "(not a task metric; pass --eval with labelled data for one)"
            )
    what = "labelled: top-1 against the labels" if evaluation.labels is not None else "unlabelled: agreement"
    size = f"the first {evaluation.count} samples, the evaluation size," if cut else f"{evaluation.count} samples"
    notes.append(f"evaluation data: {size} from {evaluation.source} ({what})")
    return StudyData(calib, evaluation, tuple(notes), tuple(warnings))


def _bounded(inputs: ModelInputs, ref: str, size: int) -> tuple[SampleSet, bool]:
    """The first `size` samples of `ref`, and whether the data held more (one more is read to know)."""
    loaded = inputs.load(ref, size + 1)
    return (loaded.head(size), True) if loaded.count > size else (loaded, False)
