"""`tensorrt-llm`: Hugging Face causal LMs compiled by TensorRT-LLM's LLM API, timed from its token stream.

Written for NVIDIA GPU machines; `unavailable` where tensorrt_llm or a CUDA GPU is missing (this CPU-only
machine). Not exercised by the test suite here. Batch > 1 submits that many streaming requests at once.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from infermeter.llm.backends.base import GenerateCase, GenerationBackend, GenerationSession, OnToken
from infermeter.llm.backends.vllm_gen import _cuda_reason


@dataclass
class TensorRTLLMSession(GenerationSession):
    """A `tensorrt_llm.LLM` (engine built at load)."""

    llm: Any = None

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, prompt_ids: list[int], gen_len: int, batch: int, on_token: OnToken) -> list[list[int]]:
        from tensorrt_llm import SamplingParams

        params = SamplingParams(max_tokens=gen_len, min_tokens=gen_len, ignore_eos=True, temperature=0.0)
        counts = [0] * batch
        outputs: list[list[int]] = [[] for _ in range(batch)]
        produced = 0

        async def one(index: int) -> None:
            nonlocal produced
            async for out in self.llm.generate_async(prompt_ids, params, streaming=True):
                outputs[index] = list(out.outputs[0].token_ids)
                counts[index] = len(outputs[index])
                while produced < max(counts):
                    produced += 1
                    on_token()

        async def run_all() -> None:
            await asyncio.gather(*(one(i) for i in range(batch)))

        asyncio.run(run_all())
        return outputs

    def effective_precision(self) -> str:
        return str(getattr(self.llm.args, "dtype", "auto"))


class TensorRTLLMBackend(GenerationBackend):
    """TensorRT-LLM (GPU)."""

    name = "tensorrt-llm"
    device = "cuda"
    distribution = "tensorrt-llm"
    description = "TensorRT-LLM LLM API on an NVIDIA GPU (engine built at load)"

    @classmethod
    def available(cls) -> str | None:
        import importlib.util

        if importlib.util.find_spec("tensorrt_llm") is None:
            return "tensorrt_llm is not installed (pip install tensorrt-llm on a Linux machine with an NVIDIA GPU)"
        return _cuda_reason()

    def load(self, case: GenerateCase) -> GenerationSession:
        from infermeter.llm.models import resolve_hf_folder

        folder = resolve_hf_folder(case.model)
        start = time.perf_counter()
        from tensorrt_llm import LLM

        llm = LLM(model=str(folder))
        return TensorRTLLMSession(load_phases_s={"build_engine": time.perf_counter() - start}, llm=llm)
