"""The environment record of a results file: the machine (`results.env`), and the version of every framework
infermeter knows (the backends' own, from the registry, and the tools'). Above both the results schema and the
backends, so that neither imports the other for it."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from infermeter.backends.registry import framework_distributions
from infermeter.results.env import THREAD_VARIABLES, cpu_model_and_flags, gpus
from infermeter.results.schema import ResultsFile, now_iso

# Distributions recorded besides every backend's own (`Backend.distribution`, from the registry): the tools that
# convert and quantize models on the way to a backend.
TOOL_DISTRIBUTIONS = ("infermeter", "numpy", "onnx", "nncf")


def framework_versions() -> dict[str, str]:
    """Installed versions of every framework infermeter knows, read from package metadata (no imports)."""
    versions = {}
    for dist in (*TOOL_DISTRIBUTIONS, *framework_distributions()):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


def collect_environment() -> dict[str, Any]:
    """CPU model and ISA flags, cores, memory, OS, Python, framework versions, thread settings and GPUs."""
    cpu_model, isa = cpu_model_and_flags()
    governor = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model,
        "isa": isa,
        "architecture": platform.machine(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_governor": governor.read_text().strip() if governor.is_file() else None,
        "memory_total_gb": round(psutil.virtual_memory().total / 2**30, 2),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "frameworks": framework_versions(),
        "thread_env": {k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
        "gpu": gpus(),
    }


def new_results_file(
    command: Sequence[str], environment: dict[str, Any] | None = None, created: str | None = None
) -> ResultsFile:
    """The one way a results file starts: at `created` (default now), with this machine's environment (or
    `environment`, collected earlier or on another node) and the command that made it, handed in by the caller (the
    library never reads `sys.argv`)."""
    return ResultsFile(
        created=created or now_iso(),
        environment=collect_environment() if environment is None else environment,
        command=list(command),
    )
