"""The serving flags declared once for `load` and `llm load` (and `load --api openai`): the sweep's own flags, the
arrivals schedule, the SLO and the peak search's help, and which of `load`'s parameters the OpenAI API takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

# With --api openai, load takes these parameters (the others drive the KServe load generator and are refused).
OPENAI_PARAMS = {
    *(
        "target",
        "api",
        "concurrency",
        "model_name",
        "api_key",
        "timeout",
        "output",
        "scenario",
        "seed",
        "arrivals",
        "slo",
    ),
}
# The flags of the serving sweep alone (`openai_options`).
OPENAI_ONLY = (
    "prompt_len",
    "gen_len",
    "requests",
    "slo_ttft_ms",
    "slo_tpot_ms",
    "ignore_eos",
    "rates",
    "server_metrics",
    "metrics_interval",
    "slo_attainment",
    "series",
)


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


def openai_options(prefix: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The serving sweep's own flags, declared once for `llm load` and `load --api openai` (whose help says
    `prefix`, the API they apply to)."""

    def say(text: str) -> str:
        return prefix + text[0].lower() + text[1:] if prefix else text

    decorators = [
        click.option("--prompt-len", type=int, default=64, show_default=True, help=say("Prompt words.")),
        click.option("--gen-len", type=int, default=32, show_default=True, help=say("max_tokens per request.")),
        click.option("--requests", type=int, help=say("Requests per level (default: max(8, 2 × concurrency)).")),
        click.option("--slo-ttft-ms", type=float, help=say("Goodput SLO, time to first token at most this.")),
        click.option("--slo-tpot-ms", type=float, help=say("Goodput SLO, time per output token at most this.")),
        click.option("--ignore-eos", is_flag=True, help=say("Send ignore_eos (vLLM, llama.cpp) for exact lengths.")),
        click.option("--rates", help=say("A Poisson rate sweep instead, requests/s per level, e.g. 0.5,1,2.")),
        click.option(
            "--server-metrics",
            is_flag=True,
            help=say("Read the server's /metrics and /slots while each level runs."),
        ),
        click.option(
            "--metrics-interval", type=float, default=0.5, show_default=True, help="--server-metrics: seconds."
        ),
        click.option(
            "--slo-attainment",
            type=float,
            default=0.9,
            show_default=True,
            help=say("The SLO holds at a level when this fraction of its requests meet it."),
        ),
        click.option("--series", help=say("The sweep's name in tables and charts (default: the URL).")),
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
