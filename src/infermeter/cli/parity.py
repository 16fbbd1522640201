"""`infermeter parity`: the same inputs through each backend, compared with a reference; PASS/FAIL per backend."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import choose, parse_options, require_positive, split_values, stderr, stdout
from infermeter.cli.options import BACKEND, INPUT, OPTION, RESHAPE, SEED, THREADS, option_group
from infermeter.core.case import PRECISIONS, SHAPE_MODES, Case
from infermeter.core.errors import InputSpecError, UsageError
from infermeter.figures.number_format import format_number
from infermeter.models.feeds_data import check_input_values
from infermeter.models.input_flags import parse_input_flags
from infermeter.models.inputs import Feeds, shared_dim_conflicts
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec
from infermeter.parity import ParityRecord, Tolerance

_STATUS_STYLE = {"pass": "green", "fail": "red", "error": "red", "unavailable": "yellow"}
_STATUS_WORD = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "unavailable": "SKIP"}


def _parse_candidates(values: tuple[str, ...], backends: list[str]) -> dict[str, Path]:
    served: dict[str, Path] = {}
    for item in values:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise UsageError(f"--candidate-onnx {item!r} is not BACKEND=FILE; write e.g. onnxruntime=edited.onnx")
        if name.strip() not in backends:
            raise UsageError(f"--candidate-onnx names {name.strip()!r}, which is not among the checked backends")
        served[name.strip()] = Path(path.strip())
    return served


def _data_shapes(spec: ModelSpec, feeds: Feeds) -> tuple[int, tuple[tuple[str, tuple[int, ...]], ...]]:
    batches = [feeds[i.name].shape[i.batch_axis] for i in spec.inputs if i.batch_axis is not None]
    return (batches[0] if batches else 1), tuple((i.name, tuple(feeds[i.name].shape)) for i in spec.inputs)


def _row(record: ParityRecord) -> list[str]:
    worst = record.worst()
    status = f"[{_STATUS_STYLE[record.status]}]{_STATUS_WORD[record.status]}[/]"
    if worst is None:
        return [escape(record.backend), escape(record.precision_effective or "—"), "—", "—", "—", "—", "—", status]
    return [
        escape(record.backend),
        escape(record.precision_effective or "—"),
        escape(worst.name),
        format_number(worst.max_abs_err, ".3g"),
        format_number(worst.cosine, ".6f"),
        format_number(worst.sqnr_db, ".1f"),
        format_number(worst.top1_agreement, ".2f"),
        status,
    ]


def _print_localization(backend: str, loc: dict[str, Any]) -> None:
    stdout.print(f"  [bold]localize {escape(backend)}[/]: {escape(loc.get('reason', ''))}", soft_wrap=True)
    for entry in loc.get("worst", []):
        stdout.print(
            escape(
                f"    {entry['node']} ({entry['op_type']}) tensor {entry['tensor']}: max abs err "
                f"{entry['max_abs_err']:.3g} ({entry['scaled_err']:.3g}×scale), cosine {entry['cosine']:.6f}"
            ),
            soft_wrap=True,
        )


def _write(path: Path, spec: ModelSpec, cases: list[Case], records: list[ParityRecord]) -> None:
    from infermeter.api.parity import parity_results_file
    from infermeter.results.io import write_results

    write_results(path, parity_results_file(spec, cases, records, ["infermeter", *sys.argv[1:]]))


@dataclass(frozen=True, kw_only=True)
class ToleranceFlags:
    """What the outputs are judged against: the precision and its default tolerance, or the user's own."""

    precision: str | None
    tolerance_of: str | None
    atol: float | None
    rtol: float | None
    min_cosine: float | None

    def resolve(self, spec: ModelSpec) -> tuple[str, Tolerance, bool]:
        """The precision checked, the tolerance, and whether the tolerance follows what the reference really ran
        (only a default one does: a tolerance the user set is kept as given)."""
        from infermeter.parity import default_tolerance

        (precision,) = choose([self.precision or spec.default_precision], PRECISIONS, "--precision")
        (tolerance_of,) = choose([self.tolerance_of or precision], PRECISIONS, "--tolerance")
        tolerance = default_tolerance(tolerance_of, self.atol, self.rtol, self.min_cosine)
        own = tolerance_of != precision or self.atol is not None or self.rtol is not None or self.min_cosine
        return precision, tolerance, not own


tolerance_options = option_group(
    "judged",
    ToleranceFlags,
    click.option(
        "--precision",
        help="fp32, fp16, bf16 or int8 (sets the tolerance; default: the model's own, int8 for a quantized model, "
        "else fp32).",
    ),
    click.option(
        "--tolerance",
        "tolerance_of",
        help="Judge with this precision's default tolerance instead of --precision's (e.g. a quantized "
        "--candidate-onnx run at fp32 is judged as int8).",
    ),
    click.option("--atol", type=float, help="Absolute tolerance, in units of each output's max |reference|."),
    click.option("--rtol", type=float, help="Relative tolerance (of |reference| per element)."),
    click.option("--min-cosine", type=float, help="Minimum cosine similarity per output."),
)


@click.command("parity")
@click.argument("model")
@BACKEND
@click.option("--reference", help="torch or onnxruntime (default: torch when the model has a PyTorch form).")
@tolerance_options
@click.option("--batch", type=int, help="Batch size (default 1; with --data: split the data into batches of N).")
@INPUT
@click.option("--data", type=click.Path(path_type=Path), help=".npz file with arrays named like the inputs.")
@RESHAPE
@click.option("--samples", type=int, default=4, show_default=True, help="Random input sets (without --data).")
@SEED
@THREADS
@click.option("--shape-mode", default="static", show_default=True, help="static or dynamic.")
@OPTION
@click.option(
    "--candidate-onnx",
    multiple=True,
    help="BACKEND=FILE: serve this ONNX file to BACKEND instead of the model's own (the reference keeps it).",
)
@click.option("--localize", is_flag=True, help="For a diverging ONNX-based backend, name the first divergent node.")
@click.option("--top-k", type=int, default=5, show_default=True, help="Worst nodes listed by --localize.")
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Write a results file with a parity field.")
def parity(
    model: str,
    backend: tuple[str, ...],
    reference: str | None,
    judged: ToleranceFlags,
    batch: int | None,
    inputs: tuple[str, ...],
    data: Path | None,
    reshape: tuple[str, ...],
    samples: int,
    seed: int,
    threads: int,
    shape_mode: str,
    option: tuple[str, ...],
    candidate_onnx: tuple[str, ...],
    localize: bool,
    top_k: int,
    output: Path | None,
) -> None:
    """Check that every backend computes what the reference computes: max/mean abs and rel error, cosine,
    SQNR, top-1/top-5 agreement per output; PASS/FAIL per backend (exit code 1 when any fails)."""
    from infermeter.backends.registry import default_backends, require_known_backends
    from infermeter.models.reshape import parse_reshape, reshape_notes
    from infermeter.parity.run import candidate_spec, choose_reference

    for value, flag in ((samples, "--samples"), (top_k, "--top-k"), (batch, "--batch")):
        if value is not None:
            require_positive(value, flag)
    require_positive(threads, "--threads", allow_zero=True)
    (shape_mode,) = choose([shape_mode], SHAPE_MODES, "--shape-mode") or ["static"]
    spec = resolve_model(model, parse_reshape(reshape))
    for note in reshape_notes(spec):
        stderr.print(escape(f"warning: {note}"), soft_wrap=True)
    precision, tolerance, follow_reference = judged.resolve(spec)
    ref_name = choose_reference(spec, reference)
    backends = split_values(backend) or default_backends()
    require_known_backends(backends)
    if not backends:
        raise UsageError("no backend to check: name some with --backend")
    served = {name: candidate_spec(spec, path) for name, path in _parse_candidates(candidate_onnx, backends).items()}
    feeds = _feeds(spec, batch, inputs, data, samples, seed)
    cases = _cases(spec, backends, precision, feeds, shape_mode, threads, option)
    tolerance, expected = _reference(spec, cases[0], feeds, ref_name, tolerance, follow_reference)
    records = _check_all(spec, cases, feeds.sets, expected, ref_name, tolerance, served, localize, top_k)
    _print_table(records)
    if output is not None:
        _write(output, spec, cases, records)
        stdout.print(f"results: {escape(str(output))}")
    checked = [r for r in records if r.status != "unavailable"]
    if not checked or any(r.status in ("fail", "error") for r in records):
        raise SystemExit(1)


@dataclass(frozen=True)
class _Feeds:
    """The input sets every backend gets, their batch and shapes, and where they came from (for the header)."""

    sets: list[Feeds]
    batch: int
    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    source: str


def _cases(
    spec: ModelSpec,
    backends: list[str],
    precision: str,
    feeds: _Feeds,
    shape_mode: str,
    threads: int,
    option: tuple[str, ...],
) -> list[Case]:
    """One case per checked backend, each with its own backend's `-O` options."""
    from infermeter.backends.options import options_for
    from infermeter.results.env import default_threads

    options = parse_options(option)
    return [
        Case(
            spec.ref,
            name,
            precision=precision,
            batch=feeds.batch,
            shape_mode=shape_mode,
            threads=threads or default_threads(),
            input_shapes=feeds.shapes,
            options=options_for(name, options),
            reshape=spec.reshape,
        )
        for name in backends
    ]


def _feeds(
    spec: ModelSpec, batch: int | None, inputs: tuple[str, ...], data: Path | None, samples: int, seed: int
) -> _Feeds:
    """`--data`'s arrays cut into batches, or `samples` random sets at `--input`'s shapes."""
    from infermeter.models.dim_defaults import plan_shapes
    from infermeter.parity.data import load_npz_feeds, random_feeds

    overrides, values = parse_input_flags(inputs)
    check_input_values(spec.inputs, values)
    if data is not None:
        if overrides or values:
            raise UsageError("--input and --data exclude each other: the data's arrays set the shapes")
        feed_sets = load_npz_feeds(data, spec, batch)
        batch, shapes = _data_shapes(spec, feed_sets[0])
        if any(_data_shapes(spec, f) != (batch, shapes) for f in feed_sets):
            raise InputSpecError(f"--data {data}: its batch size is not a multiple of --batch {batch}")
        return _Feeds(feed_sets, batch, shapes, f"{data} ({len(feed_sets)} batch(es))")
    batch = batch or 1
    for warning in shared_dim_conflicts(spec.inputs, overrides):
        stderr.print(escape(f"warning: {warning}"), soft_wrap=True)
    planned, sizing = plan_shapes(spec.inputs, batch, overrides)
    if sizing:  # a free dim nobody set: its stated default, said with the flag that changes it
        stderr.print(escape(f"note: {sizing}"), soft_wrap=True)
        overrides = tuple(planned.items())
    feed_sets = random_feeds(spec, batch, overrides, samples, seed, values)
    shapes = tuple((i.name, tuple(feed_sets[0][i.name].shape)) for i in spec.inputs)
    return _Feeds(feed_sets, batch, shapes, f"random × {samples} (seed {seed})")


def _reference(
    spec: ModelSpec, case: Case, feeds: _Feeds, ref_name: str, tolerance: Tolerance, follow: bool
) -> tuple[Tolerance, list[list[Any]]]:
    """The reference's outputs, the tolerance (a default one follows what the reference really ran) and the
    header line that says both."""
    from infermeter.parity import tolerance_for_reference
    from infermeter.parity.run import reference_run

    stderr.print(escape(f"running the reference ({ref_name})…"))
    expected, ran = reference_run(spec, case, feeds.sets, ref_name)
    if follow:
        tolerance = tolerance_for_reference(tolerance, ran)
    own = " (the model's own graph)" if ran == spec.precision and ran != "fp32" else ""
    shape_text = "; ".join(f"{n}[{'x'.join(map(str, d))}]" for n, d in feeds.shapes)
    stdout.print(
        escape(
            f"parity of {spec.ref} · reference {ref_name} {ran}{own} · inputs {shape_text} {feeds.source} · "
            f"tolerance {tolerance.precision}: {tolerance.describe()}"
        ),
        soft_wrap=True,
    )
    return tolerance, expected


def _check_all(
    spec: ModelSpec,
    cases: list[Case],
    feed_sets: list[Feeds],
    expected: list[list[Any]],
    ref_name: str,
    tolerance: Tolerance,
    served: dict[str, ModelSpec],
    localize: bool,
    top_k: int,
) -> list[ParityRecord]:
    from infermeter.parity.localize import localize as localize_divergence
    from infermeter.parity.run import check_backend

    records = []
    for case in cases:
        stderr.print(escape(f"checking {case.backend}…"))
        record = check_backend(spec, case, feed_sets, expected, ref_name, tolerance, served=served.get(case.backend))
        if localize and record.status == "fail":
            stderr.print(escape(f"localizing {case.backend}…"))
            candidate = served.get(case.backend)
            record.localization = localize_divergence(
                spec,
                case,
                feed_sets[0],
                tolerance,
                candidate_onnx=Path(candidate.path) if candidate and candidate.path else None,
                top_k=top_k,
            )
        records.append(record)
    return records


def _print_table(records: list[ParityRecord]) -> None:
    table = Table(header_style="bold")
    for column in ("backend", "precision", "worst output", "max abs err", "cosine", "SQNR dB", "top-1", "result"):
        table.add_column(column, justify="left" if column in ("backend", "precision", "worst output") else "right")
    for record in records:
        table.add_row(*_row(record))
    stdout.print(table)
    for record in records:
        style = _STATUS_STYLE[record.status]
        stdout.print(f"[{style}]{escape(record.backend)}[/]: {escape(record.reason)}", soft_wrap=True)
        if record.localization:
            _print_localization(record.backend, record.localization)
