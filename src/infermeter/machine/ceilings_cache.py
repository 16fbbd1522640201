"""This machine's ceilings, cached per machine (`graph.peak` measures them): the CPU model, ISA flags, core counts,
threads, the framework versions that ran the probes (and GPU names) form the key of a JSON file under
`cache_root()/peak/`; a changed key is a miss, so the ceilings are measured again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infermeter.core.files import write_text_atomically
from infermeter.machine import ceilings as peak
from infermeter.machine.ceilings import METHOD_VERSION, PEAK_FRAMEWORKS, ProgressFn


def peak_cache_key(threads: int) -> dict[str, Any]:
    """What must match for a cached peak to be reused: the hardware, the threads and the framework versions."""
    from infermeter.machine.environment import collect_environment

    env = collect_environment()
    return {
        "cpu_model": env["cpu_model"],
        "isa": env["isa"],
        "logical_cores": env["logical_cores"],
        "physical_cores": env["physical_cores"],
        "cpu_affinity": env["cpu_affinity"],
        "threads": threads,
        "frameworks": {k: v for k, v in env["frameworks"].items() if k in PEAK_FRAMEWORKS},
        "gpu": [g.get("name") for g in env["gpu"]],
        "method": METHOD_VERSION,
    }


def cache_path(key: dict[str, Any]) -> Path:
    """The JSON file of the ceilings measured under `key`."""
    from infermeter.models.convert import cache_root, key_digest

    return cache_root() / "peak" / f"{key_digest(key)[:16]}.json"


def _read_cached(key: dict[str, Any]) -> dict[str, Any] | None:
    """The ceilings cached under `key`, or None (none, unreadable, or written under another key)."""
    path = cache_path(key)
    if not path.is_file():
        return None
    try:
        cached: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return cached if cached.get("key") == key else None


def cached_peak(threads: int | None = None) -> dict[str, Any] | None:
    """This machine's cached ceilings, or None when they have not been measured (or the cache is stale)."""
    from infermeter.results.env import default_threads

    return _read_cached(peak_cache_key(threads or default_threads()))


def load_or_measure_peak(
    refresh: bool = False, threads: int | None = None, progress: ProgressFn | None = None
) -> tuple[dict[str, Any], bool]:
    """The cached ceilings for this machine (and whether they came from the cache), measuring on a miss,
    a stale key or `refresh`."""
    from infermeter.results.env import default_threads

    threads = threads or default_threads()
    key = peak_cache_key(threads)  # once: it reads the environment (every framework's version, the GPUs)
    cached = None if refresh else _read_cached(key)
    if cached is not None:
        return cached, True
    result = peak.measure_peak(threads, progress)
    result["key"] = key
    write_text_atomically(cache_path(key), json.dumps(result, indent=2))
    return result, False
