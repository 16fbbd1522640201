"""User model sources with a PyTorch form: `file.py:factory`, `package.module:factory`, `.pt2`; pickles refused.

A **factory** is a function called with no arguments that returns `(module, inputs)`:

- `module`: a `torch.nn.Module` (put into eval mode by infermeter). Its forward takes tensors and returns a tensor
  or a tuple/list of tensors.
- `inputs`, one of:
  - example tensors: a tensor, a tuple/list of tensors (passed positionally, named `input` or `input_0`,
    `input_1`, ...), or a dict name -> tensor (passed by keyword, in that order). Axis 0 is taken as the batch
    (symbolic `batch`); every other size is fixed to the example's. Integer examples set the value range that
    generated feeds use (min..max of the example).
  - an input spec: a list of `InputSpec`, or a dict name -> (dtype, shape) where dtype is a numpy dtype name
    ("float32", "int64", ...) and shape a tuple whose strings are symbolic dims, e.g.
    `{"x": ("float32", ("batch", 3, 224, 224))}`. Symbolic dims other than the batch need `--input` sizes.

The content hash is the SHA-256 of the source file's bytes plus the factory name: editing the file invalidates
every cached conversion of the model.

`.pt2` files are `torch.export` ExportedPrograms (`torch.export.save`): their inputs, dtypes and dynamic dims are
read from the program. Pickle-based checkpoints (`.pt`, `.pth`, `.pkl`, `.ckpt`) are opened only with
`torch.load(..., weights_only=True)`: a full pickled module needs arbitrary code to be run to rebuild it, so it is
refused with the way out (save a `.pt2`, or write a factory that builds the module and loads a state dict).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from infermeter.core.errors import InputSpecError, ModelError
from infermeter.models.inputs import Dim, InputSpec, generate_feeds, resolve_shapes

if TYPE_CHECKING:
    import torch

    from infermeter.models.spec import ModelSpec

PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".ckpt")
_MODULE_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_FACTORY_RE = re.compile(r"^[A-Za-z_][\w]*$")


def parse_python_ref(ref: str) -> tuple[str, str, str] | None:
    """`path/to/file.py:factory` -> ("file", path, factory); `pkg.mod:factory` -> ("module", "pkg.mod", factory);
    anything else -> None."""
    target, sep, factory = ref.rpartition(":")
    if not sep or not _FACTORY_RE.match(factory):
        return None
    if target.lower().endswith(".py"):
        return "file", target, factory
    if _MODULE_RE.match(target):
        return "module", target, factory
    return None


def _import_source(kind: str, target: str) -> tuple[Any, Path]:
    if kind == "file":
        path = Path(target)
        if not path.is_file():
            raise ModelError(f"model source {target!r} does not exist")
        name = "infermeter_user_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ModelError(f"{target} cannot be imported as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        # Registered (and its folder importable) so that classes defined there pickle and sibling imports work.
        sys.modules[name] = module
        folder = str(path.resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise ModelError(f"importing {target} failed: {type(exc).__name__}: {exc}") from exc
        return module, path
    try:
        module = importlib.import_module(target)
    except ImportError as exc:
        raise ModelError(f"cannot import module {target!r}: {exc} (is it on PYTHONPATH?)") from exc
    origin = getattr(module, "__file__", None)
    if not origin:
        raise ModelError(f"module {target!r} has no source file to identify the model by")
    return module, Path(origin)


def _call_factory(ref: str) -> tuple[Any, Any, Path, str]:
    parsed = parse_python_ref(ref)
    if parsed is None:
        raise ModelError(f"{ref!r} is not a model source; write path/to/file.py:factory or package.module:factory")
    kind, target, factory_name = parsed
    module, source_path = _import_source(kind, target)
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ModelError(f"{target} has no function {factory_name!r}")
    try:
        returned = factory()
    except Exception as exc:
        raise ModelError(f"{ref}: the factory raised {type(exc).__name__}: {exc}") from exc
    import torch

    if not (isinstance(returned, tuple | list) and len(returned) == 2 and isinstance(returned[0], torch.nn.Module)):
        raise ModelError(
            f"{ref}: the factory must return (nn.Module, inputs) where inputs are example tensors or an input "
            f"spec; it returned {type(returned).__name__}"
        )
    return returned[0], returned[1], source_path, factory_name


def _torch_dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _inputs_from(ref: str, given: Any) -> tuple[tuple[InputSpec, ...], bool]:
    """The InputSpecs a factory's `inputs` describe, and whether the module takes them by keyword."""
    import torch

    def from_tensor(name: str, tensor: torch.Tensor) -> InputSpec:
        shape: tuple[Dim, ...] = ("batch", *tensor.shape[1:]) if tensor.dim() else ()
        int_range = (0, 100)
        if not tensor.is_floating_point() and tensor.dtype != torch.bool and tensor.numel():
            int_range = (int(tensor.min()), int(tensor.max()) + 1)
        return InputSpec(
            name,
            _torch_dtype_name(tensor.dtype),
            shape=shape,
            int_range=int_range,
            batch_axis=0 if tensor.dim() else None,
        )

    if isinstance(given, torch.Tensor):
        return (from_tensor("input", given),), False
    if isinstance(given, dict) and given and all(isinstance(v, torch.Tensor) for v in given.values()):
        return tuple(from_tensor(str(k), v) for k, v in given.items()), True
    if isinstance(given, dict) and given:
        specs = []
        for name, value in given.items():
            if not (isinstance(value, tuple | list) and len(value) == 2 and isinstance(value[1], tuple | list)):
                raise ModelError(f"{ref}: input spec {name!r} must be (dtype, shape), got {value!r}")
            dtype, shape = value
            specs.append(InputSpec(str(name), str(dtype), shape=tuple(shape), batch_axis=0 if shape else None))
        return tuple(specs), False
    if isinstance(given, tuple | list) and given and all(isinstance(v, torch.Tensor) for v in given):
        names = ["input"] if len(given) == 1 else [f"input_{i}" for i in range(len(given))]
        return tuple(from_tensor(n, t) for n, t in zip(names, given, strict=True)), False
    if isinstance(given, tuple | list) and given and all(isinstance(v, InputSpec) for v in given):
        return tuple(given), False
    raise ModelError(
        f"{ref}: inputs must be example tensors (tensor, tuple or dict of tensors) or an input spec "
        f"(list of InputSpec, or dict name -> (dtype, shape)); got {type(given).__name__}"
    )


class KeywordInputs:
    """Marker base for a module wrapper that passes positional inputs to the user's module by keyword."""


def _keyword_wrapper(module: torch.nn.Module, names: tuple[str, ...]) -> torch.nn.Module:
    import torch

    class KeywordCall(torch.nn.Module, KeywordInputs):
        """Calls the wrapped module with its inputs by name (the factory gave them as a dict)."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *args: torch.Tensor) -> Any:
            return self.inner(**dict(zip(names, args, strict=True)))

    return KeywordCall()


def _output_count(module: torch.nn.Module, inputs: tuple[InputSpec, ...], example: Any) -> int:
    import torch

    try:
        if isinstance(example, torch.Tensor):
            args: tuple[Any, ...] = (example,)
        elif isinstance(example, tuple | list) and all(isinstance(v, torch.Tensor) for v in example):
            args = tuple(example)
        elif isinstance(example, dict) and all(isinstance(v, torch.Tensor) for v in example.values()):
            args = tuple(example.values())
        else:
            feeds = generate_feeds(inputs, resolve_shapes(inputs, 2), 1)[0]
            args = tuple(torch.from_numpy(feeds[i.name]) for i in inputs)
    except InputSpecError:
        return 1  # symbolic sizes unknown until --input: assume one output
    try:
        with torch.no_grad():
            out = module(*args)
    except Exception as exc:
        raise ModelError(f"the model failed on its own example inputs: {type(exc).__name__}: {exc}") from exc
    return len(out) if isinstance(out, tuple | list) else 1


def python_spec(ref: str) -> ModelSpec:
    """Resolve `file.py:factory` / `module:factory` by calling the factory once (to learn inputs and outputs)."""
    from infermeter.models.spec import ModelSpec, file_sha256

    module, given, source_path, factory_name = _call_factory(ref)
    inputs, by_keyword = _inputs_from(ref, given)
    module.eval()
    if by_keyword:
        module = _keyword_wrapper(module, tuple(i.name for i in inputs))
    count = _output_count(module, inputs, given)
    outputs = ("output",) if count == 1 else tuple(f"output_{i}" for i in range(count))
    digest = hashlib.sha256(f"{file_sha256(source_path)}:{factory_name}".encode()).hexdigest()[:16]
    return ModelSpec(
        ref=ref,
        name=f"{source_path.stem}.{factory_name}",
        kind="python",
        inputs=inputs,
        output_names=outputs,
        content_hash=digest,
        path=str(source_path.resolve()),
    )


def load_python_module(spec: ModelSpec) -> torch.nn.Module:
    """Build the module of a `python` spec again (in this process), in eval mode."""
    module, given, _, _ = _call_factory(spec.ref)
    inputs, by_keyword = _inputs_from(spec.ref, given)
    module.eval()
    return _keyword_wrapper(module, tuple(i.name for i in inputs)) if by_keyword else module


def _load_exported(path: Path) -> Any:
    import logging
    import zipfile

    import torch

    hint = "save one with torch.export.save(torch.export.export(model, args), 'model.pt2')"
    if not zipfile.is_zipfile(path):
        raise ModelError(f"{path} is not a readable torch.export program (not a zip archive: corrupt?); {hint}")
    # torch.export.load logs a traceback of its first loading attempt before trying the next; the error below says it.
    logger = logging.getLogger("torch.export")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        return torch.export.load(str(path))
    except Exception as exc:
        raise ModelError(
            f"{path} is not a readable torch.export program ({type(exc).__name__}: {str(exc)[:200]}); {hint}"
        ) from exc
    finally:
        logger.setLevel(level)


def _bounds(value_range: Any) -> tuple[int, int]:
    # torch's ValueRanges hold sympy numbers; an unbounded side is an (int) infinity that int() refuses.
    def as_int(bound: Any, default: int) -> int:
        try:
            return int(bound)
        except (TypeError, ValueError, OverflowError, AttributeError):
            return default

    if value_range is None:
        return 1, 1 << 30
    return as_int(value_range.lower, 1), as_int(value_range.upper, 1 << 30)


def pt2_spec(ref: str, path: Path) -> ModelSpec:
    """Resolve a `.pt2` ExportedProgram: inputs (names, dtypes, dynamic dims) come from the program itself."""
    from infermeter.models.spec import ModelSpec, file_sha256

    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist")
    program = _load_exported(path)
    user_inputs = list(program.graph_signature.user_inputs)
    values = {n.name: n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"}
    ranges = {str(sym): bounds for sym, bounds in program.range_constraints.items()}
    inputs = []
    for name in user_inputs:
        value = values.get(name)
        if value is None or not hasattr(value, "shape"):
            raise ModelError(f"{path}: input {name!r} is not a tensor; infermeter feeds tensors only")
        dims: list[Dim] = []
        defaults: list[tuple[str, int]] = []
        for axis, size in enumerate(value.shape):
            if isinstance(size, int):
                dims.append(size)
                continue
            label = "batch" if axis == 0 else f"{name}_dim{axis}"
            dims.append(label)
            lower, upper = _bounds(ranges.get(str(size)))
            defaults.append((label, min(max(lower, 8), upper)))
        inputs.append(
            InputSpec(
                name, _torch_dtype_name(value.dtype), shape=tuple(dims), dim_defaults=tuple(defaults), batch_axis=0
            )
        )
    count = len(program.graph_signature.user_outputs)
    outputs = ("output",) if count == 1 else tuple(f"output_{i}" for i in range(count))
    return ModelSpec(
        ref=ref,
        name=path.stem,
        kind="pt2",
        inputs=tuple(inputs),
        output_names=outputs,
        content_hash=file_sha256(path)[:16],
        path=str(path.resolve()),
    )


def load_exported_program(spec: ModelSpec) -> Any:
    """The `torch.export.ExportedProgram` of a `pt2` spec."""
    assert spec.path is not None
    return _load_exported(Path(spec.path))


def load_pt2_module(spec: ModelSpec) -> torch.nn.Module:
    """A `pt2` spec as a callable module (the program's graph module; it is already in inference form)."""
    return load_exported_program(spec).module()  # type: ignore[no-any-return]


def refuse_pickle(path: Path) -> NoReturn:
    """Open a pickle-based checkpoint with `weights_only=True` only, and say why it cannot be used as a model."""
    import torch

    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist")
    try:
        loaded = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
        what = f" (it needs {found.group(1)})" if found else ""
        raise ModelError(
            f"{path} is a pickle holding arbitrary Python objects{what}; infermeter opens checkpoints only with "
            "torch.load(weights_only=True), because unpickling anything else runs code from the file. Save the model "
            "as a torch.export program (torch.export.save(torch.export.export(model, args), 'model.pt2')) or write "
            "a file.py:factory that builds the module and loads a state dict"
        ) from exc
    what = "a state dict of weights" if isinstance(loaded, dict) else f"a {type(loaded).__name__}"
    raise ModelError(
        f"{path} holds {what} but no architecture; write a file.py:factory that builds the module, loads it with "
        "torch.load(path, weights_only=True) and returns (module, example_inputs)"
    )
