"""ModelSpec: what a model is, independent of any framework; an ONNX file read into one. A user's MODEL argument
resolves to one in `models.resolve`; its torch form is built in `models.torch_form`."""

from __future__ import annotations

import hashlib
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.core.errors import MissingExtra, ModelError
from infermeter.models.inputs import Dim, InputSpec

if TYPE_CHECKING:
    pass


# Kinds that exist only as a graph file of one format: no torch form to export from.
GRAPH_FILE_KINDS = ("onnx", "tflite", "openvino_ir")


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model: its identity (`content_hash`), inputs and outputs, and where it comes from.

    `kind` is `zoo` (built-in, defined in code), `onnx` (a user .onnx file), `python` (`file.py:factory` or
    `package.module:factory`), `pt2` (a torch.export program; see `models/sources.py`), `hf` (a Hugging Face
    model folder; see `models/hf_folder.py`), `tflite` or `openvino_ir` (an OpenVINO IR .xml + .bin; see
    `models/openvino_ir.py`).
    Picklable, so that it can be handed to an isolated worker process.
    """

    ref: str
    name: str
    _: KW_ONLY  # the rest by keyword
    kind: str
    inputs: tuple[InputSpec, ...]
    output_names: tuple[str, ...]
    content_hash: str
    task: str = "generic"
    path: str | None = None
    precision: str | None = None  # what the file itself computes in (int8: a quantized graph); None: no file
    reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()  # `--reshape` dims written over the declared ones
    declared: tuple[tuple[str, tuple[Dim, ...]], ...] = ()  # the reshaped inputs' dims as the file declared them

    @property
    def default_precision(self) -> str:
        """The precision a case asks for when none is given: the model's own when it is INT8 by design (asking a
        quantized graph for fp32 asks for what does not exist), else fp32."""
        return "int8" if self.precision == "int8" else "fp32"

    @property
    def has_torch_form(self) -> bool:
        """True when the model exists as a torch module (zoo or Python source), not only as a graph file."""
        return self.kind not in GRAPH_FILE_KINDS


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks (model files can be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


_ONNX_DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
    16: "bfloat16",
}


def _onnx_spec(ref: str, path: Path) -> ModelSpec:
    try:
        import onnx
    except ImportError as exc:
        from infermeter.core.extras import install_line

        # onnx comes with every engine extra that reads ONNX; onnxruntime's is the smallest.
        raise MissingExtra(f"reading .onnx files needs the onnx package: {install_line('onnxruntime')}") from exc
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist")
    try:
        # Weights can live in external data files; the graph alone says what the inputs are.
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise ModelError(f"{path} is not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    if len(model.graph.node) == 0:
        raise ModelError(f"{path} holds no graph nodes: it is not a usable ONNX model (truncated or corrupt?)")
    initializer_names = {init.name for init in model.graph.initializer}
    inputs: list[InputSpec] = []
    for value in model.graph.input:
        if value.name in initializer_names:  # old exporters list weights as inputs too
            continue
        tensor_type = value.type.tensor_type
        # A string input (a tokenizer inside the graph) takes texts from --data (`models.samples`).
        dtype = "str" if tensor_type.elem_type == 8 else _ONNX_DTYPES.get(tensor_type.elem_type)
        if dtype is None:
            raise ModelError(unsupported_input(path, model, value.name, tensor_type.elem_type))
        dims: list[Dim] = []
        for axis, dim in enumerate(tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                dims.append(int(dim.dim_value))
            else:
                dims.append(dim.dim_param or f"{value.name}_dim{axis}")
        inputs.append(InputSpec(value.name, dtype, shape=tuple(dims), batch_axis=0 if dims else None))
    outputs = tuple(out.name for out in model.graph.output)
    return ModelSpec(
        ref=ref,
        name=path.stem,
        kind="onnx",
        inputs=tuple(inputs),
        output_names=outputs,
        content_hash=file_sha256(path)[:16],
        path=str(path.resolve()),
        precision=onnx_precision(model.graph),
    )


# Custom-operator domains of onnxruntime-extensions (tokenizers, string and audio ops) -> its pip name.
_EXTENSION_DOMAINS = {"ai.onnx.contrib": "onnxruntime-extensions"}


def unsupported_input(path: Path, model: Any, name: str, elem_type: int) -> str:
    """Why an ONNX input of this element type cannot be fed, by its ONNX name (not its number), with the library
    the graph's custom operators need. (A string input is fed: texts from --data.)"""
    import onnx

    custom = sorted({node.op_type for node in model.graph.node if node.domain in _EXTENSION_DOMAINS})
    needs = (f"; its custom operators ({', '.join(custom[:5])}) need onnxruntime-extensions "
             "(pip install onnxruntime-extensions)") if custom else ""  # fmt: skip
    type_name = (
        onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
    )
    return f"{path}: input {name!r} has ONNX element type {type_name}, which infermeter cannot feed{needs}"


# Operators only a quantized graph holds: QDQ pairs, ONNX Runtime's QLinear* and the *Integer ops.
_QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"}
_INT8_WEIGHT_ELEMENTS = 64  # int8 initializers this large are quantized weights, not an index table


def onnx_precision(graph: Any) -> str:
    """What an ONNX graph computes in, from the graph itself (no weights read): int8 when it holds quantization
    operators (QDQ pairs, QLinear*, *Integer) or int8 weights, fp16/bf16 when most of its float weight elements
    are stored so, else fp32."""
    if any(node.op_type in _QUANT_OPS or node.op_type.startswith("QLinear") for node in graph.node):
        return "int8"
    for init in graph.initializer:
        if init.data_type == 3 and _elements(init.dims) >= _INT8_WEIGHT_ELEMENTS:
            return "int8"
    # By weight elements: a mixed FP16 graph keeps a few layers' (small) weights in FP32 and is still FP16.
    elements = {1: 0, 10: 0, 16: 0}
    for init in graph.initializer:
        if init.data_type in elements:
            elements[init.data_type] += _elements(init.dims)
    stored = max(elements, key=elements.__getitem__)
    return {10: "fp16", 16: "bf16"}.get(stored, "fp32") if elements[stored] else "fp32"


def onnx_graph_precision(path: str) -> str:
    """The precision an ONNX graph computes in, read from the graph itself (`onnx_precision`)."""
    import onnx

    return onnx_precision(onnx.load(path, load_external_data=False).graph)


def _elements(dims: Any) -> int:
    count = 1
    for dim in dims:
        count *= int(dim)
    return count


class NoTorchForm(ModelError):
    """A model that exists only as a graph file (ONNX, TFLite, OpenVINO IR) was asked for its torch form. It carries
    the file's `suffix`, so that the command line names the backends that read such a file as it is
    (`backends.registry.readers_hint`): models sit below the backends and cannot list them."""

    def __init__(self, message: str, suffix: str = "") -> None:
        super().__init__(message)
        self.suffix = suffix

    def __reduce__(self) -> tuple[type[NoTorchForm], tuple[str, str]]:
        # A worker's error crosses to its parent pickled: keep the suffix, not only the message.
        return type(self), (str(self), self.suffix)
