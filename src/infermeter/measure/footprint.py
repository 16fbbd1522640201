"""What a case ships and spends, for edge teams: the disk size of what the engine loads and of the engine's installed
runtime, and energy per inference from the kernel's RAPL powercap counters (x86; a VM usually hides them)."""

from __future__ import annotations

import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from infermeter.results.records.soak import Footprint

if TYPE_CHECKING:
    from infermeter.core.case import Case
    from infermeter.models.spec import ModelSpec
    from infermeter.results.artifact import Artifact

POWERCAP = Path("/sys/class/powercap")


def disk_mb(path: Path) -> float:
    """Bytes on disk of a file or a folder (every file once, hard links counted once), in MB."""
    if path.is_file():
        return path.stat().st_size / 2**20
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            stat = os.lstat(os.path.join(folder, name))
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
    return total / 2**20


def distribution_mb(name: str) -> float | None:
    """The installed size of distribution `name` (the files its RECORD lists), None when it is not installed."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    total = 0
    for entry in dist.files or []:
        located = Path(str(entry.locate()))
        if located.is_file():
            total += located.stat().st_size
    return total / 2**20


@dataclass(frozen=True)
class EnergyReading:
    """Cumulative energy of the package domains (µJ) with their wrap ranges, or why none can be read."""

    energy_uj: int | None
    ranges_uj: tuple[int, ...] = ()
    counters: tuple[int, ...] = ()
    reason: str | None = None


def _package_domains(root: Path) -> list[Path]:
    # Top-level zones only (intel-rapl:0, intel-rapl:1: one per socket); their subzones (core, uncore, dram
    # intel-rapl:0:N) are parts of the package's energy and would be counted twice.
    return sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1 and (p / "energy_uj").exists())


def read_energy(root: Path = POWERCAP) -> EnergyReading:
    """The RAPL package counters now; `reason` says why not (no powercap tree, no RAPL zone, unreadable: the
    counters are root-only since Linux 5.10's fix for the Platypus side channel)."""
    if not root.is_dir():
        return EnergyReading(None, reason=f"no {root}: this kernel or VM exposes no RAPL powercap counters")
    domains = _package_domains(root)
    if not domains:
        return EnergyReading(None, reason=f"no intel-rapl package zone under {root}")
    try:
        counters = tuple(int((d / "energy_uj").read_text()) for d in domains)
        ranges = tuple(int((d / "max_energy_range_uj").read_text()) for d in domains)
    except PermissionError:
        return EnergyReading(None, reason=f"{domains[0] / 'energy_uj'} is readable only by root here")
    except (OSError, ValueError) as exc:
        return EnergyReading(None, reason=f"RAPL counters unreadable: {exc}")
    return EnergyReading(sum(counters), ranges, counters)


def energy_between(before: EnergyReading, after: EnergyReading) -> float | None:
    """Joules between two readings, each counter's wrap-around undone; None when either has none."""
    if before.energy_uj is None or after.energy_uj is None or len(before.counters) != len(after.counters):
        return None
    total = 0
    for start, end, wrap in zip(before.counters, after.counters, after.ranges_uj, strict=True):
        total += end - start if end >= start else end + wrap - start
    return total / 1e6


def case_footprint(
    spec: ModelSpec,
    case: Case,
    artifact: Artifact | None,
    energy: tuple[EnergyReading, EnergyReading] | None,
    inferences: int,
) -> Footprint:
    """The disk size of what the case loads (its built artifact, else the model file) and of its engine's
    distribution, and the energy per inference between the two `energy` readings (RAPL's package counters count
    the whole socket: other work on the machine is in the figure)."""
    from infermeter.backends.registry import get_backend

    loaded = artifact.path if artifact is not None and artifact.own else (spec.path or None)
    model_mb = disk_mb(Path(loaded)) if loaded and Path(loaded).exists() else None
    distribution = get_backend(case.backend).distribution
    runtime_mb = distribution_mb(distribution) if distribution else None
    energy_mj, reason = None, None
    if energy is not None:
        joules = energy_between(*energy)
        if joules is None:
            reason = energy[0].reason or energy[1].reason
        elif inferences:
            energy_mj = round(joules * 1e3 / inferences, 4)
    return Footprint(
        model_mb=None if model_mb is None else round(model_mb, 3),
        model_path=loaded,
        runtime_mb=None if runtime_mb is None else round(runtime_mb, 2),
        runtime_packages=[distribution] if distribution else [],
        energy_mj_per_inference=energy_mj,
        energy_reason=reason,
    )
