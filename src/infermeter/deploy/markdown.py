"""DEPLOY.md for a generated repository: the files, each setting with its origin, and the exact
`perf_analyzer` command that replays the measured load against the deployed server."""

from __future__ import annotations

from pathlib import Path

from infermeter.deploy.kserve import Resources
from infermeter.deploy.source import DeploySource
from infermeter.deploy.triton import Repository, batchable, engine_parameters, platform_for

# Long enough for a stable P99 at the rates a CPU server reaches; perf_analyzer's own default is 5 s too.
MEASUREMENT_INTERVAL_MS = 5000


# What the replay needs from the server, and what only Triton has (checked against perf_analyzer's Triton client
# backend: server metadata, model metadata and config, infer with binary tensors, statistics).
REPLAY_NOTE = (
    "The perf_analyzer lines replay the measured load against either server: `infermeter serve` answers every "
    "call they make, over HTTP (port 8000) and gRPC (8001): server and model metadata, the model configuration, "
    "inference with binary tensors and Triton's statistics (perf_analyzer's server-side queue and compute "
    "times). Only Triton has what these lines leave out: `--shared-memory system|cuda` (the shared-memory "
    "extensions), `--collect-metrics` (GPU metrics on port 8002) and, in the repository, engines other than "
    "ONNX Runtime and OpenVINO."
)


def perf_analyzer_command(source: DeploySource, url: str = "localhost:8000", protocol: str = "http") -> str:
    """perf_analyzer replaying the measured load: the load run's concurrency or request rate and rows per
    request when `--load` was given, else the bench case's batch and stream count; shapes of dynamic dims."""
    case = source.load.case if source.load else source.case
    batched = batchable(source)
    parts = ["perf_analyzer", f"-m {source.name}", f"-u {url}", f"-i {protocol}", f"-b {case.batch if batched else 1}"]
    for spec in source.inputs:
        dims = spec.dims[1:] if batched else spec.dims
        measured = source.case.shapes.input_shapes.get(spec.name)
        if -1 in dims and measured:
            shape = measured[1:] if batched else measured
            parts.append(f"--shape {spec.name}:{','.join(str(d) for d in shape)}")
    if source.load and source.load.qps:
        parts.append(f"--request-rate-range {source.load.qps:g}:{source.load.qps:g}")
    else:
        level = (source.load.concurrency if source.load else None) or source.case.streams
        parts.append(f"--concurrency-range {level}:{level}")
    parts += ["--percentile=99", f"--measurement-interval {MEASUREMENT_INTERVAL_MS}"]
    return " ".join(parts)


def _figures(source: DeploySource) -> str:
    case = source.load.case if source.load else source.case
    stats = case.latency_ms
    if stats is None:
        return "No latency was measured for this case."
    where = f"load run {case.id} in {source.load.path.name}" if source.load else f"case {case.id}"
    throughput = f"{case.timing.throughput:.1f} samples/s" if case.timing.throughput else "no throughput figure"
    return (
        f"Measured here ({where}): P50 {stats.p50:.3f} ms, P99 {stats.p99:.3f} ms, {throughput}, "
        f"{case.batch} row(s) per request. perf_analyzer prints latency in µs and throughput in inferences "
        "(requests) per second: multiply by the rows per request to compare samples/s."
    )


def _tree(repo: Repository, manifest: Path | None, deploy_md: Path) -> list[str]:
    model_dir = repo.config.parent
    lines = [
        f"{repo.root.name}/",
        f"  {model_dir.name}/",
        "    config.pbtxt",
        f"    {repo.model.parent.name}/{repo.model.name}",
    ]
    if manifest is not None:
        lines.append(manifest.name)
    return [*lines, deploy_md.name]


def _settings(source: DeploySource, resources: Resources | None) -> list[str]:
    case = source.case
    platform = platform_for(case.backend)
    rows = [
        (
            "model",
            f"`{source.model_file.name}` ({case.precision}, effective {case.precision_effective})",
            f"case {case.id}",
        ),
        (platform.key, f"`{platform.name}`", f"case {case.id}: measured on {case.backend}"),
        ("max_batch_size", str(source.max_batch.value if batchable(source) else 0), source.max_batch.origin),
        ("instance_group", f"{source.instances.value} x {platform.kind}", source.instances.origin),
    ]
    delay = source.max_delay_ms
    if delay is not None and batchable(source) and int(source.max_batch.value) > 1:
        rows.append(("max_queue_delay_microseconds", f"{round(float(delay.value) * 1000)}", delay.origin))
    rows += [(f"parameter {p.key}", p.value, p.origin) for p in engine_parameters(source)]
    if resources is not None:
        rows.append(("KServe cpu", f"{resources.cpu}", resources.cpu_origin))
        rows.append(
            (
                "KServe memory",
                f"{resources.memory_request_mib}Mi request, {resources.memory_limit_mib}Mi limit",
                resources.memory_origin,
            )
        )
    return [
        "| setting | value | origin |",
        "|---|---|---|",
        *[f"| {name} | {value} | {origin} |" for name, value, origin in rows],
    ]


def render_deploy_md(
    source: DeploySource, repo: Repository, manifest: Path | None, resources: Resources | None, path: Path
) -> str:
    """The DEPLOY.md text."""
    case = source.case
    target = "Triton and KServe" if manifest is not None else "Triton"
    lines = [
        f"# Deploying {source.name} to {target}",
        "",
        f"Written by `infermeter deploy` from `{source.results_path}`, case `{case.id}` ({case.backend} "
        f"{case.precision}, batch {case.batch}, {case.threads} thread(s)). Every number below is read from the "
        "results file; the comments in config.pbtxt say which figure each value is.",
        "",
        "## Files",
        "",
        "```",
        *_tree(repo, manifest, path),
        "```",
        "",
        "## Settings and their origin",
        "",
        *_settings(source, resources),
        "",
        "## Check it before shipping, then check production against the measured figures",
        "",
        "```",
        f"infermeter serve {repo.root} --grpc-port 8001   # this repository on this machine, on Triton's ports",
        f"tritonserver --model-repository={repo.root}",
        perf_analyzer_command(source),
        perf_analyzer_command(source, "localhost:8001", "grpc"),
        "```",
        "",
        REPLAY_NOTE,
        "",
        _figures(source),
    ]
    if manifest is not None:
        lines += [
            "",
            "## KServe",
            "",
            f"Upload `{repo.root.name}/` to your storage, put its URI in `storageUri` of `{manifest.name}`, then "
            f"`kubectl apply -f {manifest.name}`.",
        ]
    return "\n".join(lines) + "\n"
