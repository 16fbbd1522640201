"""INT8 vs FP32 latency of resnet18, batch 1, ONNX Runtime CPU (target: INT8 >= 2.5x faster).

Speed only: the zoo's resnet18 has seeded random weights, so it is calibrated on random inputs and its accuracy
is not a figure (see quantize_digits.py and quantize_minilm.py for accuracy). Run on a quiet machine:
    python benchmarks/quantize_resnet18.py [--threads N] [--min-time S]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from infermeter.build.int8.ort_quant import QuantConfig, preprocess, quantize_onnx
from infermeter.core.case import MeasureSettings
from infermeter.models.convert import onnx_for
from infermeter.models.resolve import resolve_model
from infermeter.models.samples import random_samples
from infermeter.quantize.latency import measure_file
from infermeter.results.env import default_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--min-time", type=float, default=3.0)
    parser.add_argument("--per-channel", action="store_true")
    args = parser.parse_args()
    threads = args.threads or default_threads()
    spec = resolve_model("resnet18")
    source = onnx_for(spec).path
    settings = MeasureSettings(warmup_iterations=10, min_iterations=50, min_time_s=args.min_time, max_time_s=60)
    with tempfile.TemporaryDirectory() as scratch:
        prepared, int8 = Path(scratch) / "fp32.onnx", Path(scratch) / "int8.onnx"
        preprocess(source, prepared)
        quantize_onnx(prepared, int8, QuantConfig(per_channel=args.per_channel), random_samples(spec.inputs, 32, 1))
        rows = [
            ("fp32", measure_file(prepared, threads, settings=settings)),
            ("int8", measure_file(int8, threads, settings=settings)),
        ]
    for label, result in rows:
        assert result.latency_ms is not None, result.error
        print(f"resnet18 b1 onnxruntime {label}: P50 {result.latency_ms.p50:.3f} ms, "
              f"P99 {result.latency_ms.p99:.3f} ms, "
              f"effective {result.precision_effective}, {result.timing.iterations} iterations, "
              f"threads {threads}")  # fmt: skip
    fp32_ms, int8_ms = (r.latency_ms.p50 for _, r in rows if r.latency_ms is not None)
    print(f"INT8 speedup over FP32 (P50): {fp32_ms / int8_ms:.2f}x (target >= 2.5x)")


if __name__ == "__main__":
    main()
