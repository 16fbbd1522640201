"""Running a model file over samples (ONNX Runtime for .onnx, OpenVINO for .xml) and scoring a quantized
model against its FP32 original: task metric with labels, agreement with FP32 without."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infermeter.core.errors import BackendError, ModelError, UsageError, describe_exception
from infermeter.models.samples import SampleSet
from infermeter.quantize import accuracy_metrics as metrics
from infermeter.results.records.accuracy import Accuracy as Accuracy  # importable from here, as before records

EMBEDDING_TASKS = ("embedding", "sentence-embedding", "feature-extraction")


class ModelRunner:
    """One loaded model file (ONNX Runtime for .onnx, OpenVINO for .xml) that maps samples to its first output."""

    def __init__(self, path: Path, threads: int = 1, optimize: bool = True) -> None:
        """`optimize` False runs an ONNX graph as written (an emulated reduced-precision graph: a fusion would
        remove its casts)."""
        self.path = path
        self._kind = "openvino" if path.suffix.lower() == ".xml" else "onnx"
        try:
            if self._kind == "onnx":
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                options.log_severity_level = 3
                if not optimize:
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                self._ort: Any = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                fixed = _fixed_batch([(i.name, list(i.shape)) for i in self._ort.get_inputs()])
                self.output_names = [o.name for o in self._ort.get_outputs()]
            else:
                import openvino as ov

                core = ov.Core()
                model = core.read_model(str(path))
                fixed = _fixed_batch([(p.get_any_name(), _ov_dims(p.get_partial_shape())) for p in model.inputs])
                # f32 for the layers a graph leaves in float: the CPU plugin's default is bf16 on AMX/AVX512-BF16 CPUs.
                config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
                self._compiled: Any = core.compile_model(model, "CPU", config)
                self.output_names = [o.get_any_name() for o in model.outputs]
        except ImportError as exc:
            from infermeter.core.extras import MODULE_EXTRAS, install_line

            extra = MODULE_EXTRAS.get((exc.name or "").split(".")[0])
            hint = install_line(extra) if extra else f"pip install {exc.name}"
            raise UsageError(f"running {path.name} needs {exc.name}: {hint}") from exc
        except Exception as exc:
            raise BackendError(f"could not load {path}: {describe_exception(exc)}") from exc
        self.fixed_batch: int | None = fixed

    @classmethod
    def of_compiled(cls, compiled: Any) -> ModelRunner:
        """A runner over an already compiled `openvino.CompiledModel` (what NNCF hands its validation function)."""
        runner = cls.__new__(cls)
        runner.path, runner._kind, runner._compiled = Path("<compiled>"), "openvino", compiled
        runner.output_names = [o.get_any_name() for o in compiled.outputs]
        runner.fixed_batch = _fixed_batch(
            [(p.get_any_name(), _ov_dims(p.get_partial_shape())) for p in compiled.inputs]
        )
        return runner

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The first output for one batch of feeds. An engine that refuses them raises BackendError with its own
        message and the shapes fed: inputs whose symbolic dims have different names but must agree (input_ids'
        `sequence` and attention_mask's `attention_mask_dim1`) are sized apart unless `--input` gives each."""
        try:
            if self._kind == "onnx":
                return np.asarray(self._ort.run(self.output_names[:1], feeds)[0])
            result = self._compiled(feeds)
            return np.asarray(result[self._compiled.outputs[0]])
        except Exception as exc:
            shapes = ", ".join(f"{name}:{'x'.join(map(str, array.shape))}" for name, array in feeds.items())
            raise BackendError(
                f"{self.path.name} did not run on the samples ({shapes}): {describe_exception(exc)}; if inputs "
                "must agree in a dim, give each its shape with --input NAME:DIMS"
            ) from exc

    def predict(self, samples: SampleSet, batch_size: int = 64) -> np.ndarray:
        """The first output for every sample, concatenated; token states are mean-pooled into embeddings."""
        size = self.fixed_batch or batch_size
        outputs = []
        # A fixed-batch model gets its last batch padded; the padding's outputs are dropped.
        starts = range(0, samples.count, size)
        for start, feeds in zip(starts, samples.batches(size, pad=bool(self.fixed_batch)), strict=True):
            count = min(size, samples.count - start)
            out = self.run(feeds)[:count]
            if out.ndim == 3:
                mask = next((v[:count] for k, v in feeds.items() if "mask" in k.lower()), None)
                out = metrics.mean_pool(out, mask)
            outputs.append(out)
        if len({o.shape[1:] for o in outputs}) > 1:
            shapes = sorted({str(list(o.shape[1:])) for o in outputs})
            raise ModelError(
                f"{self.path.name}: its first output changes shape from batch to batch ({', '.join(shapes)}): its "
                "size follows the computed values, so its outputs cannot be scored element by element"
            )
        return np.concatenate(outputs)


def _ov_dims(shape: Any) -> list[int | None]:
    return [d.get_length() if d.is_static else None for d in shape] if shape.rank.is_static else []


def _fixed_batch(inputs: list[tuple[str, list[Any]]]) -> int | None:
    """The batch a model file fixes, by the rule of `models.inputs.fixed_batch` (a control vector is no batch)."""
    from infermeter.models.inputs import InputSpec, fixed_batch

    specs = [
        InputSpec(name, "float32", shape=tuple(d if isinstance(d, int) else "?" for d in dims)) for name, dims in inputs
    ]
    found = fixed_batch([s if s.shape else InputSpec(s.name, s.dtype, shape=(), batch_axis=None) for s in specs])
    return found[1] if found else None


def task_kind(task: str, output: np.ndarray, has_labels: bool) -> str:
    """`classification`, `embedding` or `generic`: which metric fits the model's first output."""
    if task in EMBEDDING_TASKS:
        return "embedding"
    if output.ndim == 2 and (task == "classification" or has_labels):
        return "classification"
    return "generic"


def score(kind: str, fp32: np.ndarray, quantized: np.ndarray, labels: np.ndarray | None) -> Accuracy:
    """The quantized outputs scored against FP32's: top-1 with labels for classifiers, else agreement. ModelError
    when their shapes differ: an output whose size follows the values (a TTS model's audio) has no element-wise
    agreement to score."""
    if fp32.shape != quantized.shape:
        raise ModelError(
            f"the quantized model's first output has shape {list(quantized.shape)}, FP32's {list(fp32.shape)}: its "
            "size follows the computed values, so the two cannot be compared element by element (score it with a "
            "task metric of your own on the written model)"
        )
    cosines = metrics.cosine_similarities(quantized, fp32)
    details = {
        "cosine_mean": float(cosines.mean()),
        "cosine_min": float(cosines.min()),
        "sqnr_db": metrics.sqnr_db(quantized, fp32),
    }
    count = fp32.shape[0]
    if fp32.ndim == 2 and fp32.shape[1] > 1:  # class scores, or something like them: top-1 agreement is telling
        details["top1_agreement"] = metrics.top1_agreement(quantized, fp32)
    if kind == "classification":
        if labels is not None:
            value, reference, name = (
                metrics.top1_accuracy(quantized, labels),
                metrics.top1_accuracy(fp32, labels),
                "top1",
            )
        else:
            value, reference, name = details["top1_agreement"], 1.0, "top1_agreement"
    else:
        if kind == "embedding":
            details["retrieval_agreement"] = metrics.retrieval_agreement(quantized, fp32)
        value, reference, name = details["cosine_mean"], 1.0, "cosine"
    return Accuracy(name, value, reference, (reference - value) * 100.0, count, details)
