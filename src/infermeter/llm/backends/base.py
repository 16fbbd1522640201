"""The contract of a generation backend: load a causal LM, generate a fixed number of tokens, report each token.

The clock stays outside backends, as in the core: `GenerationSession.generate` calls `on_token()` once per
decode step, right after the step's token(s) exist on the host, and the driver (`generate.runner`) reads the
clock there. Generation is greedy and runs exactly `gen_len` steps (EOS is ignored), so every backend does
the same amount of work for the same case.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, replace

from infermeter.backends.base import BackendInfo
from infermeter.core.case import MeasureSettings, comparison_key, generation_case_id, model_family

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
    _: KW_ONLY  # the rest by keyword
    prompt_len: int = 64
    gen_len: int = 32
    batch: int = 1
    threads: int = 1
    requests: int = 5
    warmup: int = 1
    options: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 600.0
    seed: int = 0
    # --min-time, --max-time, --target-ci, --rounds, --no-interleave (not part of the case's identity); None: none
    # of them, so the case runs exactly `requests` timed requests.
    measure: MeasureSettings | None = field(default=None, compare=False)

    @property
    def settings(self) -> MeasureSettings:
        """How the case is measured, as an inference case is (`measure.stoprule`, `measure.interleave`): at least
        `requests` timed requests after `warmup` untimed ones, within `timeout_s`; the stop rule's precision target
        judges each request's end-to-end time, i.e. its output tokens/s (gen_len / E2E)."""
        if self.measure is None:
            return MeasureSettings(
                warmup_iterations=self.warmup,
                min_iterations=self.requests,
                min_time_s=0.0,
                max_time_s=self.timeout_s,
                case_timeout_s=self.timeout_s,
                seed=self.seed,
                target_ci=0.0,
                rounds=1,
            )
        return replace(
            self.measure,
            warmup_iterations=self.warmup,
            min_iterations=self.requests,
            case_timeout_s=self.timeout_s,
            seed=self.seed,
        )

    @property
    def family(self) -> str:
        """The model without its GGUF level (`tiny-llama:q4_k_m` -> `tiny-llama`): the levels of one model are
        compared (and interleaved) with each other."""
        return model_family(self.model)

    @property
    def group_key(self) -> tuple[object, ...]:
        """The comparison group (`infermeter.core.case.comparison_key`): same model family, prompt, output length, batch
        and threads; backends and GGUF levels are compared within it."""
        shapes = (("prompt", (self.batch, self.prompt_len)), ("generated", (self.batch, self.gen_len)))
        return comparison_key(self.family, self.batch, "static", shapes, self.threads, 1, None, (), None)

    @property
    def label(self) -> str:
        """How a progress display names the case."""
        return f"{self.model} · {self.backend} b{self.batch} prompt {self.prompt_len} gen {self.gen_len}"

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
