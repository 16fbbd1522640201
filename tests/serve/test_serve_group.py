"""The serving option group: one declaration of the model flags for serve, load and tune-batching, one typed
ServedModel handed to each, and the `infermeter serve` arguments it gives a server this process starts."""

from __future__ import annotations

from typing import Any

import click

from infermeter.cli.app import app
from infermeter.cli.serve_group import _GROUP_PARAMS, ServedModel, serving_options

COMMANDS = ("serve", "load", "tune-batching")


def _declared(command: click.Command) -> dict[str, tuple[Any, ...]]:
    return {
        str(p.name): (tuple(p.opts), p.default, getattr(p, "help", None), p.multiple)
        for p in command.params
        if p.name in _GROUP_PARAMS and p.name != "backend"
    }


def test_the_group_is_declared_alike_in_every_serving_command() -> None:
    declared = [_declared(app.commands[name]) for name in COMMANDS]
    assert set(declared[0]) == set(_GROUP_PARAMS) - {"backend"}
    assert declared[1] == declared[0] and declared[2] == declared[0]
    backends = {name: next(p for p in app.commands[name].params if p.name == "backend") for name in COMMANDS}
    assert [backends[name].required for name in COMMANDS] == [False, False, True]
    assert all(tuple(p.opts) == ("--backend", "-b") for p in backends.values())


def test_the_command_gets_one_served_model() -> None:
    seen: list[ServedModel] = []

    @click.command()
    @click.argument("model")
    @serving_options("model", "help")
    @click.option("--other", default=1)
    def command(served: ServedModel, other: int) -> None:
        seen.append(served)
        assert other == 2

    command.main(
        [
            "m.onnx",
            "-b",
            "null",
            "--threads",
            "2",
            "--input",
            "x:1x8",
            "-O",
            "a=1",
            "--buckets",
            "8,16",
            "--other",
            "2",
        ],
        standalone_mode=False,
    )
    # No --precision: None, and the server it starts takes the model's own (int8 for a quantized graph).
    assert seen == [
        ServedModel(
            "m.onnx",
            "null",
            precision=None,
            threads=2,
            inputs=("x:1x8",),
            data=None,
            options=("a=1",),
            buckets=("8,16",),
            max_queue=256,
        ),
    ]
    assert seen[0].serve_args() == [
        "m.onnx", "--backend", "null", "--max-queue", "256", "--threads", "2",
        "--input", "x:1x8", "--option", "a=1", "--buckets", "8,16",
    ]  # fmt: skip
    assert ServedModel("m.onnx", "null", precision="bf16").serve_args()[3:5] == ["--precision", "bf16"]
