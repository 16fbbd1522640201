"""The contract of a generation backend: load a causal LM, generate a fixed number of tokens, report each token.

The clock stays outside backends, as in the core: `GenerationSession.generate` calls `on_token()` once per
decode step, right after the step's token(s) exist on the host, and the driver (`generate.runner`) reads the
clock there. Generation is greedy and runs exactly `gen_len` steps (EOS is ignored), so every backend does
the same amount of work for the same case.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from infermeter.backends.base import BackendInfo
from infermeter.case import generation_case_id

OnToken = Callable[[], None]


@dataclass(frozen=True)
class GenerateCase:
    """One generation case: which model on which backend, how long a prompt, how many tokens, how many at once.

    `model` is a GGUF path (llama-cpp), a Hugging Face folder (transformers, vllm, tensorrt-llm), or the word
    `tiny-llama` (the offline test model, built on demand). `requests` is the number of timed requests,
    `warmup` the untimed ones before them.
    """

    model: str
    backend: str
    prompt_len: int = 64
    gen_len: int = 32
    batch: int = 1
    threads: int = 1
    requests: int = 5
    warmup: int = 1
    options: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 600.0
    seed: int = 0

    @property
    def id(self) -> str:
        """A readable, stable identifier of the controlled variables."""
        return generation_case_id(
            self.model, self.backend, self.prompt_len, self.gen_len, self.batch, self.threads, self.options
        )

    def option(self, key: str, default: str | None = None) -> str | None:
        """The value of option `key`, or `default`."""
        return dict(self.options).get(key, default)


@dataclass
class GenerationSession(ABC):
    """A loaded causal LM. `load_phases_s` and `notes` as in `infermeter.backends.base.Session`."""

    load_phases_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` in this model's vocabulary (no BOS)."""

    @abstractmethod
    def generate(self, prompt_ids: list[int], gen_len: int, batch: int, on_token: OnToken) -> list[list[int]]:
        """Greedy-generate exactly `gen_len` tokens for `batch` copies of `prompt_ids`, calling `on_token()`
        after each step; returns the generated ids per sequence. Any cached state of an earlier call is
        dropped first: a repeated prompt must pay its prefill again."""

    @abstractmethod
    def effective_precision(self) -> str:
        """What the weights really are (GGUF file type, torch dtype…)."""

    def model_size_mb(self) -> float | None:
        """Size of the model's weights on disk, when known."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free the model."""


class GenerationBackend(BackendInfo):
    """A way to run causal LMs. Its name, device, distribution, options and `available()` are those of every
    registered backend (`infermeter.backends.base.BackendInfo`); it is registered in `infermeter.backends.registry`
    with the task `generate`."""

    @classmethod
    def unsupported_reason(cls, case: GenerateCase) -> str | None:
        """Why this backend cannot run `case` (checked before loading), or None."""
        return None

    @abstractmethod
    def load(self, case: GenerateCase) -> GenerationSession:
        """Load `case.model`; all slow work happens here and is named in `load_phases_s`."""
