"""What a `bench` run asks for, checked and resolved into the matrix it runs: one path for the CLI and the
Python API (`infermeter.bench`), so both accept, refuse and default the same things.

The CLI parses its flags into a BenchRequest; the API builds one from its keywords. `build_matrix` then checks
every value, resolves the models, picks the default backends and returns the `Matrix` a sweep runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace

from infermeter.backends.registry import require_torch_form
from infermeter.backends.variant import base_name, variant_options
from infermeter.core.case import PRECISIONS, SHAPE_MODES, Case, DataSource, MeasureSettings
from infermeter.core.errors import MissingExtra, UsageError
from infermeter.core.extras import no_engine_message
from infermeter.core.validation import check_settings, choose, require_positive, setting_flag
from infermeter.measure.plan import Matrix
from infermeter.measure.scenarios import scenario_of
from infermeter.models.spec import ModelSpec

Sizes = tuple[tuple[str, tuple[int, ...]], ...]

# The batches a run measures when none is asked for and the models take any.
DEFAULT_BATCHES = (1, 16)

# The CLI flag of a BenchRequest field, where it is not `--` + the field with dashes.
_REQUEST_FLAGS = {
    "models": "MODELS",
    "backends": "--backend",
    "inputs": "--input",
    "input_values": "--input",
    "options": "--option",
    "allocators": "--allocator",
}


def cli_flag(name: str) -> str:
    """How the CLI spells a BenchRequest or MeasureSettings field: its flag."""
    if name in _REQUEST_FLAGS:
        return _REQUEST_FLAGS[name]
    flag = setting_flag(name)
    return flag if flag.startswith("--") else "--" + name.replace("_", "-")


def keyword(name: str) -> str:
    """How the Python API spells a BenchRequest or MeasureSettings field: the field itself."""
    return name


@dataclass(frozen=True)
class BenchRequest:
    """A bench run's matrix as the user gave it, already parsed but not checked. The field names are the API's
    keywords (and, with dashes, the CLI's flags): empty `models` means the default model, empty `backends` and
    `fallback` every available CPU backend, `threads` 0 the physical cores. `data` names real inputs (`--data`),
    `input_values` the constant ones (`--input NAME=VALUE`)."""

    models: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    _: KW_ONLY  # the rest by keyword
    fallback: tuple[tuple[str, ...], ...] = ()
    batch: tuple[int, ...] = ()  # none given: DEFAULT_BATCHES, or the batch the models fix (`default_batches`)
    precision: tuple[str, ...] = ()  # none given: each model's own (int8 for a quantized graph, else fp32)
    shape_mode: tuple[str, ...] = ("static",)
    streams: tuple[int, ...] = (1,)
    threads: int = 0
    inputs: Sizes = ()
    options: tuple[tuple[str, str], ...] = ()
    dynamic: Sizes = ()
    buckets: Sizes = ()
    seq_len: int | None = None
    settings: MeasureSettings = field(default_factory=MeasureSettings)
    data: str | None = None
    input_values: tuple[tuple[str, str], ...] = ()
    reshape: Sizes = ()  # `--reshape NAME:DIMS`: declared dims rewritten (`models.reshape`)
    allocators: tuple[str, ...] = ()


def _scenario_request(request: BenchRequest, name: Callable[[str], str]) -> BenchRequest:
    """The allocators checked, and `request` as its cases' scenario runs it (a soak's: `measure.soak_request`)."""
    from infermeter.measure.allocator import check_allocator
    from infermeter.measure.soak_request import soak_request

    for allocator in request.allocators:
        check_allocator(allocator)
    return soak_request(request, name)


def backend_chains(
    request: BenchRequest, specs: Sequence[ModelSpec], note: Callable[[str], None]
) -> list[tuple[str, ...]]:
    """The backends to run, each a fallback chain (usually of one). Without backends or fallback: every available
    CPU backend that can run the models' form (a `.tflite`-only backend is left out for a zoo model, with a note)."""
    from infermeter.backends.registry import default_backends, get_backend, require_known_backends

    chains: list[tuple[str, ...]] = [(name,) for name in request.backends]
    chains += [chain for chain in request.fallback if chain]
    for chain in chains:
        for entry in chain:
            require_known_backends([base_name(entry)])
            variant_options(entry)  # a misspelt variant is a usage error now, before anything runs
    if chains:
        return chains
    for name in default_backends():
        reasons = [get_backend(name).unsupported_reason(spec, Case(spec.ref, name)) for spec in specs]
        if all(reason is not None for reason in reasons):
            note(f"not running {name}: {reasons[0]}")
        else:
            chains.append((name,))
    if not chains and not default_backends():
        raise MissingExtra(no_engine_message())
    return chains


def default_batches(
    specs: Sequence[ModelSpec],
    note: Callable[[str], None],
    name: Callable[[str], str] = keyword,
    defaults: tuple[int, ...] = DEFAULT_BATCHES,
) -> tuple[int, ...]:
    """The batches of a run that asks for none: `defaults`, or the batch the models fix (a model exported with
    batch 1 runs batch 1, and `note` says so). Models that fix different batches cannot share one run's batches:
    UsageError naming each. (`bench` and `optimize` use it; `serve` bounds its --max-batch the same way.)"""
    from infermeter.models.inputs import fixed_batch

    fixed = {spec.ref: found for spec in specs if (found := fixed_batch(spec.inputs)) is not None}
    sizes = {size for _, size in fixed.values()}
    if not sizes:
        return defaults
    if len(sizes) > 1:
        listed = ", ".join(f"{ref} batch {size}" for ref, (_, size) in fixed.items())
        raise UsageError(f"the models fix different batches ({listed}); bench them apart, or give {name('batch')}")
    (size,) = sizes
    ref, (input_name, _) = next(iter(fixed.items()))
    if defaults != (size,):
        note(
            f"{ref} fixes its batch at {size} (input {input_name!r}): running batch {size}, not the default "
            f"{','.join(map(str, defaults))}"
        )
    return (size,)


def _check_values(request: BenchRequest, name: Callable[[str], str]) -> None:
    """Every value that needs no model: counts, times, and the choices of precision and shape mode."""
    check_settings(request.settings, name)
    require_positive(request.threads, name("threads"), allow_zero=True)
    if request.seq_len is not None:
        require_positive(request.seq_len, name("seq_len"))
    for key in ("batch", "streams"):
        for number in getattr(request, key):
            require_positive(number, name(key))
    choose(request.precision, PRECISIONS, name("precision"))
    choose(request.shape_mode, SHAPE_MODES, name("shape_mode"))
    if (request.dynamic or request.buckets) and "dynamic" not in request.shape_mode:
        raise UsageError(
            f"{name('dynamic')} and {name('buckets')} apply to {name('shape_mode')} dynamic; "
            f"add {name('shape_mode')} dynamic"
        )


def build_matrix(
    request: BenchRequest, note: Callable[[str], None] = lambda _text: None, name: Callable[[str], str] = keyword
) -> Matrix:
    """The matrix of `request`, every value checked (UsageError naming it as `name` spells it), the models
    resolved (ModelError), the default model and backends filled in. `note` hears why a default backend is left
    out, and the warnings about the inputs (a shared dim given two sizes)."""
    from infermeter.models.dim_defaults import with_stated_defaults
    from infermeter.models.inputs import resolve_shapes, shared_dim_conflicts
    from infermeter.models.resolve import resolve_model
    from infermeter.models.zoo import DEFAULT_MODEL
    from infermeter.results.env import default_threads

    request = _scenario_request(request, name)
    _check_values(request, name)
    specs = _reshaped([resolve_model(ref) for ref in request.models or (DEFAULT_MODEL,)], request.reshape, note)
    chains = backend_chains(request, specs, note)
    # A model defined in PyTorch without torch installed: one line saying what to install or pass, up front.
    require_torch_form(specs, [base_name(entry) for chain in chains for entry in chain])
    request = replace(request, batch=request.batch or default_batches(specs, note, name))
    if not (request.shape_mode and request.batch and chains and request.streams):
        raise UsageError(
            f"nothing to run: {name('backends')}, {name('batch')}, {name('streams')} and {name('shape_mode')} "
            "need at least one value"
        )
    all_names = {i.name for spec in specs for i in spec.inputs}
    if len(specs) == 1 or any(input_name not in all_names for input_name, _ in request.inputs):
        # With one model, every input override must name one of its inputs; resolve_shapes says which exist (a
        # free dim nobody set takes its stated default below, `stated_defaults`).
        resolve_shapes(with_stated_defaults(specs[0].inputs), request.batch[0], request.inputs)
    for spec in specs:
        own = tuple((n, dims) for n, dims in request.inputs if n in {i.name for i in spec.inputs})
        for warning in shared_dim_conflicts(spec.inputs, own):
            note(f"warning: {warning}")
    data, data_shapes = _real_inputs(request, specs, note, name)
    if request.seq_len is None:  # --seq-len sizes the `seq` dims itself
        data_shapes += stated_defaults(specs, request.batch[0], request.inputs + data_shapes, note)
    return Matrix(
        models=tuple(specs),
        backends=tuple(chains),
        precisions=request.precision,
        batches=request.batch,
        shape_modes=request.shape_mode,
        streams=request.streams,
        threads=request.threads or default_threads(),
        input_shapes=request.inputs + data_shapes,
        options=request.options,
        dynamic=request.dynamic,
        buckets=request.buckets,
        seq_len=request.seq_len,
        settings=request.settings,
        data=data,
        input_values=request.input_values,
        allocators=request.allocators,
    )


def stated_defaults(specs: list[ModelSpec], batch: int, given: Sizes, note: Callable[[str], None]) -> Sizes:
    """The shapes of the inputs whose free dims nobody set, at their stated defaults (`models.dim_defaults`), said
    in one line each model with the flag that changes them; an input name two models share is left to --input."""
    from infermeter.models.dim_defaults import plan_shapes

    names = [i.name for spec in specs for i in spec.inputs]
    added: list[tuple[str, tuple[int, ...]]] = []
    for spec in specs:
        own = tuple((n, dims) for n, dims in given if n in {i.name for i in spec.inputs})
        shapes, line = plan_shapes(spec.inputs, batch, own)
        if line is None:
            continue
        note(f"note: {spec.ref}: {line}")
        taken = {n for n, _ in own}
        added += [(n, dims) for n, dims in shapes.items() if n not in taken and names.count(n) == 1]
    return tuple(added)


def _reshaped(specs: list[ModelSpec], reshape: Sizes, note: Callable[[str], None]) -> list[ModelSpec]:
    """The models with `--reshape` applied to each that has the named inputs (the warning said once, by `note`);
    a name no model has is an error with a did-you-mean."""
    if not reshape:
        return specs
    from infermeter.models.input_flags import unknown_input
    from infermeter.models.reshape import reshape_model, reshape_notes

    names = {i.name for spec in specs for i in spec.inputs}
    for name, _ in reshape:
        if name not in names:
            raise unknown_input("--reshape", name, [i.name for i in specs[0].inputs])
    out = []
    for spec in specs:
        own = tuple((n, dims) for n, dims in reshape if n in {i.name for i in spec.inputs})
        out.append(reshape_model(spec, own) if own else spec)
        for text in reshape_notes(out[-1]):
            note(f"warning: {text}")
    return out


def _real_inputs(
    request: BenchRequest, specs: Sequence[ModelSpec], note: Callable[[str], None], name: Callable[[str], str]
) -> tuple[DataSource | None, Sizes]:
    """The constants checked against each model, and the data opened for each (UsageError/InputSpecError before
    any case runs): its DataSource, the `--input` shapes it sets, and a note when samples are reused."""
    from infermeter.models.feeds_data import check_input_values, data_note, data_shapes, open_data

    for spec in specs:
        check_input_values(
            spec.inputs, _own_values(spec, request.input_values) if len(specs) > 1 else request.input_values
        )
    all_names = {i.name for spec in specs for i in spec.inputs}
    if any(n not in all_names for n, _ in request.input_values):
        check_input_values(specs[0].inputs, request.input_values)  # names the input no model has
    if request.data is None:
        return None, ()
    if "dynamic" in request.shape_mode and not scenario_of(request.settings).draws_sizes:  # a soak's lengths
        raise UsageError(
            f"{name('data')} feeds {name('shape_mode')} static (its samples fix the shapes); "
            f"drop {name('shape_mode')} dynamic or {name('data')}"
        )
    source, shapes = None, []
    for spec in specs:
        source, samples = open_data(spec.inputs, _own_values(spec, request.input_values), request.data)
        shapes += [pair for pair in data_shapes(spec.inputs, samples, request.inputs) if pair not in shapes]
    assert source is not None
    for batch in request.batch:
        text = data_note(source, batch, request.settings.input_sets)
        if text:
            note(text)
    return source, tuple(shapes)


def _own_values(spec: ModelSpec, values: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The constants that name inputs of `spec` (a sweep of several models may set an input of one of them)."""
    names = {i.name for i in spec.inputs}
    return tuple((n, v) for n, v in values if n in names)
