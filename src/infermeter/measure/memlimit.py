"""A per-case memory limit (`--memory-limit 512MB`): the memory a target device really has, imposed on each case.

Where this process's cgroup v2 is writable, each case's worker runs in a cgroup of its own with `memory.max`
(resident memory and page cache, as the device would count it; the kernel OOM-kills the worker past it, and
`memory.peak` / `memory.events` say how far it got). Elsewhere the worker sets `RLIMIT_AS` on itself, which counts
address space, not resident memory: engines that reserve address space (glibc's per-thread malloc arenas, thread
stacks, torch) reach it well below the same figure of resident memory, so a case under RLIMIT_AS is told so.
A case stopped by its limit is `oom`, with the peak it reached (or a plain word that none could be seen), and the
sweep goes on. `INFERMETER_MEMORY_LIMIT_VIA=rlimit` forces the RLIMIT_AS path where cgroup v2 is writable too (to
compare with a machine without it, and to test both paths on one machine).
"""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass
from pathlib import Path

from infermeter.core.case import Case
from infermeter.results.schema import CaseResult

CGROUP_ROOT = Path("/sys/fs/cgroup")
# `rlimit`: impose every limit with RLIMIT_AS, even where a cgroup could be made.
LIMIT_VIA_VARIABLE = "INFERMETER_MEMORY_LIMIT_VIA"
# What a failed allocation looks like in a failed case's error, per engine (Python, C++, ORT, OpenVINO).
_OOM_WORDS = ("memoryerror", "bad_alloc", "failed to allocate", "out of memory", "cannot allocate memory")


@dataclass(frozen=True)
class MemoryLimit:
    """The limit of one case: `limit_mb`, and the cgroup made for it (None: the worker uses RLIMIT_AS)."""

    limit_mb: float
    cgroup: str | None = None

    @property
    def how(self) -> str:
        """How the limit is imposed, for the case's notes."""
        if self.cgroup:
            return f"memory limit {self.limit_mb:g} MB: cgroup v2 memory.max ({self.cgroup})"
        return (
            f"memory limit {self.limit_mb:g} MB: RLIMIT_AS (no writable cgroup v2 here), which counts address space, "
            "not resident memory: engines that reserve address space hit it below that much resident memory"
        )


def _own_cgroup(root: Path) -> Path | None:
    """This process's cgroup v2 folder, when the unified hierarchy is mounted at `root` and writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            folder = root / line[3:].lstrip("/")
            if (root / "cgroup.controllers").is_file() and os.access(folder, os.W_OK):
                return folder
    return None


def make_limit(limit_mb: float, label: str, root: Path = CGROUP_ROOT) -> MemoryLimit:
    """The limit for one case: a fresh cgroup with `memory.max` under this process's own, where the kernel lets
    us make one (memory controller delegated), else RLIMIT_AS in the worker."""
    parent = None if os.environ.get(LIMIT_VIA_VARIABLE) == "rlimit" else _own_cgroup(root)
    if parent is None or "memory" not in (parent / "cgroup.subtree_control").read_text(errors="replace").split():
        return MemoryLimit(limit_mb)
    folder = parent / f"infermeter-{os.getpid()}-{label}"
    try:
        folder.mkdir(exist_ok=True)
        (folder / "memory.max").write_text(str(int(limit_mb * 2**20)))
        if (folder / "memory.swap.max").exists():  # a device without swap: no escape into it
            (folder / "memory.swap.max").write_text("0")
    except OSError:
        with contextlib.suppress(OSError):
            folder.rmdir()
        return MemoryLimit(limit_mb)
    return MemoryLimit(limit_mb, str(folder))


def case_limit(case: Case) -> MemoryLimit | None:
    """The memory limit `case`'s worker runs under (`--memory-limit`), None without one."""
    limit_mb = case.settings.memory_limit_mb
    return make_limit(limit_mb, case.id) if limit_mb > 0 else None


def enter_limit(limit: MemoryLimit) -> str:
    """In the worker, before any framework loads: join the case's cgroup, else set RLIMIT_AS. The note to keep."""
    if limit.cgroup:
        try:
            (Path(limit.cgroup) / "cgroup.procs").write_text(str(os.getpid()))
            return limit.how
        except OSError as exc:
            fallback = MemoryLimit(limit.limit_mb)
            _set_rlimit(limit.limit_mb)
            return f"{fallback.how} (joining {limit.cgroup} failed: {exc.strerror})"
    _set_rlimit(limit.limit_mb)
    return limit.how


def _set_rlimit(limit_mb: float) -> None:
    size = int(limit_mb * 2**20)
    resource.setrlimit(resource.RLIMIT_AS, (size, size))


def cgroup_outcome(limit: MemoryLimit) -> tuple[bool, float | None]:
    """After the worker ended: (the kernel OOM-killed in its cgroup, the cgroup's peak MB); the cgroup removed."""
    if not limit.cgroup:
        return False, None
    folder = Path(limit.cgroup)
    killed, peak = False, None
    with contextlib.suppress(OSError, ValueError):
        events = dict(line.split() for line in (folder / "memory.events").read_text().splitlines())
        killed = int(events.get("oom_kill", "0")) > 0
    with contextlib.suppress(OSError, ValueError):
        peak = int((folder / "memory.peak").read_text()) / 2**20
    with contextlib.suppress(OSError):
        folder.rmdir()
    return killed, peak


def looks_like_oom(result: CaseResult, limit: MemoryLimit, killed: bool) -> bool:
    """Whether a case that did not finish was stopped by its memory limit: the cgroup's OOM kill, or under
    RLIMIT_AS a failed allocation (in its error) or a crash (a failed mmap kills native code by a signal)."""
    if killed:
        return True
    if result.status == "crashed" and not limit.cgroup:
        return True
    text = (result.error or "").lower() + " ".join(result.notes).lower()
    return result.status == "failed" and any(word in text for word in _OOM_WORDS)


def mark_oom(result: CaseResult, limit: MemoryLimit, seen_peak_mb: float, killed: bool = False) -> None:
    """Turn a case stopped by its memory limit into status `oom`, with the highest memory it was seen at."""
    cgroup_killed, cgroup_peak = cgroup_outcome(limit)  # also removes the case's cgroup
    killed = killed or cgroup_killed
    if result.status == "ok" or not looks_like_oom(result, limit, killed):
        return
    peak = max(seen_peak_mb, cgroup_peak or 0.0, result.memory.peak_rss_mb or 0.0)
    result.memory.peak_rss_mb = peak or None
    cause = result.error or result.status
    result.status = "oom"
    # A worker that died before the parent's first sample, and before it could report its own peak: say so.
    seen = f"peak seen {peak:.0f} MB resident" if peak else "no resident peak could be seen: the worker ended first"
    result.error = (
        f"exceeded --memory-limit {limit.limit_mb:g} MB ({seen}"
        + ("" if limit.cgroup else "; RLIMIT_AS counts address space")
        + f"): {cause}"
    )
