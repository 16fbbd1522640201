"""An explain record made in code for the report tests: two engines profiled and one not, blocks given out of
order (the renderer sorts them by difference), findings and a note."""

from __future__ import annotations

from infermeter.results.explain import Block, EngineSummary, ExplainRecord, Finding

# Block label -> (onnxruntime µs, openvino µs); the difference is their gap.
BLOCK_TIMES = {"conv_small": (40.0, 35.0), "matmul_hot": (900.0, 300.0), "relu_a": (5.0, 4.0), "pool": (60.0, 20.0)}
# The blocks as the report must list them: largest difference first.
BY_DIFFERENCE = ["matmul_hot", "pool", "conv_small", "relu_a"]


def _engine(name: str, p50_us: float, attributed_us: float | None, notes: list[str]) -> EngineSummary:
    profiled = attributed_us is not None
    return EngineSummary(
        name,
        p50_us,
        attributed_us=attributed_us,
        data_movement_us=3.5 if profiled else None,
        unattributed_us=p50_us - attributed_us if attributed_us is not None else None,
        profiled=profiled,
        precision="fp32",
        coverage=1.0 if profiled else None,
        uncovered_nodes=[],
        folded_nodes=[],
        notes=notes,
        warnings=[],
        error=None,
    )


def _block(node: str, times: tuple[float, float], total_difference: float) -> Block:
    difference = abs(times[0] - times[1])
    return Block(
        [node],
        ["MatMul" if "matmul" in node else "Conv"],
        time_us={"onnxruntime": times[0], "openvino": times[1]},
        kernels={"onnxruntime": "MatMul (CPU, fp32)", "openvino": "FullyConnected gemm_mlas_f32 (fp32)"},
        share={"onnxruntime": times[0] / 1100.0, "openvino": times[1] / 420.0},
        units={"onnxruntime": 1, "openvino": 1},
        difference_us=difference,
        difference_share=difference / total_difference,
    )


def explain_record() -> ExplainRecord:
    """The crafted record."""
    total = sum(abs(a - b) for a, b in BLOCK_TIMES.values())
    engines = [
        _engine("onnxruntime", 1100.0, 1005.0, []),
        _engine("openvino", 420.0, 359.0, []),
        _engine("tflite", 2000.0, None, ["tflite gives no per-unit profile here: end-to-end time only"]),
    ]
    return ExplainRecord(
        "planted.onnx",
        16,
        threads=1,
        precision="fp32",
        iterations=30,
        engines=engines,
        blocks=[_block(name, times, total) for name, times in BLOCK_TIMES.items()],
        findings=[
            Finding("matmul_hot", "onnxruntime", "block_dominates", "block matmul_hot takes 82% of onnxruntime's time"),
            Finding("", "openvino", "layout_conversions", "openvino ran 1 data-movement units: 4 µs"),
        ],
        node_count=4,
        notes=["no FLOPs per block: crafted"],
    )
