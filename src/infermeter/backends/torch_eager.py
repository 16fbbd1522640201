"""PyTorch eager execution under `torch.inference_mode`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.backends.base import Backend, Session, package_version
from infermeter.backends.options import Switch, Text
from infermeter.core.case import Case
from infermeter.core.errors import BackendError
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec
from infermeter.models.torch_form import load_torch_module
from infermeter.results.artifact import Artifact, Phase

TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
TORCH_PRECISIONS = {dtype: precision for precision, dtype in TORCH_DTYPES.items()}
AUTOCAST = Switch(key="torch.autocast", default=False,
                  help="at bf16/fp16: fp32 weights, the model run under torch.autocast (mixed precision)")  # fmt: skip
FP32_MODULES = Text(key="torch.fp32_modules", describe="path",
                    help="with autocast: a JSON file whose `fp32_modules` list names modules run in fp32 "
                         "(`infermeter quantize --to` writes it)")  # fmt: skip


def exclude_from_autocast(module: Any, names: set[str] | frozenset[str]) -> list[tuple[Any, Any]]:
    """Run the submodules `names` of `module` outside autocast, in fp32 (their float inputs cast up): the
    layers a reduced-precision study keeps in FP32. Returns (submodule, original forward) pairs, to restore."""
    import torch

    missing = sorted(set(names) - {name for name, _ in module.named_modules()})
    if missing:
        raise BackendError(f"torch.fp32_modules: the model has no module {missing[0]!r} (a path as named_modules "
                           "gives it, e.g. encoder.layer.0.attention)")  # fmt: skip
    replaced = []
    for name, sub in module.named_modules():
        if name not in names:
            continue
        original = sub.forward

        def forward(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with torch.autocast("cpu", enabled=False):
                args = tuple(a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
                return _original(*args, **kwargs)

        sub.forward = forward
        replaced.append((sub, original))
    return replaced


def fp32_modules_of(path: str | None) -> list[str]:
    """The `fp32_modules` list of a study's torch config file (none without a file)."""
    if not path:
        return []
    import json

    try:
        return [str(name) for name in json.loads(Path(path).read_text())["fp32_modules"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackendError(f"torch.fp32_modules={path}: not a config with an fp32_modules list ({exc})") from exc


class TorchEagerSession(Session):
    """Runs the module eagerly; floating-point inputs are cast to the module's dtype in `prepare`."""

    def __init__(self, module: Any, input_names: list[str], dtype: Any, autocast: Any = None) -> None:
        super().__init__()
        import torch

        self._torch = torch
        self._module = module
        self._input_names = input_names
        self._dtype = dtype
        self._autocast = autocast  # the autocast dtype (weights stay fp32), or None
        self._computed: str | None = None  # what the profiler saw the compute operators run in (`read_compute`)
        param = next(module.parameters(), None) if hasattr(module, "parameters") else None
        if param is not None:  # the weights' precision (autocast keeps them fp32)
            self.stored_precision = TORCH_PRECISIONS.get(str(param.dtype).removeprefix("torch."))

    def prepare(self, feeds: Feeds) -> Any:
        tensors = []
        for name in self._input_names:
            tensor = self._torch.from_numpy(np.ascontiguousarray(feeds[name]))
            tensors.append(tensor.to(self._dtype) if tensor.is_floating_point() else tensor)
        return tuple(tensors)

    def run(self, prepared: Any) -> Any:
        if self._autocast is not None:
            with self._torch.inference_mode(), self._torch.autocast("cpu", dtype=self._autocast):
                return self._module(*prepared)
        with self._torch.inference_mode():
            return self._module(*prepared)

    def outputs_to_numpy(self, outputs: Any) -> list[np.ndarray]:
        items = outputs if isinstance(outputs, tuple | list) else [outputs]
        return [o.float().numpy() if o.is_floating_point() else o.numpy() for o in items]

    def read_compute(self, prepared: Any) -> None:
        """The dtypes of the convolutions and matmuls torch's profiler saw in one run (autocast included)."""
        from infermeter.backends.compute_precision import torch_profiled

        try:
            reading = torch_profiled(lambda: self.run(prepared))
        except Exception:  # a profiler that cannot run says nothing; the dtype read below stands
            return
        if reading is not None:
            self._computed = reading.precision
            self.compute_evidence = reading.evidence()

    def effective_precision(self) -> str:
        if self._computed is not None:
            return self._computed
        if self._autocast is not None:  # autocast: the matmuls and convolutions run in its dtype
            return {v: k for k, v in TORCH_DTYPES.items()}[str(self._autocast).removeprefix("torch.")]
        # Read back from the parameters: what the module computes in, not what was asked for.
        param = next(self._module.parameters(), None)
        dtype = param.dtype if param is not None else self._dtype
        return {v: k for k, v in TORCH_DTYPES.items()}.get(str(dtype).removeprefix("torch."), str(dtype))


def build_module(model: ModelSpec, case: Case) -> tuple[Any, Any]:
    """The model's torch module in eval mode, cast to the case's precision, and that torch dtype (with
    `torch.autocast`, the module stays fp32: autocast picks each operator's precision)."""
    import torch

    torch.set_num_threads(case.threads)
    try:
        module = load_torch_module(model).eval()
        dtype = getattr(torch, TORCH_DTYPES[case.precision])
        if AUTOCAST.value(case) and case.precision != "fp32":
            exclude_from_autocast(module, set(fp32_modules_of(FP32_MODULES.value(case))))
            return module, torch.float32
        return module.to(dtype), dtype
    except BackendError:
        raise
    except Exception as exc:
        raise BackendError(f"torch could not build {model.ref}: {exc}") from exc


class TorchFamilyBackend(Backend):
    """What every PyTorch-based backend shares: availability, and the checks before loading (a torch form of
    the model exists; the precision is one torch runs natively on this CPU)."""

    distribution = "torch"
    install_extra = "torch"
    precisions = ("fp32", "bf16")
    model_files = (".pt2",)
    needs_torch_form = True

    @classmethod
    def available(cls) -> str | None:
        if package_version("torch") is None:
            return cls.not_installed("PyTorch")
        return None

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        from infermeter.backends._common import cpu_precision_reason

        if cls.needs_torch_form and not model.has_torch_form:
            return (
                f"{model.ref} is a {model.kind} model with no PyTorch form; {cls.name} needs a PyTorch model "
                "(zoo name, Python source or .pt2)"
            )
        return super().unsupported_reason(model, case) or cpu_precision_reason(case.precision, cls.name)


class TorchEagerBackend(TorchFamilyBackend):
    """PyTorch eager mode (`torch`): the baseline every other backend is compared with."""

    name = "torch"
    description = "PyTorch eager, torch.inference_mode"
    options = (AUTOCAST, FP32_MODULES)
    precision_fallback = "torch-autocast"
    unit_profiler = "torch-modules"
    reference_options = ()  # the parity reference of every model with a PyTorch form

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        start = time.perf_counter()
        import torch  # timed on its own: the framework's import is part of a cold start

        imported = time.perf_counter()
        module, dtype = build_module(model, case)
        autocast = getattr(torch, TORCH_DTYPES[case.precision]) if AUTOCAST.value(case) else None
        session = TorchEagerSession(module, [i.name for i in model.inputs], dtype, autocast)
        if autocast is not None:
            kept = fp32_modules_of(FP32_MODULES.value(case))
            session.notes.append(f"torch.autocast({case.precision}); modules kept in fp32: {len(kept)}")
        session.load_phases_s = {Phase.IMPORT: imported - start, Phase.MODEL_INIT: time.perf_counter() - imported}
        return session
