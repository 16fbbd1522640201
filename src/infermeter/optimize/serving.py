"""The batching policy `optimize --serve` measured on its pick, as kept in the journal and in deploy.json's
`serving` block (which `serve DIR` and `deploy` read): the policy and the figures behind it."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

# The tune-batching results of the serving step, in the optimize folder (the file `deploy --load` would take).
SERVING_FILE = "serving.json"


@dataclass(frozen=True)
class MeasuredPolicy:
    """The server policy with the highest throughput whose P99 met the SLO, for the pick `case_id`.

    `preferred_batch_sizes` are the batches the server's batcher aims for (Triton's `preferred_batch_size`): the
    measured max batch, the size the batcher fills before its delay runs out under the chosen load.
    `throughput_per_s`, `p50_ms`, `p99_ms` are the chosen policy's best closed-loop point (at `concurrency`
    requests in flight); `check_valid` and `check_reasons` the Poisson check at 90% of that throughput (None when
    not run). `load_file` and `load_case_id` name that point in the folder's tune-batching results."""

    case_id: str
    max_batch: int
    _: KW_ONLY  # the rest by keyword
    preferred_batch_sizes: tuple[int, ...]
    max_delay_ms: float
    workers: int
    throughput_per_s: float
    p50_ms: float
    p99_ms: float
    concurrency: int
    slo_p99_ms: float
    policies_tried: int
    load_file: str = SERVING_FILE
    load_case_id: str = ""
    check_valid: bool | None = None
    check_reasons: tuple[str, ...] = ()

    def label(self) -> str:
        """`max-batch 8, max-delay 1 ms, 1 instance(s)`."""
        return f"max-batch {self.max_batch}, max-delay {self.max_delay_ms:g} ms, {self.workers} instance(s)"

    def summary(self) -> str:
        """The policy and its figures in one sentence."""
        check = ""
        if self.check_valid is not None:
            verdict = "VALID" if self.check_valid else "INVALID (" + "; ".join(self.check_reasons) + ")"
            check = f"; under Poisson arrivals at 90% of that: {verdict}"
        return (
            f"{self.label()}: {self.throughput_per_s:,.1f} inferences/s at {self.concurrency} requests in flight, "
            f"P50 {self.p50_ms:.3g} ms, P99 {self.p99_ms:.3g} ms within the SLO of {self.slo_p99_ms:g} ms "
            f"(best of {self.policies_tried} policies){check}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "case_id": self.case_id,
            "max_batch": self.max_batch,
            "preferred_batch_sizes": list(self.preferred_batch_sizes),
            "max_delay_ms": self.max_delay_ms,
            "workers": self.workers,
            "throughput_per_s": self.throughput_per_s,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "concurrency": self.concurrency,
            "slo_p99_ms": self.slo_p99_ms,
            "policies_tried": self.policies_tried,
            "load_file": self.load_file,
            "load_case_id": self.load_case_id,
            "check_valid": self.check_valid,
            "check_reasons": list(self.check_reasons),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasuredPolicy:
        """Back from `to_dict` (KeyError/TypeError/ValueError when it is not one)."""
        return cls(
            case_id=str(data["case_id"]),
            max_batch=int(data["max_batch"]),
            preferred_batch_sizes=tuple(int(b) for b in data["preferred_batch_sizes"]),
            max_delay_ms=float(data["max_delay_ms"]),
            workers=int(data["workers"]),
            throughput_per_s=float(data["throughput_per_s"]),
            p50_ms=float(data["p50_ms"]),
            p99_ms=float(data["p99_ms"]),
            concurrency=int(data["concurrency"]),
            slo_p99_ms=float(data["slo_p99_ms"]),
            policies_tried=int(data["policies_tried"]),
            load_file=str(data.get("load_file", SERVING_FILE)),
            load_case_id=str(data.get("load_case_id", "")),
            check_valid=None if data.get("check_valid") is None else bool(data["check_valid"]),
            check_reasons=tuple(str(r) for r in data.get("check_reasons", ())),
        )

    def serving_block(self) -> dict[str, Any]:
        """deploy.json's `serving`: the settings `serve DIR` starts with, and the measurement behind them."""
        return {
            "max_batch": self.max_batch,
            "max_delay_ms": self.max_delay_ms,
            "workers": self.workers,
            "measured": self.to_dict(),
        }
