"""The serving option group shared by `serve`, `load` and `tune-batching`: the model, its backend and the
server-side flags, declared once and handed to the command as one typed `ServedModel`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

import click

from infermeter.core.case import PRECISIONS

# The click parameters the group folds into a ServedModel (the model argument is named by the command).
_GROUP_PARAMS = ("backend", "precision", "threads", "inputs", "data", "option", "buckets", "max_queue")


@dataclass(frozen=True)
class ServedModel:
    """A model to serve and how: what `serve` serves, what `load MODEL` serves before loading it, and what
    `tune-batching` serves under each policy. The flags' values as given; each command checks what it uses."""

    model: str
    backend: str | None = None
    _: KW_ONLY  # the rest by keyword
    precision: str | None = None  # None: the model's own (int8 for a quantized graph, else fp32)
    threads: int = 0
    inputs: tuple[str, ...] = ()
    data: str | None = None
    options: tuple[str, ...] = ()
    buckets: tuple[str, ...] = ()
    max_queue: int = 256

    def serve_args(self) -> list[str]:
        """The `infermeter serve` arguments that serve this model (for a server this process spawns)."""
        args = [self.model, "--backend", self.backend or ""]
        args += ["--precision", self.precision] if self.precision else []  # else the server takes the model's own
        args += ["--max-queue", str(self.max_queue)]
        if self.threads:
            args += ["--threads", str(self.threads)]
        if self.data:
            from infermeter.models.feeds_data import absolute_data_ref

            args += ["--data", absolute_data_ref(self.data)]
        for flag, values in (("--input", self.inputs), ("--option", self.options), ("--buckets", self.buckets)):
            for value in values:
                args += [flag, value]
        return args


def serving_options(
    model_param: str, backend_help: str, backend_required: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the group's flags to a click command and call it with `served: ServedModel` in their place, built
    from the command's argument `model_param` and the group's flags."""
    decorators = [
        click.option("--backend", "-b", required=backend_required, help=backend_help),
        click.option(
            "--precision",
            type=click.Choice(PRECISIONS),
            help="Default: the model's own (int8 for a quantized graph, else fp32).",
        ),
        click.option("--threads", type=int, default=0, help="Intra-op threads in total, split across workers."),
        click.option(
            "--input",
            "inputs",
            multiple=True,
            help="A dynamic input's shape for warm-up, NAME:1x128, or a constant a request may omit, NAME=VALUE.",
        ),
        click.option("--data", help="Real samples (.npz, folder of .npy or images, file.py:function) to warm up on."),
        click.option("--option", "-O", multiple=True, help="Backend option KEY=VALUE (e.g. null.latency_ms=5)."),
        click.option(
            "--buckets",
            multiple=True,
            help="Shape buckets: pad a dynamic axis up to these sizes (16,32,64 or NAME:AXIS=16,32,64).",
        ),
        click.option("--max-queue", type=int, default=256, show_default=True, help="Waiting requests before 503."),
    ]

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def with_served(*args: Any, **kwargs: Any) -> Any:
            group = {name: kwargs.pop(name) for name in _GROUP_PARAMS}
            served = ServedModel(
                model=kwargs.pop(model_param),
                backend=group["backend"],
                precision=group["precision"],
                threads=group["threads"],
                inputs=tuple(group["inputs"]),
                data=group["data"],
                options=tuple(group["option"]),
                buckets=tuple(group["buckets"]),
                max_queue=group["max_queue"],
            )
            return command(*args, served=served, **kwargs)

        wrapped: Callable[..., Any] = with_served
        for decorator in reversed(decorators):
            wrapped = decorator(wrapped)
        return wrapped

    return wrap
