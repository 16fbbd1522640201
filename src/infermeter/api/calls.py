"""The Python API: `infermeter.bench(...)` runs what `infermeter bench` runs and returns `Results`;
`infermeter.explain(...)` returns what `infermeter explain` prints, as its record.

It builds the same `BenchRequest` the CLI builds from its flags, so the matrix, the checks, the default model and
backends, the isolated workers, the interleaved rounds, the stop rule and the results file are the CLI's own
(`measure.request`, `measure.benchrun`). Only the spelling differs: keywords instead of flags, Python values
instead of strings (strings in the CLI's syntax are accepted too).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from infermeter.api.results_view import Results
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError
from infermeter.core.validation import SETTING_FLAGS, parse_fraction, split_values
from infermeter.measure.request import BenchRequest, Sizes

Names = str | Path | Iterable[str | Path] | None
SizesArg = Mapping[str, Sequence[int]] | Sequence[str] | str | None

# A setting may also be spelled as its CLI flag (`iterations` for `min_iterations`, `min_time` for `min_time_s`);
# a negated flag (--no-interleave) is not a keyword: `interleave=False` says it.
_SETTING_ALIASES = {
    flag.removeprefix("--").replace("-", "_"): name
    for name, flag in SETTING_FLAGS.items()
    if not flag.startswith("--no-")
}


def _names(value: Names) -> tuple[str, ...]:
    """Names given as one string (comma-separated, as on the command line) or a list."""
    if value is None:
        return ()
    if isinstance(value, str | Path):
        value = [value]
    return tuple(split_values(str(item) for item in value))


def _ints(value: int | str | Iterable[int], name: str) -> tuple[int, ...]:
    """Positive integers given as one, a list, or a string in the CLI's syntax (`"1,16"`)."""
    if isinstance(value, str):
        from infermeter.core.validation import parse_positive_ints

        return tuple(parse_positive_ints([value], name))
    items = [value] if isinstance(value, int) else list(value)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or item <= 0:
            raise UsageError(f"{name} {item!r} is not a positive integer")
    return tuple(items)


def _sizes(value: SizesArg, name: str, parse: Callable[[str], tuple[str, Sequence[int]]]) -> Sizes:
    """Per-name sizes, as a mapping ({"seq": [16, 64]}) or strings in the CLI's syntax."""
    if value is None:
        return ()
    pairs = value.items() if isinstance(value, Mapping) else map(parse, [value] if isinstance(value, str) else value)
    return tuple((str(key), _ints(sizes, name)) for key, sizes in pairs)


def _options(value: Mapping[str, object] | Sequence[str] | None) -> tuple[tuple[str, str], ...]:
    """Backend options as a mapping ({"onnxruntime.opt_level": "basic"}) or `KEY=VALUE` strings."""
    from infermeter.core.validation import parse_options

    if value is None:
        return ()
    if isinstance(value, Mapping):
        value = [f"{key}={str(v).lower() if isinstance(v, bool) else v}" for key, v in value.items()]
    return parse_options([value] if isinstance(value, str) else value)


def _input_values(value: Mapping[str, object] | None) -> tuple[tuple[str, str], ...]:
    """Constant inputs as a mapping ({"sr": 16000}, {"scales": [0.667, 1, 0.8]}), checked as `--input NAME=VALUE`
    is."""
    from infermeter.models.input_flags import parse_input_flags

    def text(v: object) -> str:
        if isinstance(v, str) or not isinstance(v, Sequence):
            return str(v).lower() if isinstance(v, bool) else str(v)
        return ",".join(text(item) for item in v)  # a small constant vector: {"scales": [0.667, 1, 0.8]}

    return parse_input_flags([f"{name}={text(v)}" for name, v in (value or {}).items()])[1]


def _unknown_keyword(key: str) -> UsageError:
    known = [*inspect.signature(bench).parameters, *(f.name for f in dataclasses.fields(MeasureSettings))]
    known += list(_SETTING_ALIASES)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    fields = ", ".join(f.name for f in dataclasses.fields(MeasureSettings))
    return UsageError(f"bench() got an unknown keyword {key!r}{hint} (measurement settings: {fields})")


def _setting(key: str, value: Any, default: Any) -> Any:
    """A setting's value checked against the type of its default (a target_ci may be written "1%")."""
    if key == "target_ci" and isinstance(value, str):
        return parse_fraction(value, key)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok:
        raise UsageError(f"{key}={value!r}: expected {type(default).__name__}")
    return value


def measure_settings(base: MeasureSettings | None, given: Mapping[str, Any]) -> MeasureSettings:
    """`base` (default: the CLI's defaults) with the given settings, by field name (`min_time_s`) or the CLI
    flag's spelling (`min_time`, `iterations`, `warmup`). UsageError for an unknown or mistyped one."""
    base = base or MeasureSettings()
    fields = {f.name for f in dataclasses.fields(MeasureSettings)}
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in given.items():
        name = key if key in fields else _SETTING_ALIASES.get(key)
        if name is None:
            raise _unknown_keyword(key)
        if name in values:
            raise UsageError(f"{spelled[name]} and {key} are the same setting ({name}): give one")
        values[name], spelled[name] = _setting(key, value, getattr(base, name)), key
    return dataclasses.replace(base, **values)


def _call_text(arguments: Mapping[str, Any]) -> str:
    """The call as the results file's `command` records it: the arguments that differ from the defaults."""
    params = inspect.signature(bench).parameters
    given = {k: v for k, v in arguments.items() if k in params and k != "measure" and params[k].default != v}
    given |= arguments.get("measure", {})
    return "infermeter.bench(" + ", ".join(f"{k}={v!r}" for k, v in given.items()) + ")"


def bench(
    models: Names = None,
    *,
    backends: Names = None,
    batch: int | str | Sequence[int] | None = None,
    precision: str | Sequence[str] | None = None,
    shape_mode: str | Sequence[str] = "static",
    streams: int | str | Sequence[int] = 1,
    threads: int = 0,
    fallback: str | Sequence[str | Sequence[str]] = (),
    options: Mapping[str, object] | Sequence[str] | None = None,
    inputs: SizesArg = None,
    data: str | Path | None = None,
    input_values: Mapping[str, object] | None = None,
    reshape: SizesArg = None,
    dynamic: SizesArg = None,
    buckets: SizesArg = None,
    seq_len: int | None = None,
    settings: MeasureSettings | None = None,
    isolate: bool = True,
    roofline: bool = True,
    history: bool = False,
    output: str | Path | None = None,
    progress: bool = True,
    allow_mixed_precision: bool = False,
    allocators: str | Sequence[str] = (),
    **measure: Any,
) -> Results:
    """Benchmark `models` (zoo names, files, `hf:` refs; default: the CLI's default model) on `backends`
    (default: every available CPU backend), as `infermeter bench` does, and return the Results.

    Each keyword mirrors a CLI flag: `batch=[1, 16]` is `--batch 1,16` (None, the default: 1 and 16, or the
    batch the model fixes), `options={"onnxruntime.opt_level":
    "basic"}` is `-O onnxruntime.opt_level=basic`, `inputs={"input": [1, 3, 224, 224]}` is `--input`,
    `input_values={"sr": 16000}` is `--input sr=16000`, `data="calib.npz"` is `--data calib.npz`,
    `reshape={"images": [1, 3, 480, 640]}` is `--reshape`, `precision=None` each model's own (int8 for a
    quantized model, else fp32),
    `isolate=False` is `--no-isolation`, `roofline=False` is `--no-roofline`, `allocators="glibc,jemalloc"` is
    `--allocator`. Measurement settings go as further
    keywords named as MeasureSettings' fields or as their flags (`min_time_s=0.5` or `min_time=0.5`,
    `iterations=20`, `target_ci=0` or "1%", `rounds`, `interleave=False`), or whole as `settings=`.

    `output` writes the results file as the run goes (so `infermeter bench --resume` can finish an interrupted
    run); without it the results stay in memory until Results.save. `history` records the run in the history
    database (the CLI's default; off here). `progress` shows the CLI's progress display on stderr.
    Raises UsageError (bad keyword or value), ModelError (unknown model) before anything runs.
    """
    arguments = dict(locals())
    run_only = ("isolate", "roofline", "history", "output", "progress", "allow_mixed_precision")
    # Every other keyword is the request's: one bench() gains and _checked_request lacks is a TypeError, not lost.
    request = _checked_request(**{key: value for key, value in arguments.items() if key not in run_only})
    # Messages name a setting as the caller spelled it (`iterations`, not `min_iterations`).
    spelled = {_SETTING_ALIASES.get(key, key): key for key in measure}
    path = Path(output) if output is not None else None
    return _run(
        request, spelled, _call_text(arguments), path, isolate, roofline, history, progress, allow_mixed_precision
    )


def _checked_request(
    settings: MeasureSettings | None,
    measure: Mapping[str, Any],
    *,
    models: Names,
    backends: Names,
    batch: int | str | Sequence[int] | None,
    precision: str | Sequence[str] | None,
    shape_mode: str | Sequence[str],
    streams: int | str | Sequence[int],
    threads: int,
    fallback: str | Sequence[str | Sequence[str]],
    options: Mapping[str, object] | Sequence[str] | None,
    inputs: SizesArg,
    data: str | Path | None,
    input_values: Mapping[str, object] | None,
    reshape: SizesArg,
    dynamic: SizesArg,
    buckets: SizesArg,
    seq_len: int | None,
    allocators: str | Sequence[str],
) -> BenchRequest:
    """The BenchRequest of bench()'s keywords, each checked and parsed as the CLI parses its flag."""
    from infermeter.measure.scenarios import scenario_of
    from infermeter.measure.shapes import parse_sizes
    from infermeter.models.input_flags import parse_input_override

    for key, value in (("threads", threads), ("seq_len", seq_len)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UsageError(f"{key}={value!r}: expected an integer")
    settings = measure_settings(settings, measure)
    points = scenario_of(settings).dynamic_points
    return BenchRequest(
        models=_names(models),
        backends=_names(backends),
        fallback=tuple(_names(chain) for chain in ([fallback] if isinstance(fallback, str) else fallback)),
        batch=() if batch is None else _ints(batch, "batch"),
        precision=_names(precision),
        shape_mode=_names(shape_mode),
        streams=_ints(streams, "streams"),
        threads=threads,
        inputs=_sizes(inputs, "inputs", parse_input_override),
        reshape=_sizes(reshape, "reshape", lambda text: parse_input_override(text, "reshape")),
        options=_options(options),
        dynamic=_sizes(dynamic, "dynamic", lambda text: parse_sizes(text, "dynamic", points)),
        buckets=_sizes(buckets, "buckets", lambda text: parse_sizes(text, "buckets")),
        seq_len=seq_len,
        settings=settings,
        data=None if data is None else str(data),
        input_values=_input_values(input_values),
        allocators=_names(allocators),
    )


def _run(
    request: BenchRequest,
    spelled: Mapping[str, str],
    call_text: str,
    output: Path | None,
    isolate: bool,
    roofline: bool,
    history: bool,
    progress: bool,
    allow_mixed_precision: bool,
) -> Results:
    """Build the matrix of `request` and run it as `infermeter bench` runs it (the call recorded as `call_text`;
    a setting named in messages as the caller `spelled` it)."""
    from infermeter.machine.environment import collect_environment
    from infermeter.measure.benchrun import BenchDisplay, SilentDisplay, new_sweep, run_bench
    from infermeter.measure.request import build_matrix
    from infermeter.measure.scenarios import LATENCY

    display: BenchDisplay = SilentDisplay()
    if progress:
        from infermeter.report.terminal import ConsoleDisplay

        display = ConsoleDisplay(exit_on_interrupt=False)
    matrix = build_matrix(request, display.note, lambda name: spelled.get(name, name))
    sweep = new_sweep(output, matrix, LATENCY, isolate, [call_text], collect_environment())
    run = run_bench(sweep, display, roofline=roofline, history=history)
    return Results(run.results, run.path, allow_mixed_precision)


def explain(
    model: str | Path,
    backends: Names,
    *,
    batch: int = 1,
    precision: str = "fp32",
    threads: int = 0,
    options: Mapping[str, object] | Sequence[str] | None = None,
    inputs: SizesArg = None,
    reshape: SizesArg = None,
    iterations: int = 30,
    flops: bool = True,
    output: str | Path | None = None,
) -> Any:
    """Explain, as `infermeter explain` does, where each of `backends` (two or more) spends its time on `model`:
    returns the `ExplainRecord` (its `to_dict()` is the JSON of `-o`), written to `output` when given. Engines
    that fail or give no per-unit profile keep their row with the reason; UsageError for bad arguments."""
    from infermeter.explain.output import write_record
    from infermeter.explain.run import ExplainRequest, explain_model
    from infermeter.models.input_flags import parse_input_override
    from infermeter.results.env import default_threads

    request = ExplainRequest(
        model=str(model),
        engines=_names(backends),
        batch=batch,
        precision=precision,
        threads=threads or default_threads(),
        inputs=_sizes(inputs, "inputs", parse_input_override),
        reshape=_sizes(reshape, "reshape", lambda text: parse_input_override(text, "reshape")),
        options=_options(options),
        iterations=iterations,
        flops=flops,
    )
    record = explain_model(request)
    if output is not None:
        write_record(record, Path(output))
    return record
