"""What `infermeter deploy` deploys, read from measurements only: the case (from an `optimize` folder's
deploy.json, or a results file and `--case`), its model file and tensors, and the serving figures (from the
optimize pick, from the policy `optimize --serve` measured on it, or from the best valid point of a
`load`/`tune-batching` results file given with `--load`).

Every setting is a `Figure`: the value and the sentence saying which case and which figure it came from, so
that the written files can carry their origin next to each value."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from infermeter.core.errors import UsageError
from infermeter.results.records import LoadRecord, TunePoint, read_record
from infermeter.results.schema import CaseResult


@dataclass(frozen=True)
class Figure:
    """A deployed value and where it was measured (`origin` is quoted into a comment)."""

    value: Any
    origin: str


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output: numpy dtype name and full shape (-1 where the model leaves a dim dynamic)."""

    name: str
    dtype: str
    dims: tuple[int, ...]


@dataclass(frozen=True)
class LoadPoint:
    """The load run whose figures the server settings and the perf_analyzer replay come from."""

    case: CaseResult
    path: Path
    _: KW_ONLY  # the rest by keyword
    max_batch: Figure
    max_delay_ms: Figure
    workers: Figure
    concurrency: int | None
    qps: float | None


@dataclass(frozen=True)
class DeploySource:
    """Everything deploy writes from: the measured case, the model file and the serving figures."""

    case: CaseResult
    results_path: Path
    _: KW_ONLY  # the rest by keyword
    environment: dict[str, Any]
    model_file: Path
    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch: Figure
    # None: no batching policy was measured (a bench case ran whole batches one request at a time).
    max_delay_ms: Figure | None
    instances: Figure
    load: LoadPoint | None


def _read_results(path: Path) -> Any:
    from infermeter.results.io import read_results

    if not path.is_file():
        raise UsageError(f"{path} does not exist: give a results file written by bench, optimize or load")
    return read_results(path)


def _triton_name(text: str) -> str:
    """A model name Triton and Kubernetes both accept: lowercase letters, digits, '_' and '-'."""
    stem = Path(text).stem if text.endswith((".onnx", ".xml")) else text
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in stem.lower()).strip("_-")
    return cleaned or "model"


def onnx_tensors(path: Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Inputs and outputs of an ONNX file with dtypes and dims (-1 for symbolic or unknown dims)."""
    import onnx
    from onnx import helper

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise UsageError(f"{path} is not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    weights = {init.name for init in model.graph.initializer}

    def spec(value: Any) -> TensorSpec:
        tensor = value.type.tensor_type
        dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        dims = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tensor.shape.dim)
        return TensorSpec(value.name, dtype, dims)

    inputs = tuple(spec(v) for v in model.graph.input if v.name not in weights)
    return inputs, tuple(spec(v) for v in model.graph.output)


def _model_file(case: CaseResult, artifact: Path | None) -> Path:
    """The ONNX file the case ran: the optimize artifact, the case's own .onnx, or the verified export of a
    built-in / Python model (the same cached export the ONNX engines loaded when the case was measured)."""
    if artifact is not None:
        if not artifact.is_file():
            raise UsageError(f"{artifact} is missing: the deploy manifest names it as the model artifact")
        return artifact
    if case.model.lower().endswith(".onnx"):
        path = Path(case.model)
        if not path.is_file():
            raise UsageError(f"case {case.id} ran {case.model}, which is not there any more")
        return path
    if case.precision == "int8":
        raise UsageError(
            f"case {case.id} is int8 made on the fly from {case.model}; deploy an `infermeter optimize` folder, "
            "whose INT8 artifact is kept, or a case of a quantized .onnx file"
        )
    from infermeter.models.convert import onnx_for
    from infermeter.models.resolve import resolve_model

    return Path(onnx_for(resolve_model(case.model)).path)


def _serving_from_case(case: CaseResult, delay: Figure | None) -> tuple[Figure, Figure | None, Figure]:
    batch = Figure(case.batch, f"case {case.id}: measured at batch {case.batch}")
    from infermeter.backends.registry import backend_names, get_backend

    # An engine that ran its own streams inside one instance (OpenVINO's NUM_STREAMS) deploys one instance.
    target = get_backend(case.backend).triton if case.backend in backend_names() else None
    option = target.streams_option if target is not None else None
    streams = int(case.options.get(option, 0) or 0) if option else 0
    if case.streams > 1 and not streams:
        instances = Figure(case.streams, f"case {case.id}: measured with {case.streams} concurrent streams")
    else:
        instances = Figure(1, f"case {case.id}: measured with one stream (one model instance)")
    return batch, delay, instances


def load_point(path: Path) -> LoadPoint:
    """The best point of a `load -o` / `tune-batching -o` results file: the tune-batching pick when marked,
    else the valid run with the highest throughput. Its server settings were read from the served model."""
    results = _read_results(path)
    runs = [(c, load) for c in results.cases if c.ok and (load := read_record(c, LoadRecord)) is not None]
    picked = [(c, load) for c, load in runs if (tune := read_record(c, TunePoint)) is not None and tune.pick]
    valid = picked or [(c, load) for c, load in runs if load.valid]
    if not valid:
        raise UsageError(f"{path} holds no valid load run (every run missed its SLO or failed); nothing to deploy")
    best, load = max(valid, key=lambda run: run[0].timing.throughput or 0.0)
    try:
        batch = int(best.options["serve.max_batch"])
        delay = float(best.options["serve.max_delay_ms"])
        workers = int(best.options["serve.workers"])
    except (KeyError, ValueError) as exc:
        raise UsageError(f"{path}: case {best.id} lacks the server's batching settings ({exc})") from exc
    what = "tune-batching pick" if picked else "best valid load run"
    where = f"{path.name} {what} {best.id} ({best.timing.throughput or 0:.1f} samples/s"
    where += f", P99 {best.latency_ms.p99:.2f} ms)" if best.latency_ms else ")"
    return LoadPoint(
        case=best,
        path=path,
        max_batch=Figure(batch, f"{where}: served with max-batch {batch}"),
        max_delay_ms=Figure(delay, f"{where}: served with max-delay {delay:g} ms"),
        workers=Figure(workers, f"{where}: served with {workers} worker(s)"),
        concurrency=load.concurrency,
        qps=load.target_qps,
    )


_Found = tuple[CaseResult, Path, dict[str, Any], Path | None, Figure | None]


def _from_optimize(folder: Path, which: str) -> _Found:
    from infermeter.deploy.manifest import MANIFEST_NAME, read_manifest

    manifest_path = folder / MANIFEST_NAME
    manifest, chosen = read_manifest(folder, which)
    try:
        case_id = chosen["case_id"]
        delay = float(manifest["serving"]["max_delay_ms"]) if which == "chosen" else None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{manifest_path}: not a readable deploy manifest ({type(exc).__name__}: {exc})") from exc
    results_path = folder / "results.json"
    results = _read_results(results_path)
    case = next((c for c in results.cases if c.id == case_id), None)
    if case is None:
        raise UsageError(f"{results_path} has no case {case_id} (named by {manifest_path}: {which})")
    artifact = folder / chosen["model"] if chosen.get("model_is_file") else None
    origin = f"{MANIFEST_NAME}: the batching delay `serve DIR` uses for the pick (optimize's setting, not measured)"
    figure = Figure(delay, origin) if delay else None
    return case, results_path, results.environment, artifact, figure


def measured_serving(folder: Path, which: str) -> Path | None:
    """The tune-batching results of `optimize --serve` (deploy.json's `serving.measured.load_file`) for the
    chosen configuration, or None when the folder holds no measured policy. UsageError when the manifest names a
    file that is not there."""
    from infermeter.deploy.manifest import MANIFEST_NAME, read_manifest

    if which != "chosen":
        return None  # the policy was measured on the pick only
    manifest, _ = read_manifest(folder, which)
    measured = (manifest.get("serving") or {}).get("measured")
    if not isinstance(measured, dict) or not measured.get("load_file"):
        return None
    path = folder / str(measured["load_file"])
    if not path.is_file():
        raise UsageError(f"{folder / MANIFEST_NAME} names the serving step's results {path.name}, which is missing")
    return path


def _from_results(path: Path, case_id: str | None) -> _Found:
    results = _read_results(path)
    ok = [c for c in results.cases if c.ok and read_record(c, LoadRecord) is None]
    if case_id is None:
        if len(ok) != 1:
            ids = ", ".join(c.id for c in ok) or "none"
            raise UsageError(f"{path} holds {len(ok)} measured cases; choose one with --case (ids: {ids})")
        case = ok[0]
    else:
        found = next((c for c in results.cases if c.id == case_id), None)
        if found is None or not found.ok:
            state = "is not ok" if found else "is not in it"
            raise UsageError(f"--case {case_id} {state} ({path}; ok cases: {', '.join(c.id for c in ok) or 'none'})")
        case = found
    return case, path, results.environment, None, None


def read_source(target: Path, case_id: str | None, which: str, load: Path | None, name: str | None) -> DeploySource:
    """Resolve `infermeter deploy TARGET`: an optimize folder (its `which` configuration) or a results file and
    `case_id`; `load` adds the serving figures of a load run."""
    if target.is_dir():
        if case_id is not None:
            raise UsageError("--case picks a case of a results file; for an optimize folder use --which")
        case, results_path, environment, artifact, delay = _from_optimize(target, which)
        load = load if load is not None else measured_serving(target, which)
    else:
        case, results_path, environment, artifact, delay = _from_results(target, case_id)
    model_file = _model_file(case, artifact)
    inputs, outputs = onnx_tensors(model_file)
    batch, delay_figure, instances = _serving_from_case(case, delay)
    point = load_point(load) if load is not None else None
    if point is not None:
        if point.case.backend != case.backend:
            raise UsageError(
                f"--load {point.path}: its best run {point.case.id} served {point.case.backend}, but case {case.id} "
                f"runs {case.backend}; give the load results of the deployed configuration"
            )
        batch, delay_figure, instances = point.max_batch, point.max_delay_ms, point.workers
    return DeploySource(
        case=case,
        results_path=results_path,
        environment=environment,
        model_file=model_file,
        name=_triton_name(name or case.model),
        inputs=inputs,
        outputs=outputs,
        max_batch=batch,
        max_delay_ms=delay_figure,
        instances=instances,
        load=point,
    )
