"""`infermeter explain MODEL -b A,B[,C]`: where each engine spends its time on the model, block by block."""

from __future__ import annotations

from pathlib import Path

import click

from infermeter.cli.common import parse_options, split_values, stderr, stdout
from infermeter.cli.options import BACKEND, INPUT, OPTION, RESHAPE, THREADS


@click.command("explain")
@click.argument("model")
@BACKEND
@click.option("--batch", type=int, default=1, show_default=True, help="Batch size of the explained case.")
@click.option("--precision", default="fp32", show_default=True, help="fp32, fp16, bf16, int8.")
@THREADS
@INPUT
@RESHAPE
@OPTION
@click.option("--profile-iterations", type=int, default=30, show_default=True,
              help="Iterations of each engine's timed run and of its profiled run (median per unit).")  # fmt: skip
@click.option(
    "--top-blocks", type=int, default=10, show_default=True, help="How many blocks to list (the rest summed)."
)
@click.option("--no-flops", is_flag=True, help="Skip FLOPs and GFLOP/s per block.")
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    help="Write the record: explain.json (JSON), or explain.html (a report page with bars per block).",
)
def explain_cmd(
    model: str,
    backend: tuple[str, ...],
    batch: int,
    precision: str,
    threads: int,
    inputs: tuple[str, ...],
    reshape: tuple[str, ...],
    option: tuple[str, ...],
    profile_iterations: int,
    top_blocks: int,
    no_flops: bool,
    output: Path | None,
) -> None:
    """Why one engine is faster than another on MODEL: each engine's P50, then a profile of each in a run of its
    own, aligned on the original ONNX nodes into blocks that are whole units on every engine; per block the time,
    share, kernels and the difference; findings in plain words (docs/explain.md)."""
    from infermeter.explain.console import print_record
    from infermeter.explain.output import check_profiled, write_record
    from infermeter.explain.run import ExplainRequest, explain_model
    from infermeter.models.input_flags import parse_input_flags
    from infermeter.models.reshape import parse_reshape
    from infermeter.results.env import default_threads

    shapes, _ = parse_input_flags(inputs)
    request = ExplainRequest(
        model=model,
        engines=tuple(split_values(backend)),
        batch=batch,
        precision=precision,
        threads=threads or default_threads(),
        inputs=shapes,
        reshape=parse_reshape(reshape),
        options=parse_options(list(option)),
        iterations=profile_iterations,
        flops=not no_flops,
    )
    record = explain_model(request, lambda line: stderr.print(f"[dim]{line}[/]"))
    print_record(record, stdout, max(top_blocks, 1))
    if output is not None:
        write_record(record, output)
        stderr.print(f"record: {output}")
    check_profiled(record)
