"""Calibration / evaluation data loading and the calibration warnings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infermeter.build.int8.calibration import calibration_warnings
from infermeter.core.errors import InputSpecError, UsageError
from infermeter.models.inputs import InputSpec
from infermeter.models.samples import load_samples

VECTOR = (InputSpec("input", "float32", shape=("batch", 16)),)
IMAGE = (InputSpec("input", "float32", shape=("batch", 3, 8, 8)),)


def _codes(warnings: list) -> list[str]:
    return [w.code for w in warnings]


def test_small_calibration_set_warns(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "small.npz", input=rng.standard_normal((20, 16)).astype(np.float32))
    np.savez(tmp_path / "big.npz", input=rng.standard_normal((300, 16)).astype(np.float32))
    small = load_samples(VECTOR, str(tmp_path / "small.npz"))
    big = load_samples(VECTOR, str(tmp_path / "big.npz"))
    assert _codes(calibration_warnings(small, big)) == ["small_calibration_set"]
    assert calibration_warnings(big, small) == []


def test_unrepresentative_calibration_warns(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "calib.npz", input=(rng.standard_normal((200, 16)) + 3).astype(np.float32))
    np.savez(tmp_path / "eval.npz", input=rng.standard_normal((200, 16)).astype(np.float32))
    calib, evaluation = (load_samples(VECTOR, str(tmp_path / n)) for n in ("calib.npz", "eval.npz"))
    warnings = calibration_warnings(calib, evaluation)
    assert _codes(warnings) == ["calibration_unrepresentative"]
    assert "KS distance" in warnings[0].message


def test_npz_npy_and_labels(tmp_path: Path) -> None:
    x = np.arange(5 * 16, dtype=np.float64).reshape(5, 16)
    np.savez(tmp_path / "d.npz", x=x, labels=np.array([0, 1, 2, 3, 4]))
    np.save(tmp_path / "d.npy", x)
    samples = load_samples(VECTOR, str(tmp_path / "d.npz"))
    assert samples.count == 5 and samples.arrays["input"].dtype == np.float32
    assert samples.labels is not None and samples.labels.tolist() == [0, 1, 2, 3, 4]
    assert load_samples(VECTOR, str(tmp_path / "d.npy"), limit=3).count == 3
    np.savez(tmp_path / "bad.npz", input=x, labels=np.array([0, 1]))
    with pytest.raises(InputSpecError, match="2 labels for 5 samples"):
        load_samples(VECTOR, str(tmp_path / "bad.npz"))
    np.savez(tmp_path / "shape.npz", input=np.zeros((4, 15), np.float32))
    with pytest.raises(InputSpecError, match="dim 1 must be 16"):
        load_samples(VECTOR, str(tmp_path / "shape.npz"))


def test_image_folder_with_class_labels(tmp_path: Path) -> None:
    from PIL import Image

    for label, colour in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (tmp_path / label).mkdir()
        for i in range(2):
            Image.new("RGB", (20, 12), colour).save(tmp_path / label / f"{i}.png")
    samples = load_samples(IMAGE, str(tmp_path))
    assert samples.arrays["input"].shape == (4, 3, 8, 8)
    assert samples.labels is not None and samples.labels.tolist() == [0, 0, 1, 1]
    red = samples.arrays["input"][0, :, 0, 0]
    # Normalised with ImageNet's mean/std: pure red is (1-0.485)/0.229 on R, -mean/std on G and B.
    assert red[0] == pytest.approx((1 - 0.485) / 0.229, rel=1e-4) and red[1] < 0


def test_python_function_source(tmp_path: Path) -> None:
    script = tmp_path / "feeds.py"
    script.write_text(
        "import numpy as np\n"
        "def feeds():\n"
        "    for i in range(3):\n"
        "        yield {'input': np.full((2, 16), i, np.float32)}, np.array([i, i])\n"
    )
    samples = load_samples(VECTOR, f"{script}:feeds")
    assert samples.count == 6 and samples.labels is not None and samples.labels.tolist() == [0, 0, 1, 1, 2, 2]
    with pytest.raises(UsageError, match="no function"):
        load_samples(VECTOR, f"{script}:missing")


def test_unknown_data_kind(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="neither a folder"):
        load_samples(VECTOR, str(tmp_path / "data.csv"))
    with pytest.raises(UsageError, match="does not exist"):
        load_samples(VECTOR, str(tmp_path / "missing.npz"))
