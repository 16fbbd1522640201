"""`infermeter serve`: an Open Inference Protocol (KServe v2) server with dynamic batching, for any backend."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click
from click.core import ParameterSource
from rich.markup import escape

from infermeter.case import PRECISIONS
from infermeter.cli.common import RESHAPE_HELP, parse_options, require_positive, stderr
from infermeter.errors import UsageError
from infermeter.models.input_flags import parse_input_flags
from infermeter.models.reshape import parse_reshape


def serve_options(function: click.decorators.FC) -> click.decorators.FC:
    """The model and batching flags shared by `serve`, `load` and `tune-batching` (not --backend: `load`
    makes it optional)."""
    decorators = [
        click.option("--precision", default="fp32", show_default=True, type=click.Choice(PRECISIONS)),
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
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


BACKEND_OPTION = click.option(
    "--backend", "-b", required=True, help="Backend to serve with (see `infermeter backends`)."
)


def _is_deploy_folder(model: str) -> bool:
    """True when MODEL is a folder (an optimize output, judged by its deploy.json when it is read) and not a
    Hugging Face model folder (config.json and weights), which is served as a model."""
    return Path(model).is_dir() and not (Path(model) / "config.json").is_file()


def _from_repository(
    repo: Path,
    backend: str | None,
    precision: str,
    option: tuple[str, ...],
    max_batch: int,
    max_delay_ms: float,
    workers: int,
    threads: int,
    name: str | None,
) -> tuple[str, str, str, tuple[str, ...], int, float, int, int, str, str, str | None]:
    """Serve settings from a Triton model repository; flags given on the command line still win for
    batching, workers and threads, as for an optimize folder."""
    from infermeter.deploy.repository import read_repository

    model = read_repository(repo, name)
    if backend is not None and backend != model.backend:
        raise UsageError(f"{model.config} runs on {model.backend}; drop --backend {backend}")
    given = click.get_current_context().get_parameter_source
    explicit = {
        key for key in ("max_batch", "max_delay_ms", "threads", "workers") if given(key) == ParameterSource.COMMANDLINE
    }
    stderr.print(f"Triton repository: serving {escape(model.name)} ({escape(str(model.model_file))})")
    return (
        str(model.model_file),
        model.backend,
        model.precision,
        tuple(f"{k}={v}" for k, v in model.options) + option,
        max_batch if "max_batch" in explicit else model.max_batch,
        max_delay_ms if "max_delay_ms" in explicit else model.max_delay_ms,
        workers if "workers" in explicit else model.workers,
        threads if "threads" in explicit else model.threads,
        model.name,
        str(model.config),
        str(repo) if model.config.parent.parent.resolve() == repo.resolve() else None,
    )


def _max_batch_for(model: str, max_batch: int, reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> int:
    """--max-batch bounded by the batch the model fixes: a model exported with batch 1 runs one row per batch,
    whatever the batcher could gather (a note says so; a request with more rows gets a 400 that says why)."""
    from infermeter.models.inputs import fixed_batch
    from infermeter.models.reshape import reshape_notes
    from infermeter.models.spec import resolve_model

    spec = resolve_model(model, reshape)
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
@click.option("--backend", "-b", help="Backend to serve with (required unless MODEL is an optimize output folder).")
@serve_options
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
def serve(
    model: str,
    backend: str | None,
    precision: str,
    threads: int,
    inputs: tuple[str, ...],
    data: str | None,
    option: tuple[str, ...],
    buckets: tuple[str, ...],
    max_queue: int,
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
    from infermeter.extras import SERVE_MODULES, require_extra

    require_extra("serve", SERVE_MODULES, "`infermeter serve`")
    from infermeter.deploy.repository import is_repository
    from infermeter.serve.model import ServeConfig
    from infermeter.serve.protocol import API_KEY_VARIABLE
    from infermeter.serve.server import GRPC_LISTENING_PREFIX, LISTENING_PREFIX, serve_foreground

    triton_config = repository = None
    if model and is_repository(Path(model)):
        settings = _from_repository(
            Path(model), backend, precision, option, max_batch, max_delay_ms, workers, threads, name
        )
        model, backend, precision, option, max_batch, max_delay_ms, workers, threads, name = settings[:9]
        triton_config, repository = settings[9:]
    elif model and _is_deploy_folder(model):
        from infermeter.deploy.manifest import serve_settings

        chosen = serve_settings(Path(model))
        if backend is not None and backend != chosen.backend:
            raise UsageError(f"{model} was optimized for --backend {chosen.backend}; drop --backend {backend}")
        given = click.get_current_context().get_parameter_source
        explicit = {
            name
            for name in ("max_batch", "max_delay_ms", "threads", "workers")
            if given(name) == ParameterSource.COMMANDLINE
        }
        model, backend, precision, option = chosen.model, chosen.backend, chosen.precision, option
        option = tuple(f"{k}={v}" for k, v in chosen.options) + option
        max_batch = max_batch if "max_batch" in explicit else chosen.max_batch
        max_delay_ms = max_delay_ms if "max_delay_ms" in explicit else chosen.max_delay_ms
        threads = threads if "threads" in explicit else chosen.threads
        workers = workers if "workers" in explicit else chosen.workers
        stderr.print(f"deploy manifest: serving the chosen {escape(chosen.label)} ({escape(model)})")
    if backend is None:
        raise UsageError("--backend is required (or give the output folder of `infermeter optimize`)")
    require_positive(max_batch, "--max-batch")
    reshaped = parse_reshape(reshape)
    max_batch = _max_batch_for(model, max_batch, reshaped)
    require_positive(max_delay_ms, "--max-delay-ms", allow_zero=True)
    require_positive(workers, "--workers")
    require_positive(max_queue, "--max-queue")
    require_positive(max_body_mb, "--max-body-mb")
    require_positive(threads, "--threads", allow_zero=True)
    for flag, value in (("--port", port), ("--grpc-port", grpc_port)):
        if value is not None and not 0 <= value <= 65535:
            raise UsageError(f"{flag} {value} must be between 0 and 65535")
    shapes, values = parse_input_flags(inputs)
    config = ServeConfig(
        model=model,
        backend=backend,
        precision=precision,
        max_batch=max_batch,
        max_delay_ms=max_delay_ms,
        buckets=tuple(buckets),
        workers=workers,
        max_queue=max_queue,
        threads=threads,
        options=parse_options(option),
        input_shapes=shapes,
        name=name,
        api_key=api_key or os.environ.get(API_KEY_VARIABLE) or None,
        max_body_mb=max_body_mb,
        data=data,
        input_values=values,
        reshape=reshaped,
        triton_config=triton_config,
        repository=repository,
        recycle_after=recycle_after,
    )
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")

    def listening(url: str, grpc_address: str | None) -> None:
        # Plain print, flushed: tools that spawn the server read this line to learn the port.
        print(f"{LISTENING_PREFIX}{url}", flush=True)
        if grpc_address is not None:
            print(f"{GRPC_LISTENING_PREFIX}{grpc_address}", flush=True)
        stderr.print(
            f"serving {escape(model)} with {escape(backend)} at {escape(url)} "
            f"(max-batch {max_batch}, max-delay {max_delay_ms:g} ms, workers {workers}); "
            "ready when /v2/health/ready says so; Ctrl-C to stop"
        )

    serve_foreground(config, host, port, listening, log_level, grpc_port)
    sys.stdout.flush()
