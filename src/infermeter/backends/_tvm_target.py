"""TVM's compile for this host: the LLVM target naming the host's CPU (and a warning when LLVM only knows a
generic one), the Relax compile with or without a tuning database, and the runtime's thread pool. Used by
`tvm_backend`, which builds and loads the artifact."""

from __future__ import annotations

import os
from typing import Any

from infermeter.core.errors import BackendError, engine_message
from infermeter.models.spec import ModelSpec


def host_target(threads: int) -> tuple[Any, dict[str, object]]:
    """The LLVM target for this host's CPU with `threads` cores, and what it resolved to (cpu, feature count)."""
    import tvm
    from tvm.target import codegen

    cpu = str(codegen.llvm_get_system_cpu())
    target = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": threads})
    features = len(codegen.llvm_get_cpu_features(target))
    return target, {"mcpu": cpu, "features": features, "num_cores": threads}


def generic_warning(resolved: dict[str, object]) -> tuple[str, str] | None:
    """The `generic_cpu_target` warning (code, message) when the target resolved to LLVM's generic CPU."""
    if resolved["mcpu"] not in ("", "generic"):
        return None
    return (
        "generic_cpu_target",
        f"tvm compiled for LLVM's generic CPU ({resolved['features']} features): LLVM did not recognize this "
        "host's CPU, so the code leaves its vector extensions unused and its speed is not this machine's",
    )


def compile_module(model: ModelSpec, mod: Any, device_target: Any, database: Any | None) -> Any:
    """The Relax VM executable of `mod`: with the tuning database's schedules applied when there is one (kernels it
    does not cover keep TVM's default), else TVM's default compilation."""
    import tvm

    try:
        if database is None:
            with tvm.transform.PassContext(opt_level=3):
                return tvm.compile(mod, target=device_target)
        from tvm.s_tir.meta_schedule.relax_integration import compile_relax

        return compile_relax(database, mod, device_target, params=None)
    except Exception as exc:
        raise BackendError(f"TVM could not compile {model.ref}: {engine_message(exc)}") from exc


def set_threads_env(threads: int) -> None:
    """TVM's runtime sizes its thread pool from TVM_NUM_THREADS when the pool starts (the first parallel call in a
    thread), so it is set before that; threads are left unpinned, like the other engines' (TVM_BIND_THREADS=0,
    unless the user set it), which also keeps an in-process session from pinning the whole process."""
    os.environ["TVM_NUM_THREADS"] = str(threads)
    os.environ.setdefault("TVM_BIND_THREADS", "0")


def configure_threads(threads: int) -> int:
    """The runtime's thread pool set to `threads` (within the size it started with), and the count read back."""
    import tvm

    tvm.get_global_func("runtime.config_threadpool")(1, threads)
    return int(tvm.runtime.num_threads())


def target_note(resolved: dict[str, Any]) -> str:
    """The case's note on the target: CPU, LLVM feature count and cores."""
    return (
        f"tvm: target llvm -mcpu={resolved['mcpu']} ({resolved['features']} LLVM CPU features), "
        f"num-cores {resolved['num_cores']}"
    )
