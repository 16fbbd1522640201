"""torch.compile with the Inductor backend; compilation is triggered in `load` so that it counts as load time."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from infermeter.backends._torch_common import CompiledTorchSession
from infermeter.backends.base import Session
from infermeter.backends.options import CACHE, Choice
from infermeter.backends.torch_eager import TorchFamilyBackend, build_module
from infermeter.core.case import Case
from infermeter.core.errors import BackendError, engine_message
from infermeter.models.convert import cache_root
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, Phase

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
MODE = Choice(key="torch-compile.mode", choices=COMPILE_MODES, default="default", help="torch.compile mode")


class TorchCompileSession(CompiledTorchSession):
    """A module compiled by Inductor. `close` restores the process-wide cache switches `load` changed."""

    def __init__(self, module: Any, input_names: list[str], dtype: Any, restore: dict[str, Any]) -> None:
        super().__init__(module, input_names, dtype)
        self._restore = restore

    def close(self) -> None:
        import torch

        if "force_disable_caches" in self._restore:
            torch.compiler.config.force_disable_caches = self._restore["force_disable_caches"]
        temp_dir = self._restore.get("temp_dir")
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)
        previous_dir = self._restore.get("cache_dir_env")
        if previous_dir is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous_dir


def _cache_counters(counters: Any) -> tuple[int, int, int]:
    """(FX-graph cache hits, FX-graph cache misses, AOTAutograd cache hits) so far in this process."""
    return (
        counters["inductor"]["fxgraph_cache_hit"],
        counters["inductor"]["fxgraph_cache_miss"],
        counters["aot_autograd"]["autograd_cache_hit"],
    )


class TorchCompileBackend(TorchFamilyBackend):
    """torch.compile, Inductor (`torch-compile`). Compile time is part of load and reported as `compile_s`.

    Options: `torch-compile.mode` (default | reduce-overhead | max-autotune | max-autotune-no-cudagraphs);
    `cache=off` compiles with Inductor's caches disabled in a fresh temporary cache folder. With the cache on,
    Inductor's FX-graph cache lives under the infermeter cache (`inductor/`) and `cache_hit` says whether
    the compiled graph came from it."""

    name = "torch-compile"
    description = "torch.compile (Inductor)"
    options = (MODE, CACHE)
    slow_to_load = True
    scorer_recompiles = True  # a second compile of the same model in the scoring process

    @classmethod
    def available(cls) -> str | None:
        missing = super().available()
        if missing:
            return missing
        if shutil.which(os.environ.get("CXX", "g++")) is None and shutil.which("c++") is None:
            return "Inductor compiles C++ on CPU and no C++ compiler was found: apt-get install g++"
        return None

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        mode = MODE.value(case)
        use_cache = CACHE.value(case)
        restore: dict[str, Any] = {"cache_dir_env": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}
        # Inductor reads its cache folder from the environment each time it looks one up, so setting it here
        # (before the first compilation of this process) is enough.
        if use_cache:
            folder = cache_root() / "inductor"
            folder.mkdir(parents=True, exist_ok=True)
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
        else:
            restore["temp_dir"] = tempfile.mkdtemp(prefix="infermeter-inductor-")
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = restore["temp_dir"]
        start = time.perf_counter()
        import torch
        from torch._dynamo.utils import counters

        imported = time.perf_counter()
        if not use_cache:
            restore["force_disable_caches"] = torch.compiler.config.force_disable_caches
            torch.compiler.config.force_disable_caches = True
        module, dtype = build_module(model, case)
        built = time.perf_counter()
        dynamic = case.shape_mode == "dynamic"
        before = _cache_counters(counters)
        compiled = torch.compile(module, mode=None if mode == "default" else mode, dynamic=dynamic, fullgraph=False)
        session = TorchCompileSession(compiled, [i.name for i in model.inputs], dtype, restore)
        try:
            session.warm_once(model, case)  # torch.compile is lazy: this first call compiles
        except Exception as exc:
            session.close()
            first = engine_message(exc) or type(exc).__name__
            raise BackendError(f"torch.compile could not compile {model.ref}: {first}") from exc
        compiled_at = time.perf_counter()
        after = _cache_counters(counters)
        fx_hits, fx_misses, aot_hits = (after[i] - before[i] for i in range(3))
        if use_cache and fx_hits + fx_misses + aot_hits:
            # In one process AOTAutograd's cache answers first and Inductor's FX-graph cache is not consulted;
            # across processes the FX-graph cache answers. Any miss of the FX-graph cache means a real compile.
            session.cache_hit = fx_misses == 0
        hits, misses = fx_hits + aot_hits, fx_misses
        if not fx_hits + fx_misses + aot_hits:
            session.notes.append("no compilation ran: Dynamo reused code compiled earlier in this process")
        session.load_phases_s = {
            Phase.IMPORT: imported - start,
            Phase.MODEL_INIT: built - imported,
            Phase.COMPILE: compiled_at - built,
        }
        state = "on" if use_cache else "off"
        session.notes.append(
            f"torch.compile mode={mode}, dynamic={dynamic}; Inductor FX-graph cache {state}: "
            f"{hits} hit(s), {misses} miss(es)"
        )
        return session
