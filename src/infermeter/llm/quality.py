"""Quality of a GGUF variant: perplexity on the shipped text, and top-1 agreement with a reference variant.

Both are measured by llama.cpp itself (logits of every position of the shipped text, one forward pass per
window of `n_ctx` tokens, no overlap). Perplexity = exp(mean negative log-likelihood of each next token).
Agreement = the fraction of positions where the variant's most likely next token equals the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infermeter.core.errors import InfermeterError


@dataclass(frozen=True)
class NextTokenScores:
    """Per-position results of one model on one text."""

    nll: np.ndarray  # negative log-likelihood of each actual next token (nats)
    top1: np.ndarray  # the model's most likely next token at each position

    @property
    def perplexity(self) -> float:
        """exp(mean NLL)."""
        return float(np.exp(self.nll.mean()))


def agreement(scores: NextTokenScores, reference: NextTokenScores) -> float:
    """Fraction of positions where both pick the same next token (over the shorter of the two)."""
    count = min(len(scores.top1), len(reference.top1))
    if count == 0:
        return float("nan")
    return float(np.mean(scores.top1[:count] == reference.top1[:count]))


def score_text(
    gguf_path: Path, text: str, n_ctx: int = 256, max_tokens: int = 1024, threads: int = 1
) -> NextTokenScores:
    """Next-token NLL and top-1 choice at every position of `text` (first `max_tokens` tokens) with llama.cpp."""
    from llama_cpp import Llama

    llm = Llama(
        model_path=str(gguf_path), n_ctx=n_ctx, n_batch=n_ctx, logits_all=True, n_threads=threads, verbose=False
    )
    try:
        ids = llm.tokenize(text.encode(), add_bos=False)[:max_tokens]
        if len(ids) < 2:
            raise InfermeterError("the text is too short to score (fewer than 2 tokens)")
        nll: list[np.ndarray] = []
        top1: list[np.ndarray] = []
        for begin in range(0, len(ids) - 1, n_ctx):
            window = ids[begin : begin + n_ctx + 1]
            if len(window) < 2:
                break
            llm.reset()
            llm.eval(window[:-1])
            logits = np.asarray(llm.scores[: len(window) - 1], dtype=np.float64)
            shifted = logits - logits.max(axis=1, keepdims=True)
            log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            targets = np.asarray(window[1:])
            nll.append(-log_probs[np.arange(len(targets)), targets])
            top1.append(logits.argmax(axis=1))
        return NextTokenScores(np.concatenate(nll), np.concatenate(top1))
    finally:
        llm.close()


def score_arrays(gguf_path: Path, text: str, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """`score_text` as plain arrays (nll, top1), for a worker process to send back (`isolation.call_in_worker`)."""
    scores = score_text(gguf_path, text, threads=threads)
    return scores.nll, scores.top1
