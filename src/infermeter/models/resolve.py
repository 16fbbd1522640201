"""How a user's MODEL argument resolves to a `ModelSpec`: a zoo name, a model file of any format read by its own
reader, a Python factory, or a Hugging Face folder; `--reshape` applied after."""

from __future__ import annotations

from pathlib import Path

from infermeter.core.errors import ModelError
from infermeter.models.spec import ModelSpec, _onnx_spec
from infermeter.models.zoo import ZOO


def resolve_model(ref: str, reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> ModelSpec:
    """Turn a MODEL argument (a zoo name, an .onnx, .pt2, .tflite or OpenVINO IR .xml file, `file.py:factory` /
    `package.module:factory`, or a Hugging Face model folder) into a ModelSpec, or raise ModelError. Pickle
    checkpoints (.pt/.pth) are refused with the reason. `reshape` (`--reshape NAME:DIMS`) rewrites dims the file
    declares fixed (`models.reshape`)."""
    if Path(ref).suffix.lower() in (".pt", ".pth", ".ptl") and Path(ref).is_file():
        from infermeter.models.torchscript import is_torchscript, torchscript_spec

        if is_torchscript(Path(ref)):  # torch.jit.save's archive: TorchScript code, not arbitrary pickled objects
            return torchscript_spec(ref, Path(ref), reshape)
    spec = _resolve(ref)
    if not reshape:
        return spec
    from infermeter.models.reshape import reshape_model

    return reshape_model(spec, reshape)


def _resolve(ref: str) -> ModelSpec:
    if ref in ZOO:
        entry = ZOO[ref]
        return ModelSpec(
            ref=ref,
            name=entry.name,
            kind="zoo",
            inputs=entry.inputs,
            output_names=entry.output_names,
            content_hash=entry.content_hash,
            task=entry.task,
        )
    path = Path(ref)
    if path.is_dir():
        from infermeter.models.hf_folder import hf_spec

        return hf_spec(ref, path)
    if path.suffix.lower() == ".onnx":
        return _onnx_spec(ref, path)
    if path.suffix.lower() == ".tflite":
        from infermeter.models.tflite_spec import tflite_spec

        return tflite_spec(ref, path)
    if path.suffix.lower() == ".xml":
        from infermeter.models.openvino_ir import ir_spec

        return ir_spec(ref, path)
    from infermeter.models import sources

    if path.suffix.lower() == ".pt2":
        return sources.pt2_spec(ref, path)
    if path.suffix.lower() in sources.PICKLE_SUFFIXES:
        sources.refuse_pickle(path)
    if sources.parse_python_ref(ref) is not None:
        return sources.python_spec(ref)
    raise ModelError(
        f"unknown model {ref!r}: use a built-in model ({', '.join(sorted(ZOO))}; see `infermeter models`), "
        "a path to an .onnx, .pt2 or OpenVINO IR .xml file, a Hugging Face model folder, or "
        "path/to/file.py:factory or package.module:factory"
    )
