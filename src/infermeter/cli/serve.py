"""`infermeter serve`: an Open Inference Protocol (KServe v2) server with dynamic batching, for any backend."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource
from rich.markup import escape

from infermeter.cli.common import RESHAPE_HELP, parse_options, require_positive, stderr
from infermeter.cli.serve_group import ServedModel, serving_options
from infermeter.core.errors import UsageError
from infermeter.models.input_flags import parse_input_flags
from infermeter.models.reshape import parse_reshape

if TYPE_CHECKING:
    from infermeter.models.spec import ModelSpec
    from infermeter.serve.model import ServeConfig


@dataclass(frozen=True)
class Batching:
    """The server's batching and instances: rows per batch, the longest wait for a batch to fill, workers."""

    max_batch: int
    max_delay_ms: float
    workers: int


@dataclass(frozen=True)
class Source:
    """What serve serves once MODEL is read: the model and batching (from the flags, an optimize folder or a
    Triton repository), the protocol name, and the Triton config and repository it came from."""

    served: ServedModel
    batching: Batching
    name: str | None = None
    triton_config: str | None = None
    repository: str | None = None


def _is_deploy_folder(model: str) -> bool:
    """True when MODEL is a folder (an optimize output, judged by its deploy.json when it is read) and not a
    Hugging Face model folder (config.json and weights), which is served as a model."""
    return Path(model).is_dir() and not (Path(model) / "config.json").is_file()


def _stored(
    source: Source, found: Any, model: str, options: tuple[tuple[str, str], ...], mismatch: str
) -> tuple[ServedModel, Batching]:
    """The settings stored in an optimize folder or a Triton repository (`found`: its model, backend, precision,
    threads and batching), under the flags given on the command line, which still win for batching, workers and
    threads; --backend must agree with the stored one."""
    served, batching = source.served, source.batching
    if served.backend is not None and served.backend != found.backend:
        raise UsageError(f"{mismatch}; drop --backend {served.backend}")
    given = click.get_current_context().get_parameter_source

    def pick(key: str, flag: Any, stored: Any) -> Any:
        return flag if given(key) == ParameterSource.COMMANDLINE else stored

    served = replace(
        served,
        model=model,
        backend=found.backend,
        precision=found.precision,
        threads=pick("threads", served.threads, found.threads),
        options=tuple(f"{k}={v}" for k, v in options) + served.options,
    )
    return served, Batching(
        pick("max_batch", batching.max_batch, found.max_batch),
        pick("max_delay_ms", batching.max_delay_ms, found.max_delay_ms),
        pick("workers", batching.workers, found.workers),
    )


def _source(source: Source) -> Source:
    """`source` with MODEL read: a Triton model repository or an optimize output folder gives the model and its
    settings; any other MODEL is served as it is."""
    from infermeter.deploy.repository import is_repository, read_repository

    model = source.served.model
    if model and is_repository(Path(model)):
        repo = Path(model)
        found = read_repository(repo, source.name)
        mismatch = f"{found.config} runs on {found.backend}"
        served, batching = _stored(source, found, str(found.model_file), found.options, mismatch)
        stderr.print(f"Triton repository: serving {escape(found.name)} ({escape(str(found.model_file))})")
        in_repo = found.config.parent.parent.resolve() == repo.resolve()
        return Source(served, batching, found.name, str(found.config), str(repo) if in_repo else None)
    if model and _is_deploy_folder(model):
        from infermeter.deploy.manifest import serve_settings

        chosen = serve_settings(Path(model))
        mismatch = f"{model} was optimized for --backend {chosen.backend}"
        served, batching = _stored(source, chosen, chosen.model, chosen.options, mismatch)
        stderr.print(f"deploy manifest: serving the chosen {escape(chosen.label)} ({escape(chosen.model)})")
        return replace(source, served=served, batching=batching)
    return source


def _spec(model: str, reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> ModelSpec:
    """The model to serve (the --reshape'd one when given)."""
    from infermeter.models.resolve import resolve_model

    return resolve_model(model, reshape)


def _max_batch_for(model: str, max_batch: int, reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> int:
    """--max-batch bounded by the batch the model fixes: a model exported with batch 1 runs one row per batch,
    whatever the batcher could gather (a note says so; a request with more rows gets a 400 that says why)."""
    from infermeter.models.inputs import fixed_batch
    from infermeter.models.reshape import reshape_notes

    spec = _spec(model, reshape)
    for text in reshape_notes(spec):
        stderr.print(escape(f"warning: {text}"), soft_wrap=True)
    found = fixed_batch(spec.inputs)
    if found is None or found[1] == max_batch:
        return max_batch
    name, size = found
    stderr.print(
        escape(
            f"note: {model} fixes its batch at {size} (input {name!r}): batches of {size}, not --max-batch {max_batch}"
        ),
        soft_wrap=True,
    )
    return size


@click.command("serve")
@click.argument("model")
@serving_options("model", "Backend to serve with (required unless MODEL is an optimize output folder).")
@click.option("--max-batch", type=int, default=8, show_default=True, help="Most rows in one batch.")
@click.option(
    "--max-delay-ms",
    type=float,
    default=2.0,
    show_default=True,
    help="Longest a request waits for its batch to fill.",
)
@click.option("--workers", type=int, default=1, show_default=True, help="Worker threads (one session each).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0 exposes it).")
@click.option("--port", type=int, default=8000, show_default=True, help="Port (0: a free one, printed).")
@click.option(
    "--grpc-port",
    type=int,
    help="Also serve the KServe v2 gRPC protocol on this port (Triton's is 8001; 0: a free one, printed).",
)
@click.option("--name", help="The model's protocol name (default: zoo name or file stem).")
@click.option("--api-key", help="Require this key on every endpoint but health (default: $INFERMETER_API_KEY).")
@click.option("--max-body-mb", type=float, default=64.0, show_default=True, help="Largest request body accepted.")
@click.option("--log-level", default="warning", type=click.Choice(["debug", "info", "warning", "error"]))
@click.option("--reshape", multiple=True, metavar="NAME:DIMS", help=RESHAPE_HELP)
@click.option(
    "--recycle-after",
    type=click.IntRange(min=0),
    default=0,
    help="Reload a worker's session after N batches, giving its memory back (a remedy for growth; 0: never).",
)
@click.option(
    "--allocator",
    default="glibc",
    show_default=True,
    help="The malloc to serve on: glibc, arenas=N (MALLOC_ARENA_MAX), jemalloc or tcmalloc (the remedy a soak "
    "picked; the process restarts itself with it).",
)
def serve(
    served: ServedModel,
    max_batch: int,
    max_delay_ms: float,
    workers: int,
    host: str,
    port: int,
    grpc_port: int | None,
    name: str | None,
    api_key: str | None,
    max_body_mb: float,
    log_level: str,
    reshape: tuple[str, ...],
    recycle_after: int,
    allocator: str,
) -> None:
    """Serve MODEL over HTTP (Open Inference Protocol / KServe v2 REST) with a dynamic batcher.

    MODEL may be the output folder of `infermeter optimize`: its deploy.json gives the artifact, backend,
    precision, threads, options and batching (flags given on the command line still win for batching/threads).
    MODEL may also be a Triton model repository (or one model folder of it, with config.pbtxt): its ONNX Runtime
    or OpenVINO model is served with its dynamic batching, instance count and engine parameters.

    Endpoints: /v2/health/live, /v2/health/ready, /v2/models/NAME, /v2/models/NAME/ready,
    POST /v2/models/NAME/infer (JSON tensors or the binary tensor extension), /metrics (Prometheus), and Triton's
    GET /v2/models/NAME/config, GET /v2/models/NAME/stats, POST /v2/repository/index. With --grpc-port, the same
    over gRPC (inference.GRPCInferenceService, as tritonclient.grpc and perf_analyzer -i grpc call it).
    Ctrl-C or SIGTERM stops accepting requests and answers every accepted one before exiting.
    """
    from infermeter.core.extras import SERVE_MODULES, require_extra
    from infermeter.measure.allocator import run_under_allocator

    require_extra("serve", SERVE_MODULES, "`infermeter serve`")
    run_under_allocator(allocator, sys.argv[1:])
    from infermeter.serve.server import GRPC_LISTENING_PREFIX, LISTENING_PREFIX, serve_foreground

    for flag, value in (("--port", port), ("--grpc-port", grpc_port)):
        if value is not None and not 0 <= value <= 65535:
            raise UsageError(f"{flag} {value} must be between 0 and 65535")
    source = _source(Source(served, Batching(max_batch, max_delay_ms, workers), name))
    config = _serve_config(source, api_key, max_body_mb, reshape, recycle_after)
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")

    def listening(url: str, grpc_address: str | None) -> None:
        # Plain print, flushed: tools that spawn the server read this line to learn the port.
        print(f"{LISTENING_PREFIX}{url}", flush=True)
        if grpc_address is not None:
            print(f"{GRPC_LISTENING_PREFIX}{grpc_address}", flush=True)
        stderr.print(
            f"serving {escape(config.model)} with {escape(config.backend)} at {escape(url)} "
            f"(max-batch {config.max_batch}, max-delay {config.max_delay_ms:g} ms, workers {config.workers}); "
            "ready when /v2/health/ready says so; Ctrl-C to stop"
        )

    serve_foreground(config, host, port, listening, log_level, grpc_port)
    sys.stdout.flush()


def _serve_config(
    source: Source, api_key: str | None, max_body_mb: float, reshape: tuple[str, ...], recycle_after: int
) -> ServeConfig:
    """The server's configuration from what MODEL gave and the flags, each checked (UsageError)."""
    from infermeter.serve.model import ServeConfig
    from infermeter.serve.protocol import API_KEY_VARIABLE

    served, batching = source.served, source.batching
    if served.backend is None:
        raise UsageError("--backend is required (or give the output folder of `infermeter optimize`)")
    require_positive(batching.max_batch, "--max-batch")
    reshaped = parse_reshape(reshape)
    max_batch = _max_batch_for(served.model, batching.max_batch, reshaped)
    require_positive(batching.max_delay_ms, "--max-delay-ms", allow_zero=True)
    require_positive(batching.workers, "--workers")
    require_positive(served.max_queue, "--max-queue")
    require_positive(max_body_mb, "--max-body-mb")
    require_positive(served.threads, "--threads", allow_zero=True)
    shapes, values = parse_input_flags(served.inputs)
    return ServeConfig(
        model=served.model,
        backend=served.backend,
        # No --precision: the model's own (an INT8 graph served as int8, not asked for an fp32 it does not have).
        precision=served.precision or _spec(served.model, reshaped).default_precision,
        max_batch=max_batch,
        max_delay_ms=batching.max_delay_ms,
        buckets=served.buckets,
        workers=batching.workers,
        max_queue=served.max_queue,
        threads=served.threads,
        options=parse_options(served.options),
        input_shapes=shapes,
        name=source.name,
        api_key=api_key or os.environ.get(API_KEY_VARIABLE) or None,
        max_body_mb=max_body_mb,
        data=served.data,
        input_values=values,
        reshape=reshaped,
        triton_config=source.triton_config,
        repository=source.repository,
        recycle_after=recycle_after,
    )
