"""Interference accounting from a fake /proc, the effective CPU count, and the warnings."""

from __future__ import annotations

from pathlib import Path

from infermeter.machine.interference import (
    INTERFERENCE_SHARE,
    CpuMeter,
    effective_cpus,
    interference_warning,
    oversubscription_warning,
)
from infermeter.results.schema import Interference


def _write_proc(proc: Path, cpu_ticks: list[tuple[int, int]], pressure_us: int | None) -> None:
    """/proc/stat with per-CPU (busy user ticks, steal ticks), idle 1000 each; /proc/pressure/cpu if given."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    for index, (busy, steal) in enumerate(cpu_ticks):
        lines.append(f"cpu{index} {busy} 0 0 1000 0 0 0 {steal} 0 0")
    lines.append("intr 1 2 3")
    (proc / "stat").write_text("\n".join(lines) + "\n")
    if pressure_us is not None:
        (proc / "pressure").mkdir(exist_ok=True)
        (proc / "pressure/cpu").write_text(
            f"some avg10=0.00 avg60=0.00 avg300=0.00 total={pressure_us}\nfull avg10=0.00 total=0\n"
        )


def _meter(proc: Path, own: list[float], cpu_ids: set[int]) -> CpuMeter:
    readings = iter(own)
    meter = CpuMeter(proc, cpu_ids=cpu_ids, cpus=float(len(cpu_ids)), own=lambda: next(readings))
    meter._tick_s = 0.01  # fixed, whatever this machine's USER_HZ is
    return meter


def test_other_work_is_busy_time_minus_our_own_on_the_usable_cpus(tmp_path: Path) -> None:
    _write_proc(tmp_path, [(100, 0), (100, 0), (0, 0)], pressure_us=1_000_000)
    meter = _meter(tmp_path, own=[10.0, 11.0], cpu_ids={0, 1})
    before = meter.snapshot()
    # One second on two CPUs: 150 ticks busy (1.5 s), of which 1.0 s was ours; cpu2 (not usable) busy too.
    _write_proc(tmp_path, [(180, 0), (170, 0), (500, 0)], pressure_us=1_400_000)
    found = meter.between(before, meter.snapshot(), wall_s=1.0)
    assert abs(found.own_cpu_s - 1.0) < 1e-9 and abs(found.other_cpu_s - 0.5) < 1e-9
    assert abs(found.other_share - 0.25) < 1e-9
    assert found.pressure_share is not None and abs(found.pressure_share - 0.4) < 1e-9
    warning = interference_warning(found)
    assert warning is not None and warning.code == "interference" and "25%" in warning.message


def test_steal_counts_as_interference_and_an_idle_machine_is_not_flagged(tmp_path: Path) -> None:
    _write_proc(tmp_path, [(0, 0), (0, 0)], pressure_us=None)
    meter = _meter(tmp_path, own=[0.0, 1.9, 1.9, 3.8], cpu_ids={0, 1})
    quiet_before = meter.snapshot()
    _write_proc(tmp_path, [(96, 0), (96, 0)], pressure_us=None)  # 1.92 s busy, 1.9 s ours
    quiet = meter.between(quiet_before, meter.snapshot(), wall_s=1.0)
    assert quiet.pressure_s is None and quiet.other_share < INTERFERENCE_SHARE
    assert interference_warning(quiet) is None
    stolen_before = meter.snapshot()
    _write_proc(tmp_path, [(192, 30), (192, 30)], pressure_us=None)
    stolen = meter.between(stolen_before, meter.snapshot(), wall_s=1.0)
    assert abs(stolen.steal_s - 0.6) < 1e-9
    warning = interference_warning(stolen)
    assert warning is not None and "steal" in warning.message


def test_intervals_add_up() -> None:
    a = Interference(1.0, 2.0, 1.0, 0.2, 0.0, 0.1)
    b = Interference(3.0, 2.0, 3.0, 0.2, 0.0, None)
    total = a + b
    assert (total.wall_s, total.other_cpu_s, total.pressure_s) == (4.0, 0.4, None)
    assert abs(total.other_share - 0.05) < 1e-9


def test_effective_cpus_follow_the_cgroup_quota(tmp_path: Path) -> None:
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/cpu.max").write_text("150000 100000\n")
    assert effective_cpus(tmp_path) == min(1.5, effective_cpus(tmp_path / "none"))
    (tmp_path / "sys/fs/cgroup/cpu.max").write_text("max 100000\n")
    assert effective_cpus(tmp_path) == effective_cpus(tmp_path / "none")


def test_more_threads_than_cpus_is_oversubscribed() -> None:
    assert oversubscription_warning(2, 1, 2.0) is None
    warning = oversubscription_warning(2, 2, 2.0)
    assert warning is not None and warning.code == "oversubscribed"
