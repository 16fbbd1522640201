"""The third arm of the benchmark_app cross-check (benchmarks/frameworks.py): OpenVINO timed by a plain Python loop
with no infermeter measurement code -- the same ONNX, shapes, properties and input sets infermeter uses, each
`infer` call timed on its own. If infermeter differs from benchmark_app but not from this loop, the difference is
between OpenVINO's Python API and its C++ tool, not in infermeter's harness.

    python benchmarks/openvino_plain_loop.py MODEL BATCH THREADS SECONDS [--seq-len 128]
prints the median latency in ms.
"""

from __future__ import annotations

import argparse
import statistics
import time

from infermeter.measure.plan import seq_overrides
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import generate_feeds, resolve_shapes
from infermeter.models.resolve import resolve_model

WARMUP_CALLS = 10
INPUT_SETS = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("batch", type=int)
    parser.add_argument("threads", type=int)
    parser.add_argument("seconds", type=float)
    parser.add_argument("--seq-len", type=int, default=128, help="size of a text model's `seq` dimension")
    args = parser.parse_args()

    import openvino as ov

    spec = resolve_model(args.model)
    shapes = resolve_shapes(spec.inputs, args.batch, seq_overrides(spec, args.batch, args.seq_len))
    sets = generate_feeds(spec.inputs, shapes, INPUT_SETS)
    core = ov.Core()
    model = core.read_model(str(onnx_for(spec).path))
    model.reshape({name: list(dims) for name, dims in shapes.items()})
    config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": args.threads}
    request = core.compile_model(model, "CPU", config).create_infer_request()
    for index in range(WARMUP_CALLS):
        request.infer(sets[index % INPUT_SETS], share_inputs=True)
    latencies_ms: list[float] = []
    end = time.perf_counter() + args.seconds
    index = 0
    while time.perf_counter() < end:
        start_ns = time.perf_counter_ns()
        request.infer(sets[index % INPUT_SETS], share_inputs=True)
        latencies_ms.append((time.perf_counter_ns() - start_ns) / 1e6)
        index += 1
    print(f"{statistics.median(latencies_ms):.4f}")


if __name__ == "__main__":
    main()
