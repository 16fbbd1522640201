"""What the server says it did during a load run, beside the client's figures: the batches it formed (by size) and
the mean wait of a request in its queue, from Triton's statistics extension (`GET /v2/models/NAME/stats`, which
`infermeter serve` and Triton both answer), read before and after the run. A server without the endpoint, or a
gRPC target, gives nothing, and the run's figures are the client's alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from infermeter.load.http_client import fetch


@dataclass(frozen=True)
class StatsSnapshot:
    """Cumulative counts since the server started: requests queued (`queue_count`, `queue_ns`) and batches run
    by size (`batches`, size -> count)."""

    queue_count: int
    queue_ns: int
    batches: dict[int, int]


@dataclass(frozen=True)
class ServerSide:
    """The server's own account of one run: batches formed by size, and the mean queue wait per request."""

    batches: dict[int, int]
    queue_mean_ms: float | None

    def line(self) -> str:
        """`server: 310 batches (1 ×20, 4 ×100, 8 ×190); queue wait mean 2.10 ms`."""
        sizes = ", ".join(f"{size} ×{count}" for size, count in sorted(self.batches.items()))
        total = sum(self.batches.values())
        queue = "-" if self.queue_mean_ms is None else f"{self.queue_mean_ms:.2f} ms"
        return f"server: {total} batches ({sizes or 'none'}); queue wait mean {queue}"


async def snapshot(base_url: str, model_name: str, headers: dict[str, str]) -> StatsSnapshot | None:
    """The model's statistics now, or None when the server does not answer them."""
    try:
        status, body = await fetch(f"{base_url}/v2/models/{model_name}/stats", headers=headers)
        if status != 200:
            return None
        entry: dict[str, Any] = json.loads(body)["model_stats"][0]
        queue = entry["inference_stats"]["queue"]
        batches = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in entry.get("batch_stats", [])}
        return StatsSnapshot(int(queue["count"]), int(queue["ns"]), batches)
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def difference(before: StatsSnapshot | None, after: StatsSnapshot | None) -> ServerSide | None:
    """What the server did between two snapshots; None when either is missing."""
    if before is None or after is None:
        return None
    batches = {size: count - before.batches.get(size, 0) for size, count in after.batches.items()}
    queued = after.queue_count - before.queue_count
    queue_ms = (after.queue_ns - before.queue_ns) / queued / 1e6 if queued > 0 else None
    return ServerSide({size: count for size, count in batches.items() if count > 0}, queue_ms)
