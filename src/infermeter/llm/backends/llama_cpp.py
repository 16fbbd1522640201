"""`llama-cpp`: GGUF models through llama-cpp-python (llama.cpp), on the CPU here.

Options: `llama-cpp.n_batch` (prompt batch size, default 512), `llama-cpp.n_gpu_layers` (default 0: CPU),
`llama-cpp.flash_attn` (on/off). One sequence at a time: the high-level API has no batched decoding; for
concurrent requests, benchmark llama.cpp's server with `infermeter llm load URL`. Each session reads
back the ISA the loaded llama.cpp was built for (`generate.engine_build`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infermeter.backends.options import Integer, Switch
from infermeter.core.errors import ModelError
from infermeter.llm.backends.base import GenerateCase, GenerationBackend, GenerationSession, OnToken
from infermeter.llm.engine_build import EngineBuild, llama_cpp_build
from infermeter.llm.gguf_file import INSTALL_HINT, gguf_file_type

N_BATCH = Integer(key="llama-cpp.n_batch", default=512, minimum=1, help="prompt batch size (n_batch)")
N_GPU_LAYERS = Integer(key="llama-cpp.n_gpu_layers", default=0, minimum=-1, help="layers offloaded to a GPU (-1: all)")
FLASH_ATTN = Switch(key="llama-cpp.flash_attn", default=False, help="flash attention (flash_attn)")


@dataclass
class LlamaCppSession(GenerationSession):
    """A loaded llama.cpp model (llama_cpp.Llama)."""

    llm: Any = None
    path: Path | None = None
    file_type: str = "unknown"
    engine_build: EngineBuild | None = None  # the ISA the loaded llama.cpp was compiled for (the runner records it)

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=False))

    def generate(self, prompt_ids: list[int], gen_len: int, batch: int, on_token: OnToken) -> list[list[int]]:
        # reset() drops the evaluated prefix: without it, llama-cpp-python reuses the KV cache of a repeated
        # prompt and the next request's prefill (TTFT) would cost nothing.
        self.llm.reset()
        out: list[int] = []
        # temp 0 = greedy inside llama.cpp's sampler; EOS is not checked here, so every request runs gen_len steps.
        for token in self.llm.generate(prompt_ids, temp=0.0, top_k=1, reset=True):
            out.append(int(token))
            on_token()
            if len(out) >= gen_len:
                break
        return [out]

    def effective_precision(self) -> str:
        return self.file_type

    def model_size_mb(self) -> float | None:
        return self.path.stat().st_size / 2**20 if self.path else None

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()
            self.llm = None


class LlamaCppBackend(GenerationBackend):
    """llama.cpp through llama-cpp-python."""

    name = "llama-cpp"
    distribution = "llama-cpp-python"
    description = "GGUF models through llama-cpp-python (llama.cpp), CPU"
    options = (N_BATCH, N_GPU_LAYERS, FLASH_ATTN)

    @classmethod
    def available(cls) -> str | None:
        import importlib.util

        return None if importlib.util.find_spec("llama_cpp") else INSTALL_HINT

    @classmethod
    def unsupported_reason(cls, case: GenerateCase) -> str | None:
        if case.batch != 1:
            return (
                "llama-cpp runs one sequence at a time (llama-cpp-python has no batched decoding); use --batch 1, "
                "or benchmark concurrent requests against llama.cpp's server with `infermeter llm load URL`"
            )
        return None

    def load(self, case: GenerateCase) -> GenerationSession:
        from infermeter.llm.models import resolve_gguf

        path = resolve_gguf(case.model)
        phases: dict[str, float] = {}
        start = time.perf_counter()
        from llama_cpp import Llama

        phases["import"] = time.perf_counter() - start
        start = time.perf_counter()
        try:
            llm = Llama(
                model_path=str(path),
                n_ctx=case.prompt_len + case.gen_len + 8,
                n_batch=N_BATCH.value(case),
                n_threads=case.threads,
                n_threads_batch=case.threads,
                n_gpu_layers=N_GPU_LAYERS.value(case),
                flash_attn=FLASH_ATTN.value(case),
                seed=case.seed,
                verbose=False,
            )
        except ValueError as exc:
            raise ModelError(f"llama.cpp could not load {path}: {exc}; is it a valid GGUF file?") from exc
        phases["load_model"] = time.perf_counter() - start
        return LlamaCppSession(
            load_phases_s=phases, llm=llm, path=path, file_type=gguf_file_type(path), engine_build=llama_cpp_build()
        )
