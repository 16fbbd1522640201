"""Findings from made-up profiles (no engine runs): each kind is found where it should be, named after its block,
and the list is ranked by the time each finding explains."""

from __future__ import annotations

from infermeter.explain.findings import findings, is_reference
from infermeter.explain.records import EngineProfile, Unit
from infermeter.results.explain import Block


def _block(nodes: list[str], times: dict[str, float], units: dict[str, int], p50: dict[str, float]) -> Block:
    difference = max(times.values()) - min(times.values())
    share = {e: t / p50[e] for e, t in times.items()}
    return Block(
        nodes,
        ["Conv"],
        time_us=times,
        kernels={},
        share=share,
        units=units,
        difference_us=difference,
        difference_share=0.0,
    )


def test_each_kind_of_finding_names_its_block_and_ranks_by_time() -> None:
    int8 = EngineProfile("ov", 1000.0, profiled=True, precision="int8", warnings=["layer conv2 runs in fp32"] * 2)
    int8.units = [
        Unit(
            "c1",
            ("conv1",),
            time_us=100.0,
            kernel="Convolution brgconv_avx512_amx_I8 (int8)",
            op_type="Convolution",
            precision="int8",
        ),
        Unit(
            "c2",
            ("conv2",),
            time_us=600.0,
            kernel="Convolution jit_avx512_f32 (fp32)",
            op_type="Convolution",
            precision="fp32",
            kind="compute",
        ),
        Unit("r", ("relu",), time_us=50.0, kernel="Eltwise ref_any (fp32)", op_type="Eltwise", precision="fp32"),
        Unit(
            "Reorder_1",
            (),
            time_us=40.0,
            kernel="Reorder jit_uni (fp32)",
            op_type="Reorder",
            precision="fp32",
            kind="data_movement",
        ),
    ]
    ort = EngineProfile("ort", 500.0, profiled=True, precision="fp32")
    ort.units = [
        Unit("conv1", ("conv1",), time_us=90.0, kernel="", op_type="Conv", provider="CUDAExecutionProvider"),
        Unit("conv2", ("conv2",), time_us=300.0, kernel="", op_type="Conv", provider="CUDAExecutionProvider"),
        Unit("relu", ("relu",), time_us=10.0, kernel="", op_type="Relu", provider="CPUExecutionProvider"),
    ]
    p50 = {"ov": 1000.0, "ort": 500.0}
    blocks = [
        _block(["conv2"], {"ov": 600.0, "ort": 300.0}, {"ov": 1, "ort": 1}, p50),
        _block(["conv1", "relu"], {"ov": 150.0, "ort": 100.0}, {"ov": 1, "ort": 2}, p50),
    ]
    found = findings([int8, ort], blocks, {"ov": 40.0, "ort": 0.0})
    codes = {(f.code, f.engine, f.block) for f in found}
    assert ("fp32_island", "ov", "conv2") in codes
    assert ("reference_kernel", "ov", "conv1 +1") in codes
    assert ("provider_fallback", "ort", "conv1 +1") in codes
    assert ("layout_conversions", "ov", "") in codes
    assert ("block_dominates", "ov", "conv2") in codes and ("block_dominates", "ort", "conv2") in codes
    assert ("fusion_one_engine", "ov", "conv1 +1") in codes
    warning = next(f for f in found if f.code == "engine_warning")
    assert "(2 times)" in warning.text and warning.block == "conv2"
    assert [f.time_us for f in found] == sorted((f.time_us for f in found), reverse=True)


def test_modules_eager_runs_apart_are_a_finding() -> None:
    eager = EngineProfile("torch", 300.0, profiled=True, precision="fp32", unit_kind="module")
    parts = (("Conv2d", 80.0), ("BatchNorm2d", 20.0))
    eager.units = [
        Unit(
            "conv+bn",
            ("conv0",),
            time_us=100.0,
            kernel="Conv2d+BatchNorm2d (eager)",
            op_type="BatchNorm2d",
            parts=parts,
        )
    ]
    block = _block(["conv0"], {"torch": 100.0}, {"torch": 1}, {"torch": 300.0})
    (found,) = [f for f in findings([eager], [block], {}) if f.code == "separate_modules"]
    assert found.block == "conv0" and found.time_us == 20.0
    assert "Conv2d 80 µs + BatchNorm2d 20 µs as separate modules" in found.text


def test_reference_kernels_are_told_from_their_names() -> None:
    assert is_reference("Eltwise ref_any_f32 (fp32)") and is_reference("MVN ref (fp32)")
    assert not is_reference("Convolution brgconv_avx512_f32 (fp32)") and not is_reference("Reorder (fp32)")
