"""`transformers`: Hugging Face causal LMs through PyTorch `generate`, timed per step with a streamer.

Options: `transformers.dtype` (float32 default, bfloat16, float16), `transformers.device` (cpu default, cuda).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from infermeter.backends.options import Choice, Text
from infermeter.llm.backends.base import GenerateCase, GenerationBackend, GenerationSession, OnToken

DTYPES = ("float32", "bfloat16", "float16")
DTYPE = Choice(key="transformers.dtype", choices=DTYPES, default="float32", help="torch dtype of the weights")
DEVICE = Text(key="transformers.device", default="cpu", help="torch device to run on", describe="cpu, cuda, cuda:N…")


def _make_streamer(on_token: OnToken) -> Any:
    from transformers.generation.streamers import BaseStreamer

    class StepStreamer(BaseStreamer):  # type: ignore[misc]
        """Calls on_token once per decode step; generate's first put() is the prompt and is skipped."""

        def __init__(self) -> None:
            self.seen_prompt = False

        def put(self, value: Any) -> None:
            if not self.seen_prompt:
                self.seen_prompt = True
                return
            on_token()

        def end(self) -> None:
            pass

    return StepStreamer()


@dataclass
class TransformersSession(GenerationSession):
    """A loaded `AutoModelForCausalLM` and its tokenizer."""

    model: Any = None
    tokenizer: Any = None
    device: str = "cpu"

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, prompt_ids: list[int], gen_len: int, batch: int, on_token: OnToken) -> list[list[int]]:
        import torch

        ids = torch.tensor([prompt_ids] * batch, dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=gen_len,
                min_new_tokens=gen_len,  # EOS is suppressed: every request does the same work
                do_sample=False,
                num_beams=1,
                streamer=_make_streamer(on_token),
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id or 0,
            )
        if self.device != "cpu":
            torch.cuda.synchronize()
        return [row[len(prompt_ids) :].tolist() for row in out]

    def effective_precision(self) -> str:
        dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        return {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(dtype, dtype)

    def model_size_mb(self) -> float | None:
        return sum(p.numel() * p.element_size() for p in self.model.parameters()) / 2**20

    def close(self) -> None:
        self.model = None


class TransformersBackend(GenerationBackend):
    """PyTorch `generate` from Hugging Face transformers."""

    name = "transformers"
    distribution = "transformers"
    description = "Hugging Face causal LMs via PyTorch generate (greedy, streamer-timed)"
    options = (DTYPE, DEVICE)

    @classmethod
    def available(cls) -> str | None:
        import importlib.util

        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            from infermeter.core.extras import install_line

            return f"{' and '.join(missing)} not installed: {install_line('text-models')}"
        return None

    def load(self, case: GenerateCase) -> GenerationSession:
        from infermeter.llm.models import resolve_hf_folder

        folder = resolve_hf_folder(case.model)
        phases: dict[str, float] = {}
        start = time.perf_counter()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(case.threads)
        phases["import"] = time.perf_counter() - start
        start = time.perf_counter()
        device = DEVICE.value(case) or "cpu"
        dtype = getattr(torch, DTYPE.value(case))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).to(device).eval()  # type: ignore[arg-type]
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        phases["load_model"] = time.perf_counter() - start
        return TransformersSession(load_phases_s=phases, model=model, tokenizer=tokenizer, device=device)
