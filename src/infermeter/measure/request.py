"""What a `bench` run asks for, checked and resolved into the matrix it runs: one path for the CLI and the
Python API (`infermeter.bench`), so both accept, refuse and default the same things.

The CLI parses its flags into a BenchRequest; the API builds one from its keywords. `build_matrix` then checks
every value, resolves the models, picks the default backends and returns the `Matrix` a sweep runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from infermeter.case import PRECISIONS, SHAPE_MODES, Case, MeasureSettings
from infermeter.checks import check_settings, choose, require_positive, setting_flag
from infermeter.errors import MissingExtra, UsageError
from infermeter.extras import no_engine_message, require_torch_form
from infermeter.measure.plan import Matrix
from infermeter.models.spec import ModelSpec

Sizes = tuple[tuple[str, tuple[int, ...]], ...]

# The CLI flag of a BenchRequest field, where it is not `--` + the field with dashes.
_REQUEST_FLAGS = {"models": "MODELS", "backends": "--backend", "inputs": "--input", "options": "--option"}


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
    `fallback` every available CPU backend, `threads` 0 the physical cores."""

    models: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    fallback: tuple[tuple[str, ...], ...] = ()
    batch: tuple[int, ...] = (1, 16)
    precision: tuple[str, ...] = ("fp32",)
    shape_mode: tuple[str, ...] = ("static",)
    streams: tuple[int, ...] = (1,)
    threads: int = 0
    inputs: Sizes = ()
    options: tuple[tuple[str, str], ...] = ()
    dynamic: Sizes = ()
    buckets: Sizes = ()
    seq_len: int | None = None
    settings: MeasureSettings = field(default_factory=MeasureSettings)


def backend_chains(
    request: BenchRequest, specs: Sequence[ModelSpec], note: Callable[[str], None]
) -> list[tuple[str, ...]]:
    """The backends to run, each a fallback chain (usually of one). Without backends or fallback: every available
    CPU backend that can run the models' form (a `.tflite`-only backend is left out for a zoo model, with a note)."""
    from infermeter.backends.registry import backend_names, default_backends, get_backend

    chains: list[tuple[str, ...]] = [(name,) for name in request.backends]
    chains += [chain for chain in request.fallback if chain]
    known = backend_names()
    for chain in chains:
        for name in chain:
            if name not in known:
                raise UsageError(
                    f"unknown backend {name!r}; known backends: {', '.join(known)} (see `infermeter backends`)"
                )
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
    out."""
    from infermeter.models.inputs import resolve_shapes
    from infermeter.models.spec import resolve_model
    from infermeter.models.zoo import DEFAULT_MODEL
    from infermeter.results.env import default_threads

    _check_values(request, name)
    specs = [resolve_model(ref) for ref in request.models or (DEFAULT_MODEL,)]
    chains = backend_chains(request, specs, note)
    # A model defined in PyTorch without torch installed: one line saying what to install or pass, up front.
    require_torch_form(specs, [backend for chain in chains for backend in chain])
    if not (request.precision and request.shape_mode and request.batch and chains and request.streams):
        raise UsageError(
            f"nothing to run: {name('backends')}, {name('batch')}, {name('precision')} and {name('shape_mode')} "
            "need at least one value"
        )
    all_names = {i.name for spec in specs for i in spec.inputs}
    if len(specs) == 1 or any(input_name not in all_names for input_name, _ in request.inputs):
        # With one model, every input override must name one of its inputs; resolve_shapes says which exist.
        resolve_shapes(specs[0].inputs, request.batch[0], request.inputs)
    return Matrix(
        models=tuple(specs),
        backends=tuple(chains),
        precisions=request.precision,
        batches=request.batch,
        shape_modes=request.shape_mode,
        streams=request.streams,
        threads=request.threads or default_threads(),
        input_shapes=request.inputs,
        options=request.options,
        dynamic=request.dynamic,
        buckets=request.buckets,
        seq_len=request.seq_len,
        settings=request.settings,
    )
