"""`fake`: a scripted generation backend on a fake clock, so that metric definitions can be checked exactly.

Options: `fake.prefill_ms` (per request, default 10), `fake.decode_ms` (per token after the first, default 2).
With the clock from `FakeClock`, TTFT is exactly prefill_ms and TPOT exactly decode_ms. `fake.wall=on` sleeps
the scripted times on the real clock instead (a sweep that takes time, to interrupt or to disturb).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from infermeter.backends.options import Number, Switch
from infermeter.llm.backends.base import GenerateCase, GenerationBackend, GenerationSession, OnToken

PREFILL_MS = Number(key="fake.prefill_ms", default=10.0, help="scripted prefill time, ms")
DECODE_MS = Number(key="fake.decode_ms", default=2.0, help="scripted time per decode step, ms")
WALL = Switch(key="fake.wall", default=False, help="sleep the scripted times on the real clock (no fake clock)")


class FakeClock:
    """A clock that only moves when told to (seconds)."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now_s += seconds


@dataclass
class FakeSession(GenerationSession):
    """Generates token ids 0, 1, 2… and advances `clock` by the scripted step times."""

    clock: FakeClock | None = None
    prefill_ms: float = 10.0
    decode_ms: float = 2.0

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) % 256 for c in text]

    def generate(self, prompt_ids: list[int], gen_len: int, batch: int, on_token: OnToken) -> list[list[int]]:
        for step in range(gen_len):
            step_s = (self.prefill_ms if step == 0 else self.decode_ms) / 1e3
            if self.clock is not None:
                self.clock.advance(step_s)
            else:
                time.sleep(step_s)
            on_token()
        return [list(range(gen_len)) for _ in range(batch)]

    def effective_precision(self) -> str:
        return "fp32"


class FakeBackend(GenerationBackend):
    """Scripted timings; not a framework."""

    name = "fake"
    description = "scripted token timings on a fake clock (for tests)"
    synthetic = True
    options = (PREFILL_MS, DECODE_MS, WALL)

    @classmethod
    def available(cls) -> str | None:
        return None

    def load(self, case: GenerateCase) -> GenerationSession:
        return FakeSession(
            clock=None if WALL.value(case) else FakeClock(),
            prefill_ms=PREFILL_MS.value(case),
            decode_ms=DECODE_MS.value(case),
        )
