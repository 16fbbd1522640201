"""The malloc a case's worker runs with (`--allocator`), a per-case environment set before the worker starts.

PyTorch on CPU, and much of every engine, allocates through the C library's malloc, whose per-thread arenas
fragment under varying sizes; the usual remedies are a cap on glibc's arenas (`MALLOC_ARENA_MAX`) or another
allocator preloaded (`LD_PRELOAD` of jemalloc or tcmalloc; Debian: libjemalloc2, libtcmalloc-minimal4). Each
allocator is a case of its own, so the remedy is measured against the default on the same stream.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import re
import sys
from pathlib import Path

from infermeter.core.errors import UsageError

DEFAULT = "glibc"
_PRELOADED = {"jemalloc": ("jemalloc", "libjemalloc2"), "tcmalloc": ("tcmalloc_minimal", "libtcmalloc-minimal4")}
_ARENAS = re.compile(r"^arenas=(\d+)$")


def check_allocator(name: str) -> str:
    """`name` checked: glibc, arenas=N (MALLOC_ARENA_MAX=N), jemalloc or tcmalloc; UsageError otherwise."""
    if name == DEFAULT or name in _PRELOADED or (_ARENAS.match(name) and int(name.split("=")[1]) > 0):
        return name
    raise UsageError(f"--allocator {name!r}: use glibc, arenas=N (MALLOC_ARENA_MAX=N), jemalloc or tcmalloc")


def _library(name: str) -> str | None:
    found = ctypes.util.find_library(_PRELOADED[name][0])
    return found


def allocator_unavailable(name: str) -> str | None:
    """Why `name` cannot run here (its library is not installed), or None."""
    if name in _PRELOADED and _library(name) is None:
        return (
            f"--allocator {name}: lib{_PRELOADED[name][0]} is not installed (Debian: apt install {_PRELOADED[name][1]})"
        )
    return None


def allocator_environment(name: str) -> dict[str, str]:
    """The environment variables that give a fresh worker allocator `name` (empty for the default)."""
    if not name or name == DEFAULT:
        return {}
    match = _ARENAS.match(name)
    if match:
        return {"MALLOC_ARENA_MAX": match.group(1)}
    library = _library(name)
    return {"LD_PRELOAD": library} if library else {}


_REEXECUTED = "INFERMETER_ALLOCATOR_REEXECUTED"


def run_under_allocator(name: str, argv: list[str]) -> None:
    """Make this process run on allocator `name`: return when it already does, else replace the process by the
    same command (`python -m infermeter ARGV`) with the allocator's environment, so a long-lived process such as
    `serve` gets the malloc a soak chose. A preload that did not take after the restart is an error, not a loop."""
    name = check_allocator(name)
    wanted = allocator_environment(name)
    if all(os.environ.get(key) == value for key, value in wanted.items()) and (
        name not in _PRELOADED or loaded_allocator() == name
    ):
        return
    unavailable = allocator_unavailable(name)
    if unavailable:
        raise UsageError(unavailable)
    if os.environ.get(_REEXECUTED):
        raise UsageError(f"--allocator {name}: the process still runs on {loaded_allocator()} after restarting with "
                         f"{wanted}")  # fmt: skip
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "infermeter", *argv], {**os.environ, **wanted, _REEXECUTED: "1"})


def loaded_allocator() -> str:
    """Which allocator this process really runs on, read from its memory map (a preload that failed shows here)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "unknown"
    for name, (library, _) in _PRELOADED.items():
        if f"lib{library}" in maps:
            return name
    return DEFAULT


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")
    ]  # fmt: skip


def glibc_heap_mb() -> dict[str, float]:
    """glibc malloc's own view (mallinfo2, glibc >= 2.33): `heap_mb` obtained from the system (arenas + mmapped),
    `in_use_mb`, and `free_mb` held but unused (fragmentation shows here). Empty when unavailable; under a
    preloaded allocator these count only what still goes through glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        function = libc.mallinfo2
    except (OSError, AttributeError):
        return {}
    function.restype = _MallInfo2
    info = function()
    mb = 2**20
    return {
        "heap_mb": round((info.arena + info.hblkhd) / mb, 2),
        "in_use_mb": round((info.uordblks + info.hblkhd) / mb, 2),
        "free_mb": round(info.fordblks / mb, 2),
    }


def release_memory() -> None:
    """After a session is closed: collect Python's garbage, then have glibc return free heap pages to the system
    (`malloc_trim(0)`, which also releases free pages inside its arenas). What recycling a worker relies on; a
    no-op outside glibc."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
