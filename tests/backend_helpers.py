"""Helpers for backend tests: reference outputs and a real .tflite file built without TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infermeter.build.case_build import open_session
from infermeter.core.case import Case, MeasureSettings
from infermeter.models.inputs import generate_feeds, resolve_shapes
from infermeter.models.spec import ModelSpec

# No precision target: these tests check what a case records, not how long it takes to be precise.
FAST = MeasureSettings(
    warmup_iterations=2, min_iterations=5, min_time_s=0.0, max_time_s=5.0, input_sets=2, target_ci=0.0
)


def feeds_for(spec: ModelSpec, case: Case) -> dict[str, np.ndarray]:
    """One deterministic feed set of the case's shapes."""
    return generate_feeds(spec.inputs, resolve_shapes(spec.inputs, case.batch, case.input_shapes), 1, seed=7)[0]


def outputs_of(spec: ModelSpec, case: Case, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Load `case`'s backend, run once on `feeds`, return numpy outputs (the session is closed)."""
    session = open_session(spec, case)
    try:
        return session.outputs_to_numpy(session.run(session.prepare(feeds)))
    finally:
        session.close()


def torch_reference(spec: ModelSpec, case: Case, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The torch eager fp32 outputs for `feeds`: what every backend must agree with in fp32."""
    from dataclasses import replace

    return outputs_of(spec, replace(case, backend="torch", precision="fp32", options=()), feeds)


def write_tflite_mlp(
    path: Path, weights: list[tuple[np.ndarray, np.ndarray]], features: int, int8_weights: bool = False
) -> Path:
    """Write a real .tflite flatbuffer (LiteRT's own schema) for an MLP: FULLY_CONNECTED layers with fused
    ReLU between them, a dynamic batch axis. `weights` holds (W [out, in], b [out]) per layer. `int8_weights`:
    the weights stored as quantized int8 tensors (a scale per tensor), as a converter's dynamic-range
    quantization writes them (hybrid kernels: float activations, int8 weights)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    buffers = [schema.BufferT()]  # buffer 0 is the empty sentinel tensors without data point to
    tensors = []

    def add_tensor(
        name: str, shape: list[int], data: np.ndarray | None, signature: list[int] | None = None, q: bool = False
    ) -> int:
        tensor = schema.TensorT()
        tensor.name, tensor.shape, tensor.type = name, shape, schema.TensorType.FLOAT32
        tensor.shapeSignature = signature
        tensor.buffer = 0
        if data is not None:
            buffer = schema.BufferT()
            buffer.data = np.ascontiguousarray(data, dtype=np.float32).tobytes()
            if q:
                scale = float(np.abs(data).max()) / 127 or 1.0
                tensor.type = schema.TensorType.INT8
                tensor.quantization = schema.QuantizationParametersT()
                tensor.quantization.scale, tensor.quantization.zeroPoint = [scale], [0]
                buffer.data = np.clip(np.round(data / scale), -127, 127).astype(np.int8).tobytes()
            buffers.append(buffer)
            tensor.buffer = len(buffers) - 1
        tensors.append(tensor)
        return len(tensors) - 1

    current = add_tensor("input", [1, features], None, [-1, features])
    first_input = current
    operators = []
    for layer, (weight, bias) in enumerate(weights):
        w = add_tensor(f"w{layer}", list(weight.shape), weight, q=int8_weights)
        b = add_tensor(f"b{layer}", list(bias.shape), bias)
        last = layer == len(weights) - 1
        out = add_tensor("logits" if last else f"hidden{layer}", [1, weight.shape[0]], None, [-1, weight.shape[0]])
        options = schema.FullyConnectedOptionsT()
        options.fusedActivationFunction = (
            schema.ActivationFunctionType.NONE if last else schema.ActivationFunctionType.RELU
        )
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = 0, [current, w, b], [out]
        op.builtinOptionsType, op.builtinOptions = schema.BuiltinOptions.FullyConnectedOptions, options
        operators.append(op)
        current = out
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.FULLY_CONNECTED
    code.version = 3 if int8_weights else 1  # hybrid (int8-weight) kernels came with version 3
    subgraph = schema.SubGraphT()
    subgraph.tensors, subgraph.inputs, subgraph.outputs, subgraph.operators = (
        tensors,
        [first_input],
        [current],
        operators,
    )
    subgraph.name = "main"
    model = schema.ModelT()
    model.version, model.operatorCodes, model.subgraphs, model.buffers = 3, [code], [subgraph], buffers
    model.description = "infermeter test MLP"
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    path.write_bytes(bytes(builder.Output()))
    return path
