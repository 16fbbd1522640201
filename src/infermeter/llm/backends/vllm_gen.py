"""`vllm`: Hugging Face causal LMs on an NVIDIA GPU through vLLM's engine, timed per engine step.

Written for GPU machines; `unavailable` where vLLM or a CUDA GPU is missing (this CPU-only machine). Not
exercised by the test suite here. `batch` sequences are added as separate requests and stepped together, so
vLLM's continuous batching does the batching; each step that grows the outputs counts as one token step.
Options: `vllm.dtype` (auto), `vllm.gpu_memory_utilization` (0.9).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from infermeter.backends.options import Choice, Number
from infermeter.llm.backends.base import GenerateCase, GenerationBackend, GenerationSession, OnToken


def _cuda_reason() -> str | None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch

    return None if torch.cuda.is_available() else "no CUDA GPU is visible (vLLM needs an NVIDIA GPU)"


@dataclass
class VllmSession(GenerationSession):
    """A vLLM `LLMEngine`."""

    engine: Any = None
    dtype: str = "auto"
    calls: int = 0

    def tokenize(self, text: str) -> list[int]:
        return list(self.engine.get_tokenizer().encode(text, add_special_tokens=False))

    def generate(self, prompt_ids: list[int], gen_len: int, batch: int, on_token: OnToken) -> list[list[int]]:
        from vllm import SamplingParams

        params = SamplingParams(temperature=0.0, max_tokens=gen_len, min_tokens=gen_len, ignore_eos=True)
        self.calls += 1
        ids = [f"im-{self.calls}-{i}" for i in range(batch)]
        for request_id in ids:
            self.engine.add_request(request_id, {"prompt_token_ids": prompt_ids}, params)
        produced = 0
        outputs: dict[str, list[int]] = {}
        while self.engine.has_unfinished_requests():
            for out in self.engine.step():
                outputs[out.request_id] = list(out.outputs[0].token_ids)
            longest = max((len(v) for v in outputs.values()), default=0)
            while produced < longest:
                produced += 1
                on_token()
        return [outputs.get(i, []) for i in ids]

    def effective_precision(self) -> str:
        return str(self.engine.model_config.dtype).removeprefix("torch.")


DTYPE = Choice(key="vllm.dtype", choices=("auto", "float16", "bfloat16", "float32", "half", "float"), default="auto",
               help="dtype of weights and activations (EngineArgs.dtype)")  # fmt: skip
GPU_MEMORY = Number(key="vllm.gpu_memory_utilization", default=0.9, maximum=1.0, above=True,
                    help="fraction of GPU memory vLLM may use")  # fmt: skip


class VllmBackend(GenerationBackend):
    """vLLM (GPU)."""

    name = "vllm"
    device = "cuda"
    distribution = "vllm"
    description = "vLLM engine on an NVIDIA GPU (continuous batching, PagedAttention)"
    options = (DTYPE, GPU_MEMORY)

    @classmethod
    def available(cls) -> str | None:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            return "vllm is not installed (pip install vllm on a Linux machine with an NVIDIA GPU and CUDA)"
        return _cuda_reason()

    def load(self, case: GenerateCase) -> GenerationSession:
        from infermeter.llm.models import resolve_hf_folder

        folder = resolve_hf_folder(case.model)
        start = time.perf_counter()
        from vllm import EngineArgs, LLMEngine

        args = EngineArgs(
            model=str(folder),
            dtype=DTYPE.value(case),
            gpu_memory_utilization=GPU_MEMORY.value(case),
            max_model_len=case.prompt_len + case.gen_len + 8,
            seed=case.seed,
        )
        engine = LLMEngine.from_engine_args(args)
        return VllmSession(load_phases_s={"load_engine": time.perf_counter() - start}, engine=engine)
