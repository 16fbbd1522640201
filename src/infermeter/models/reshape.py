"""`--reshape NAME:DIMS`: dims a model file declares fixed, rewritten before the model is loaded.

Some exporters bake the dummy shape used at export into the file (a detector declared `[10, 3, 32, 32]` that its
own application reshapes to `[1, 3, 480, 640]` at load time). `--input` never overrides a fixed dim (it sizes the
symbolic ones); `--reshape` does, explicitly, the way the model's own application does:

- ONNX: `onnx.tools.update_model_dims` on the inputs (the outputs made symbolic), stale intermediate shapes
  dropped, then ONNX shape inference; the result is written into the converted-model cache, keyed by the file's
  content and the new dims, and every engine loads that file.
- OpenVINO IR: `openvino.Model.reshape`, saved into the cache the same way (`openvino.save_model`).

The spec keeps the user's `ref` and records the override (`ModelSpec.reshape`, and the declared dims in
`declared`); its content hash covers the override, and cases carry it in their identity, so a reshaped model's
results never pair with the declared one's. `reshape_notes` is the warning each command shows once. A dim the
graph's own constants fix (a Reshape to a constant shape) is not checked here: the engine's own message says so
when it loads the model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from infermeter.core.errors import InputSpecError, ModelError, UsageError, engine_message
from infermeter.models.input_flags import Sizes, join_pieces, parse_input_override, unknown_input
from infermeter.models.spec import ModelSpec

_VERSION = 2  # of the rewrite: part of the cache key


def parse_reshape(texts: Iterable[str]) -> Sizes:
    """`--reshape` flags (`NAME:DIMS`, names may hold colons) as (name, dims) pairs."""
    sizes = [parse_input_override(text, "--reshape") for text in join_pieces(texts)]
    names = [name for name, _ in sizes]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"--reshape gives {', '.join(twice)} two shapes; give each input once")
    return tuple(sizes)


def reshape_notes(spec: ModelSpec) -> list[str]:
    """The warning a command shows once for a reshaped model: what the file declared and what runs instead."""
    if not spec.reshape:
        return []
    given = dict(spec.reshape)
    changes = "; ".join(
        f"{name} [{', '.join(map(str, dims))}] -> [{', '.join(map(str, given[name]))}]" for name, dims in spec.declared
    )
    return [f"--reshape: {spec.ref} declared other dims ({changes}); running the model reshaped, as its dims were "
            "rewritten (a dim the graph's constants fix fails in the engine)"]  # fmt: skip


def reshape_model(spec: ModelSpec, reshape: Sizes) -> ModelSpec:
    """`spec` with the inputs of `reshape` rewritten to their dims (see the module docstring)."""
    by_name = {item.name: item for item in spec.inputs}
    for name, dims in reshape:
        if name not in by_name:
            raise unknown_input("--reshape", name, by_name)
        if len(dims) != len(by_name[name].shape):
            raise InputSpecError(
                f"--reshape {name}: {len(dims)} dims given, but the model's input is {by_name[name].describe()}"
            )
    if spec.kind not in ("onnx", "openvino_ir") or not spec.path:
        raise UsageError(
            f"--reshape rewrites the dims an ONNX or OpenVINO IR file declares; {spec.ref} is a {spec.kind} model "
            "(size its inputs with --batch and --input)"
        )
    from infermeter.models.convert import cached_build

    key = {"model": spec.content_hash, "reshape": [[n, list(d)] for n, d in reshape], "v": _VERSION}  # by content
    # A folder entry: an IR's .bin (and a large ONNX file's external data) must stay beside the graph.
    name = "model.onnx" if spec.kind == "onnx" else "model.xml"
    rewrite = _rewrite_onnx if spec.kind == "onnx" else _rewrite_ir
    source = Path(spec.path)
    try:
        built = cached_build("reshaped", key, "/", lambda folder: rewrite(source, reshape, folder / name))
    except Exception as exc:
        raise ModelError(f"--reshape could not rewrite {spec.ref}: {engine_message(exc)}") from exc
    given = dict(reshape)
    inputs = tuple(replace(item, shape=given[item.name]) if item.name in given else item for item in spec.inputs)
    digest = hashlib.sha256(f"{spec.content_hash}:{key['reshape']}".encode()).hexdigest()[:16]
    declared = tuple((name, by_name[name].shape) for name, _ in reshape)
    path = str(built.path / name)
    return replace(spec, inputs=inputs, path=path, content_hash=digest, reshape=reshape, declared=declared)


def _rewrite_onnx(source: Path, reshape: Sizes, target: Path) -> str:
    import onnx
    from onnx.tools.update_model_dims import update_inputs_outputs_dims

    model = onnx.load(str(source))
    given = dict(reshape)
    # Every graph input, weights listed as inputs too (old exporters do): update_model_dims wants each one.
    current = {value.name: _dims(value) for value in model.graph.input}
    outputs = {value.name: _dims(value) for value in model.graph.output}
    # Two passes: update_model_dims refuses to change a fixed dim, so the reshaped inputs and every output are
    # made symbolic first, then given their sizes (the outputs stay symbolic: shape inference fills them in).
    loose = {name: ([-1] * len(dims) if name in given else dims) for name, dims in current.items()}
    update_inputs_outputs_dims(model, loose, {name: [-1] * len(dims) for name, dims in outputs.items()})
    final = {name: list(given.get(name, dims)) for name, dims in current.items()}
    update_inputs_outputs_dims(model, final, {value.name: _dims(value) for value in model.graph.output})
    del model.graph.value_info[:]  # intermediate shapes inferred for the declared dims
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        note = "shapes inferred"
    except Exception as exc:  # the engine decides; its own message will say what does not fit
        model = onnx.shape_inference.infer_shapes(model)
        note = f"ONNX shape inference disagreed: {engine_message(exc, 200)}"
    large = model.ByteSize() > 1_500_000_000
    onnx.save_model(model, str(target), save_as_external_data=large, location=f"{target.name}.data")
    return f"reshaped {', '.join(f'{n}:{list(d)}' for n, d in reshape)} (onnx.tools.update_model_dims); {note}"


def _dims(value: Any) -> list[Any]:
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or -1) for d in value.type.tensor_type.shape.dim]


def _rewrite_ir(source: Path, reshape: Sizes, target: Path) -> str:
    import openvino as ov

    model = ov.Core().read_model(str(source))
    given = dict(reshape)
    shapes = {port.get_any_name(): port.get_partial_shape() for port in model.inputs}
    model.reshape({name: ov.PartialShape(list(given[name])) if name in given else shape
                   for name, shape in shapes.items()})  # fmt: skip
    ov.save_model(model, str(target), compress_to_fp16=False)
    return f"reshaped {', '.join(f'{n}:{list(d)}' for n, d in reshape)} (openvino Model.reshape)"
