"""Footprint and energy: disk sizes of what a case loads and of its engine, and the RAPL powercap reader, tested
on a fake powercap tree (a VM usually hides the real one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.footprint import case_footprint, disk_mb, distribution_mb, energy_between, read_energy
from infermeter.models.resolve import resolve_model


def _zone(root: Path, name: str, energy_uj: int, wrap_uj: int = 2**32) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{wrap_uj}\n")
    return zone


def test_rapl_reader_sums_package_zones_only_and_undoes_a_wrap(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    _zone(root, "intel-rapl:0", 1_000_000, wrap_uj=5_000_000)
    _zone(root, "intel-rapl:1", 2_000_000)
    _zone(root, "intel-rapl:0:0", 999_999_999)  # a subzone (core) of package 0: already in its total
    before = read_energy(root)
    assert before.energy_uj == 3_000_000 and before.reason is None
    (root / "intel-rapl:0" / "energy_uj").write_text("500000\n")  # wrapped past 5 J: +4.5 J
    (root / "intel-rapl:1" / "energy_uj").write_text("2500000\n")  # +0.5 J
    after = read_energy(root)
    assert energy_between(before, after) == pytest.approx(5.0)


def test_rapl_reader_says_why_there_is_no_reading(tmp_path: Path) -> None:
    assert "exposes no RAPL" in (read_energy(tmp_path / "absent").reason or "")
    (tmp_path / "empty").mkdir()
    assert "no intel-rapl package zone" in (read_energy(tmp_path / "empty").reason or "")
    zone = _zone(tmp_path / "locked", "intel-rapl:0", 1)
    (zone / "energy_uj").chmod(0)
    reading = read_energy(tmp_path / "locked")
    if reading.energy_uj is None:  # as root the file stays readable
        assert "root" in (reading.reason or "")
    assert energy_between(read_energy(tmp_path / "absent"), reading) is None


def test_footprint_of_a_case_loading_a_file_and_of_its_engine(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    model = tmp_path / "m.bin"
    model.write_bytes(b"\0" * 2**20)
    assert disk_mb(model) == pytest.approx(1.0) and disk_mb(tmp_path) == pytest.approx(1.0)
    spec = resolve_model("tiny_cnn")
    footprint = case_footprint(spec, Case(spec.ref, "onnxruntime", settings=MeasureSettings()), None, None, 10)
    runtime = distribution_mb("onnxruntime")
    assert runtime is not None and runtime > 5 and footprint.runtime_mb == pytest.approx(runtime, abs=0.01)
    assert footprint.runtime_packages == ["onnxruntime"] and footprint.energy_mj_per_inference is None
    assert distribution_mb("no-such-distribution-here") is None
