"""The ISA an LLM engine was built for: parsed from llama.cpp's system info, compared with the CPU's flags, and
the warning when a generic build runs on a CPU that has more (fake system-info strings; the real engine's when
llama-cpp-python is installed)."""

from __future__ import annotations

from dataclasses import replace

from llm_marks import needs_llama_cpp

from infermeter.llm.engine_build import (
    GGML_TO_CPUINFO,
    EngineBuild,
    build_warning,
    engine_build,
    host_flags,
    llama_cpp_build,
    parse_system_info,
)
from infermeter.results.records import read_record, write_record
from infermeter.results.schema import CaseResult

# What `make install-llm` (GGML_NATIVE=OFF) printed on this AMD EPYC, and a native build's line.
PORTABLE = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | OPENMP = 1 "
    "| REPACK = 1 | "
)
NATIVE = PORTABLE.replace("BMI2 = 1 |", "BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 |")
EPYC = {"avx", "avx2", "f16c", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vbmi", "avx512_vnni", "avx512_bf16"}
AVX2_ONLY = {"avx", "avx2", "f16c", "fma"}


def test_system_info_is_parsed_into_switches() -> None:
    parsed = parse_system_info("CPU : AVX = 1 | AVX512 = 0 | AMX_INT8 = 1 | Metal : EMBED_LIBRARY = 1 |")
    assert parsed == {"AVX": True, "AVX512": False, "AMX_INT8": True, "EMBED_LIBRARY": True}
    assert parse_system_info("no features here") == {}


def test_a_portable_build_on_an_avx512_cpu_warns_and_names_what_is_missing() -> None:
    build = engine_build("llama.cpp", PORTABLE, EPYC)
    assert "AVX2" in build.features and "AVX512" not in build.features
    assert build.missing == ["AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"]
    assert build.generic
    warning = build_warning(build)
    assert warning is not None and warning.code == "generic_cpu_target"
    assert "AVX512, AVX512_VNNI, AVX512_BF16" in warning.message and "make install-llm-native" in warning.message


def test_a_native_build_or_a_cpu_without_more_does_not_warn() -> None:
    native = engine_build("llama.cpp", NATIVE, EPYC)
    assert native.missing == [] and not native.generic and build_warning(native) is None
    assert build_warning(engine_build("llama.cpp", PORTABLE, AVX2_ONLY)) is None


def test_amx_is_named_on_a_cpu_that_has_it() -> None:
    build = engine_build("llama.cpp", NATIVE, EPYC | {"amx_int8", "amx_tile"})
    assert build.missing == ["AMX_INT8"]
    warning = build_warning(build)
    assert warning is not None and "AMX_INT8" in warning.message


def test_the_record_round_trips_through_a_case() -> None:
    case = CaseResult(
        id="c",
        model="m",
        backend="llama-cpp",
        backend_version="0",
        device="cpu",
        batch=1,
        shape_mode="static",
        precision="native",
        precision_effective=None,
        threads=1,
        status="ok",
    )
    build = engine_build("llama.cpp", PORTABLE, EPYC)
    write_record(case, build)
    assert read_record(case, EngineBuild) == build
    assert read_record(case, EngineBuild) != replace(build, missing=[])


@needs_llama_cpp
def test_the_installed_engine_reports_its_build() -> None:
    build = llama_cpp_build()
    assert build.engine == "llama.cpp" and build.features and build.system_info.startswith("CPU")
    flags = host_flags()
    for name in build.missing:  # what it calls missing, this CPU has and the build lacks
        assert name not in build.features
    assert set(build.missing) <= {name for name, flag in GGML_TO_CPUINFO.items() if flag in flags}
