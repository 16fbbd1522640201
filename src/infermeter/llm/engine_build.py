"""The ISA an LLM engine was built for, read back from the loaded engine, and the warning when it is generic.

llama.cpp reports the CPU features its loaded CPU backend was compiled with (`llama_print_system_info`:
`CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | ... | AVX512 = 1 | AVX512_VNNI = 1 | ...`). `make install-llm` builds it
portable (`GGML_NATIVE=OFF`): AVX2 at most, whatever the CPU has. Each generation case records what the build
has and what this CPU has beyond it (as the compilers record their target), and warns when the gap holds a
feature the engine's kernels use (AVX-512, VNNI, BF16, AMX): `make install-llm-native` builds one for this CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from infermeter.results.records.base import Record
from infermeter.results.schema import CaseWarning

# llama.cpp's feature names (ggml-cpu's system info) and the /proc/cpuinfo flag each one needs.
GGML_TO_CPUINFO: dict[str, str] = {
    "AVX": "avx",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "AVX_VNNI": "avx_vnni",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}
# The features whose absence in a build, on a CPU that has them, is worth a warning: ggml has kernels for them
# that matter for quantized matmuls (dot products of int8/bf16 blocks).
NOTABLE = ("AVX512", "AVX512_VNNI", "AVX512_BF16", "AVX_VNNI", "AMX_INT8")
NATIVE_HINT = "`make install-llm-native` builds llama.cpp for this CPU (GGML_NATIVE=ON) in .venv-llm-native"


@dataclass(frozen=True)
class EngineBuild(Record):
    """The ISA an engine's loaded build was compiled for: `features` (the engine's own names, enabled ones
    only), `missing` (features this CPU has that the build lacks), and the engine's `system_info` line."""

    KEY: ClassVar[str] = "engine_build"

    engine: str
    features: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    system_info: str = ""

    @property
    def generic(self) -> bool:
        """True when the build lacks a notable feature this CPU has."""
        return any(name in NOTABLE for name in self.missing)


def parse_system_info(text: str) -> dict[str, bool]:
    """`CPU : SSE3 = 1 | AVX = 1 | AVX512 = 0 | ...` -> {"SSE3": True, "AVX": True, "AVX512": False, ...}.

    Only `NAME = 0/1` pairs count (other backends' entries, e.g. `Metal : EMBED_LIBRARY = 1`, are features of
    that backend, also kept by name); text that has none gives {}."""
    return {name: value == "1" for name, value in re.findall(r"([A-Z][A-Z0-9_]*)\s*=\s*([01])\b", text)}


def engine_build(engine: str, system_info: str, host_flags: set[str]) -> EngineBuild:
    """The record for an engine whose system info is `system_info` on a CPU with /proc/cpuinfo `host_flags`."""
    parsed = parse_system_info(system_info)
    features = [name for name, on in parsed.items() if on]
    missing = [name for name, flag in GGML_TO_CPUINFO.items() if flag in host_flags and not parsed.get(name)]
    return EngineBuild(engine, features, missing, " ".join(system_info.split()))


def build_warning(build: EngineBuild) -> CaseWarning | None:
    """A warning when the build is generic on a CPU with more (figures then understate this CPU), else None."""
    notable = [name for name in build.missing if name in NOTABLE]
    if not notable:
        return None
    return CaseWarning(
        "generic_cpu_target",
        f"{build.engine} was built without {', '.join(notable)}, which this CPU has: its figures understate "
        f"this CPU; {NATIVE_HINT}",
        f"built without {', '.join(notable)}",
    )


def host_flags() -> set[str]:
    """This CPU's /proc/cpuinfo flags (empty where the file is missing: not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def llama_cpp_build() -> EngineBuild:
    """The loaded llama.cpp's build, read from `llama_print_system_info` (import llama_cpp first)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    return engine_build("llama.cpp", text, host_flags())
