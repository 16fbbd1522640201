"""Interference: how much of the CPUs this run may use was taken by other work while a case was being timed.

A case's figures are only as good as the machine's steadiness during its timed loop. Two facts tell whether
something else was running, and both are read from the kernel around each timed burst, outside the timed region:
- `/proc/stat`, per CPU this process may use (its affinity mask): busy time (user, nice, system, irq, softirq)
  and steal (time the hypervisor gave this VM's CPU to someone else). Busy time minus the worker's own CPU time
  (`os.times()`, every thread of the process) is what *other* processes used.
- `/proc/pressure/cpu` (PSI, Linux 4.20+), `some` total: time at least one runnable task waited for a CPU.

The effective CPU count is the smaller of the affinity mask and the cgroup quota (`cpu.max`, v2; `cpu.cfs_quota_us`
/ `cpu.cfs_period_us`, v1): a container limited to 1.5 CPUs on a 64-core host has 1.5 CPUs, not 64.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infermeter.results.schema import CaseWarning, Interference

# Other work above this share of the usable CPUs flags a case. Why 10%: an idle machine measured here shows 0-3%
# (the kernel, the coordinating parent, its progress display), while one busy core of two is 30-50% (the
# scheduler shares the core between the burner and the case's threads); a tenth also matches the 10% CV above
# which the `high_cv` warning says small speedups mean nothing. benchmarks/noise.py measures both sides.
INTERFERENCE_SHARE = 0.10
_BUSY_FIELDS = (0, 1, 2, 5, 6)  # user nice system irq softirq (iowait and idle are not busy; guest is in user)
_STEAL_FIELD = 7


@dataclass(frozen=True)
class CpuSnapshot:
    """Cumulative counters at one instant: busy and steal seconds of the usable CPUs, this process's CPU seconds,
    and PSI's `some` stall seconds (None where the kernel has no PSI)."""

    busy_s: float
    steal_s: float
    own_s: float
    pressure_s: float | None


def _cgroup_quota_cpus(root: Path) -> float | None:
    v2 = root / "sys/fs/cgroup/cpu.max"
    if v2.is_file():
        quota, _, period = v2.read_text().strip().partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    v1_quota, v1_period = root / "sys/fs/cgroup/cpu/cpu.cfs_quota_us", root / "sys/fs/cgroup/cpu/cpu.cfs_period_us"
    if v1_quota.is_file() and v1_period.is_file():
        quota_us = int(v1_quota.read_text().strip())
        if quota_us > 0:
            return quota_us / int(v1_period.read_text().strip())
    return None


def usable_cpu_ids() -> set[int]:
    """The CPUs this process may run on (its affinity mask; every CPU where the OS has no such call)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def effective_cpus(root: Path = Path("/")) -> float:
    """CPUs this process can really use: the affinity mask, capped by a cgroup CPU quota if one is set."""
    count = float(len(usable_cpu_ids()))
    quota = _cgroup_quota_cpus(root)
    return min(count, quota) if quota is not None else count


def own_cpu_s() -> float:
    """CPU seconds used so far by this process, every thread of it (user + system)."""
    times = os.times()
    return times.user + times.system


class CpuMeter:
    """Reads `CpuSnapshot`s of the usable CPUs. `proc` is the /proc to read and `own` this process's CPU clock
    (fakes in tests)."""

    def __init__(
        self,
        proc: Path = Path("/proc"),
        cpu_ids: set[int] | None = None,
        cpus: float | None = None,
        own: Callable[[], float] = own_cpu_s,
    ) -> None:
        self.proc = proc
        self.own = own
        self.cpu_ids = cpu_ids if cpu_ids is not None else usable_cpu_ids()
        self.cpus = cpus if cpus is not None else effective_cpus()
        self._tick_s = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
        self.available = (proc / "stat").is_file()

    def snapshot(self) -> CpuSnapshot:
        """The counters now (zeros where /proc is missing, so that interference reads as unknown-but-zero)."""
        own_s = self.own()
        if not self.available:
            return CpuSnapshot(0.0, 0.0, own_s, None)
        busy = steal = 0
        for line in (self.proc / "stat").read_text().splitlines():
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in self.cpu_ids:
                continue
            values = [int(v) for v in fields]
            busy += sum(values[i] for i in _BUSY_FIELDS if i < len(values))
            steal += values[_STEAL_FIELD] if len(values) > _STEAL_FIELD else 0
        return CpuSnapshot(busy * self._tick_s, steal * self._tick_s, own_s, self._pressure_s())

    def _pressure_s(self) -> float | None:
        path = self.proc / "pressure/cpu"
        try:
            for line in path.read_text().splitlines():
                if line.startswith("some "):
                    total = dict(item.split("=") for item in line.split()[1:])["total"]
                    return int(total) / 1e6  # microseconds
        except (OSError, KeyError, ValueError):
            return None
        return None

    def between(self, before: CpuSnapshot, after: CpuSnapshot, wall_s: float) -> Interference:
        """Interference over one interval. Clock ticks make busy time coarse (10 ms): a short interval can read
        slightly below the process's own time, so other work is clamped at zero."""
        own = after.own_s - before.own_s
        other = max(0.0, (after.busy_s - before.busy_s) - own) if self.available else 0.0
        pressure = None
        if before.pressure_s is not None and after.pressure_s is not None:
            pressure = after.pressure_s - before.pressure_s
        return Interference(wall_s, self.cpus, own, other, after.steal_s - before.steal_s, pressure)


def interference_warning(found: Interference, threshold: float = INTERFERENCE_SHARE) -> CaseWarning | None:
    """The `interference` warning when other work took more than `threshold` of the usable CPUs."""
    share = found.other_share
    if not math.isfinite(share) or share <= threshold:
        return None
    steal = f", {found.steal_s / max(found.wall_s, 1e-9):.0%} steal" if found.steal_s > 0.01 * found.wall_s else ""
    return CaseWarning(
        "interference",
        f"other processes used {share:.0%} of the {found.cpus:g} usable CPUs while this case was timed{steal}: "
        "its figures are not this configuration's; stop the other work (top shows it) and rerun",
        f"{share:.0%} of CPUs",
    )


def oversubscription_warning(threads: int, streams: int, cpus: float) -> CaseWarning | None:
    """The `oversubscribed` warning when the case's own threads outnumber the CPUs it may use."""
    wanted = threads * streams
    if wanted <= cpus:
        return None
    return CaseWarning(
        "oversubscribed",
        f"{threads} threads x {streams} streams on {cpus:g} usable CPUs: the case competes with itself and its "
        "latency measures the scheduler; lower --threads or --streams to fit the CPUs (affinity, cgroup quota)",
        f"{wanted} threads on {cpus:g} CPUs",
    )
