"""TorchScript archives (`torch.jit.save`): a zip with the model's TorchScript code (`code/`) and its constants, not a
pickle of arbitrary Python objects. Opened with `torch.jit.load` and run on the torch engines.

An archive keeps its inputs' names (the `forward` schema) but not their shapes, so each input's shape is given with
`--reshape NAME:DIMS` (the flag that declares dims a file does not); dim 0 is the batch axis (`--batch` sizes it)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from infermeter.core.errors import ModelError
from infermeter.models.inputs import InputSpec
from infermeter.models.spec import ModelSpec, file_sha256


def is_torchscript(path: Path) -> bool:
    """True when `path` is a TorchScript archive: a zip holding TorchScript code and constants (`torch.save`'s zip
    holds neither)."""
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    return any(n.endswith("/constants.pkl") for n in names) and any("/code/" in n for n in names)


def _input_names(path: Path) -> list[str]:
    import torch

    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:
        raise ModelError(f"{path} is a TorchScript archive that torch.jit.load could not open: {exc}") from exc
    arguments = module.forward.schema.arguments[1:]  # [0] is self
    return [argument.name for argument in arguments]


def torchscript_spec(ref: str, path: Path, reshape: tuple[tuple[str, tuple[int, ...]], ...]) -> ModelSpec:
    """The spec of a TorchScript archive, its inputs shaped by `reshape` (`--reshape NAME:DIMS`, one per input)."""
    names = _input_names(path)
    given = dict(reshape)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ModelError(f"--reshape {unknown[0]}: {path} has no such input (its inputs: {', '.join(names)})")
    missing = [name for name in names if name not in given]
    if missing:
        example = " ".join(f"--reshape {name}:1x3x224x224" for name in missing)
        raise ModelError(
            f"{path} is a TorchScript archive: it keeps its inputs' names ({', '.join(names)}) but not their "
            f"shapes; give each one, e.g. {example}"
        )
    inputs = tuple(
        InputSpec(name, "float32", shape=("batch", *given[name][1:]), dim_defaults=(("batch", given[name][0]),))
        for name in names
    )
    return ModelSpec(
        ref=ref,
        name=path.stem,
        kind="torchscript",
        inputs=inputs,
        output_names=("output",),
        content_hash=file_sha256(path)[:16],
        path=str(path.resolve()),
    )


def load_torchscript_module(spec: ModelSpec) -> Any:
    """The archive's module (`torch.jit.load`, on the CPU) in eval mode."""
    import torch

    assert spec.path is not None
    return torch.jit.load(spec.path, map_location="cpu").eval()
