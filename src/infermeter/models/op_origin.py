"""Where in a PyTorch model an operator is called: the submodule (its path and class) and the source line.

An exporter's error names the operator it could not translate (`infermeter_test::wobble`, `aten::foo`), not
where the model calls it; in a model of hundreds of modules that is the first thing a person needs. The model is
run once in eager mode with a forward hook stack on every submodule and a dispatch mode that notes, for each call
of the operator, the innermost module running and the innermost frame outside torch. Eager mode, not the
exporter's trace: the trace is what failed.
"""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Sequence
from typing import Any


@functools.cache
def _torch_roots() -> tuple[str, ...]:
    """Folders whose frames are torch's own (nn.Module call machinery, the dispatcher), not the model's code."""
    import torch

    return (os.path.dirname(torch.__file__) + os.sep,)


def _user_frame() -> str | None:
    """`file.py:LINE` of the innermost frame that is neither torch's nor this module's."""
    roots = _torch_roots()
    for frame in reversed(traceback.extract_stack()):
        if frame.filename != __file__ and not frame.filename.startswith(roots):
            return f"{os.path.basename(frame.filename)}:{frame.lineno}"
    return None


def operator_origins(module: Any, args: Sequence[Any], op: str, limit: int = 3) -> list[str]:
    """Where `module(*args)` calls operator `op` (`namespace::name`), innermost module first seen first:
    `body.0.act (Act, model.py:12)`; at most `limit` places. Empty when the model does not call it in eager
    mode (or fails to run). Never raises: this only adds to an error message."""
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return []
    names = {sub: name for name, sub in module.named_modules()}
    stack: list[Any] = []
    found: list[str] = []

    def push(sub: Any, _args: Any) -> None:
        stack.append(sub)

    def pop(sub: Any, _args: Any, _out: Any) -> None:
        if stack:
            stack.pop()

    class Note(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if len(found) < limit and getattr(getattr(func, "_schema", None), "name", None) == op:
                where = "the model's forward"
                if stack:
                    sub = stack[-1]
                    where = f"{names.get(sub) or '(root)'} ({type(sub).__name__}"
                    line = _user_frame()
                    where += f", {line})" if line else ")"
                if where not in found:
                    found.append(where)
            return func(*args, **(kwargs or {}))

    handles = []
    try:
        for sub in names:
            handles.append(sub.register_forward_pre_hook(push))
            handles.append(sub.register_forward_hook(pop))
        with torch.no_grad(), Note():
            module(*args)
    except Exception:
        return found  # what was found before the model failed is still true
    finally:
        for handle in handles:
            handle.remove()
    return found
