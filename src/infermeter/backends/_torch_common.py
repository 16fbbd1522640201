"""What torch-based compiled backends (TorchScript, torch.compile) share: the compiled session."""

from __future__ import annotations

from typing import Any

from infermeter.backends._common import dummy_feeds, precision_from_dtype_name
from infermeter.backends.torch_eager import TorchEagerSession
from infermeter.core.case import Case
from infermeter.models.spec import ModelSpec


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
        if self._computed is not None:  # the profiler saw the compute operators' dtypes (`read_compute`)
            return self._computed
        if self.output_dtype is not None:
            return self.output_dtype
        return precision_from_dtype_name(str(self._dtype))
