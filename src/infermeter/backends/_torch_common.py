"""What torch-based compiled backends (TorchScript, torch.compile) share: module preparation and read-back."""

from __future__ import annotations

from typing import Any

from infermeter.backends._common import dummy_feeds, precision_from_dtype_name
from infermeter.backends.torch_eager import TORCH_DTYPES, TorchEagerSession
from infermeter.case import Case
from infermeter.errors import BackendError
from infermeter.models.spec import ModelSpec, load_torch_module


def torch_unsupported_reason(model: ModelSpec, case: Case, backend: str, precisions: tuple[str, ...]) -> str | None:
    """The checks every torch backend makes before loading (a torch form exists; precision is doable here)."""
    from infermeter.backends._common import cpu_precision_reason

    if not model.has_torch_form:
        return f"{model.ref} has no PyTorch form; {backend} needs a PyTorch model (zoo name or Python source)"
    if case.precision not in precisions:
        return f"{backend} does not support precision {case.precision} (supports {', '.join(precisions)})"
    return cpu_precision_reason(case.precision, backend)


def build_module(model: ModelSpec, case: Case) -> tuple[Any, Any]:
    """The model's torch module in eval mode, cast to the case's precision, and that torch dtype."""
    import torch

    torch.set_num_threads(case.threads)
    try:
        module = load_torch_module(model).eval()
        dtype = getattr(torch, TORCH_DTYPES[case.precision])
        return module.to(dtype), dtype
    except BackendError:
        raise
    except Exception as exc:
        raise BackendError(f"torch could not build {model.ref}: {exc}") from exc


class CompiledTorchSession(TorchEagerSession):
    """A compiled torch callable. Its effective precision is read back from what the compiled code really
    returned on the dummy inference `load` ran, not from the requested dtype."""

    def __init__(self, module: Any, input_names: list[str], dtype: Any) -> None:
        super().__init__(module, input_names, dtype)
        self.output_dtype: str | None = None

    def warm_once(self, model: ModelSpec, case: Case) -> None:
        """Run one inference on dummy inputs of the case's shapes (triggers lazy compilation) and record the
        floating-point dtype of the outputs."""
        outputs = self.run(self.prepare(dummy_feeds(model, case)))
        items = outputs if isinstance(outputs, tuple | list) else [outputs]
        floating = [o.dtype for o in items if getattr(o, "is_floating_point", lambda: False)()]
        if floating:
            self.output_dtype = precision_from_dtype_name(str(floating[0]))

    def effective_precision(self) -> str:
        if self.output_dtype is not None:
            return self.output_dtype
        return precision_from_dtype_name(str(self._dtype))
