"""`optimize --serve`'s flags: the batching step on the pick (tune-batching's search), parsed into a
`ServingRequest`."""

from __future__ import annotations

import click

from infermeter.cli.common import parse_positive_ints, split_values
from infermeter.core.errors import UsageError
from infermeter.optimize.request import ServingRequest
from infermeter.serve import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_BATCHES,
    DEFAULT_MAX_DELAYS_MS,
    DEFAULT_POINT_DURATION_S,
    DEFAULT_WORKERS,
)


def joined(values: tuple[float, ...]) -> str:
    """`1,2,4`: a default grid as the flags take it."""
    return ",".join(f"{v:g}" for v in values)


def serve_flags(function: click.decorators.FC) -> click.decorators.FC:
    """The flags of the serving step, added to `optimize`."""
    decorators = [
        click.option(
            "--serve",
            is_flag=True,
            help="The goal is a server: run tune-batching's search on the pick "
            "(needs --slo-p99-ms) and write the measured batching and instances for `serve DIR` and "
            "`deploy`. Also on with --slo-p99-ms alone.",
        ),
        click.option(
            "--slo-p99-ms",
            type=float,
            help="The server's P99 latency SLO (queueing included): the "
            "batching policy with the highest throughput within it is kept.",
        ),
        click.option(
            "--serve-max-batch",
            multiple=True,
            default=[joined(DEFAULT_MAX_BATCHES)],
            show_default=True,
            help="Max-batch values the serving step tries.",
        ),
        click.option(
            "--serve-max-delay-ms",
            multiple=True,
            default=[joined(DEFAULT_MAX_DELAYS_MS)],
            show_default=True,
            help="Batcher delays (ms) the serving step tries.",
        ),
        click.option(
            "--serve-workers",
            multiple=True,
            default=[joined(DEFAULT_WORKERS)],
            show_default=True,
            help="Model instances (server workers) the serving step tries.",
        ),
        click.option(
            "--serve-duration",
            type=float,
            default=DEFAULT_POINT_DURATION_S,
            show_default=True,
            help="Seconds of load per point of the serving step.",
        ),
        click.option(
            "--serve-concurrency",
            type=int,
            default=DEFAULT_CONCURRENCY,
            show_default=True,
            help="Most requests in flight in the serving step.",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def serving_request(
    serve: bool,
    slo_p99_ms: float | None,
    serve_max_batch: tuple[str, ...],
    serve_max_delay_ms: tuple[str, ...],
    serve_workers: tuple[str, ...],
    serve_duration: float,
    serve_concurrency: int,
) -> ServingRequest | None:
    """The serving step asked for (`--serve`, or an SLO given), or None. UsageError for `--serve` without an SLO
    and for values that are not numbers; ranges are checked with the request."""
    if slo_p99_ms is None:
        if serve:
            raise UsageError("--serve needs --slo-p99-ms: the P99 the server must meet (e.g. --slo-p99-ms 50)")
        return None
    delays = []
    for item in split_values(serve_max_delay_ms):
        try:
            delays.append(float(item))
        except ValueError:
            raise UsageError(f"--serve-max-delay-ms {item!r} is not a number") from None
    return ServingRequest(
        slo_p99_ms=slo_p99_ms,
        max_batches=tuple(parse_positive_ints(serve_max_batch, "--serve-max-batch")),
        max_delays_ms=tuple(delays),
        workers=tuple(parse_positive_ints(serve_workers, "--serve-workers")),
        duration_s=serve_duration,
        concurrency=serve_concurrency,
    )
