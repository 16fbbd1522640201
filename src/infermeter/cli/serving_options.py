"""The serving flags of `load` and `llm load`: the arrivals schedule, the SLO and the peak search's help, declared
once for both, and `llm load`'s own sweep flags."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

FIND_PEAK_HELP = (
    "Search the highest arrival rate at which the SLO holds, by bisection on measured rates, with the interval "
    "where it stops holding (load: P99 within --slo-p99-ms, from the capacity down; llm load: --slo-attainment of "
    "the requests within --slo, from the one --rates rate down)."
)


def arrivals_option() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--arrivals, the open-loop schedule of `load.arrivals`, declared once for `load` and `llm load`."""
    from infermeter.load.arrivals import ARRIVALS

    return click.option(
        "--arrivals",
        type=click.Choice(ARRIVALS),
        default="poisson",
        show_default=True,
        help="When open-loop requests are due (load's server scenario, --rates): Poisson (exponential gaps) or "
        "constant (even gaps), seeded by --seed.",
    )


def openai_options() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The serving sweep's own flags of `llm load` (the request shape, the rate levels, the server's metrics)."""
    decorators = [
        click.option("--prompt-len", type=int, default=64, show_default=True, help="Prompt words."),
        click.option("--gen-len", type=int, default=32, show_default=True, help="max_tokens per request."),
        click.option("--requests", type=int, help="Requests per level (default: max(8, 2 × concurrency))."),
        click.option("--slo-ttft-ms", type=float, help="Goodput SLO, time to first token at most this."),
        click.option("--slo-tpot-ms", type=float, help="Goodput SLO, time per output token at most this."),
        click.option("--ignore-eos", is_flag=True, help="Send ignore_eos (vLLM, llama.cpp) for exact lengths."),
        click.option("--rates", help="A Poisson rate sweep instead, requests/s per level, e.g. 0.5,1,2."),
        click.option(
            "--server-metrics", is_flag=True, help="Read the server's /metrics and /slots while each level runs."
        ),
        click.option(
            "--metrics-interval", type=float, default=0.5, show_default=True, help="--server-metrics: seconds."
        ),
        click.option(
            "--slo-attainment",
            type=float,
            default=0.9,
            show_default=True,
            help="The SLO holds at a level when this fraction of its requests meet it.",
        ),
        click.option("--series", help="The sweep's name in tables and charts (default: the URL)."),
    ]

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return wrap


def slo_option(prefix: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--slo NAME=MS (`load.slo`), declared once for `load` and `llm load`."""
    from infermeter.load.slo import SLO_NAMES

    return click.option(
        "--slo",
        "slo",
        multiple=True,
        metavar="NAME=MS",
        help=prefix + "goodput SLO bound, repeatable: " + ", ".join(SLO_NAMES) + " (e.g. --slo latency_ms=50).",
    )
