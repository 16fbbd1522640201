"""TorchScript: `torch.jit.trace`, then `torch.jit.freeze` and `torch.jit.optimize_for_inference`."""

from __future__ import annotations

import time
import warnings
from typing import Any

from infermeter.backends._common import dummy_feeds
from infermeter.backends._torch_common import CompiledTorchSession
from infermeter.backends.base import Session
from infermeter.backends.options import Switch
from infermeter.backends.torch_eager import TorchFamilyBackend, build_module
from infermeter.backends.triton import THREADS, TritonParameter, TritonTarget
from infermeter.core.case import Case
from infermeter.core.errors import BackendError, engine_message
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, Phase

OPTIMIZE = Switch(key="torchscript.optimize", default=True, help="run torch.jit.optimize_for_inference after freezing")


class TorchScriptBackend(TorchFamilyBackend):
    """TorchScript (`torchscript`): traced on the case's shapes, frozen (weights folded into the graph) and
    optimized for inference (conv/bn folding, MKLDNN layouts where torch chooses them).

    Option `torchscript.optimize=off` stops after freezing (to measure what optimize_for_inference adds)."""

    name = "torchscript"
    description = "TorchScript: trace + freeze + optimize_for_inference"
    options = (OPTIMIZE,)
    unit_profiler = "torchscript-modules"
    triton = TritonTarget(
        "platform",
        "pytorch_libtorch",
        filename="model.pt",
        writable=False,
        parameters=(
            TritonParameter("INTRA_OP_THREAD_COUNT", THREADS),
            TritonParameter(
                "INTER_OP_THREAD_COUNT", THREADS, fixed="1", why="infermeter's PyTorch runs use one inter-op thread"
            ),
        ),
    )

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        start = time.perf_counter()
        import torch

        imported = time.perf_counter()
        module, dtype = build_module(model, case)
        built = time.perf_counter()
        names = [i.name for i in model.inputs]
        example = CompiledTorchSession(module, names, dtype).prepare(dummy_feeds(model, case))
        optimize = OPTIMIZE.value(case)
        notes = []
        try:
            with torch.no_grad(), warnings.catch_warnings():
                # Tracer warnings (data-dependent Python control flow) are recorded below, not printed.
                warnings.simplefilter("ignore")
                traced: Any = torch.jit.trace(module, example, check_trace=False)
                traced = torch.jit.freeze(traced.eval())
                if optimize:
                    traced = torch.jit.optimize_for_inference(traced)
        except Exception as exc:
            raise BackendError(f"TorchScript could not trace {model.ref}: {engine_message(exc)}") from exc
        notes.append("torch.jit.trace + freeze" + (" + optimize_for_inference" if optimize else ""))
        if case.shape_mode == "dynamic":
            notes.append("traced at the case's shapes; other shapes reuse the trace (valid for shape-generic models)")
        session = CompiledTorchSession(traced, names, dtype)
        # The profiling executor specialises the graph on its first runs: done here so it counts as load.
        session.warm_once(model, case)
        warmed = time.perf_counter()
        # Tracing, freezing and the profiling executor's specialisation are all this engine's compilation.
        session.load_phases_s = {
            Phase.IMPORT: imported - start,
            Phase.MODEL_INIT: built - imported,
            Phase.COMPILE: warmed - built,
        }
        session.notes.extend(notes)
        return session
