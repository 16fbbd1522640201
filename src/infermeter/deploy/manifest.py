"""What optimize leaves for deployment: `deploy.json` (the manifest `infermeter serve DIR` starts from) and
`DEPLOY.md` (the exact settings, the measured figures and the caveats). Every figure is read from the results
file's cases; nothing is typed by hand."""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from infermeter.core.errors import UsageError
from infermeter.core.files import write_text_atomically
from infermeter.results.records import Accuracy, OptimizeStep, ParityRecord, read_record
from infermeter.results.schema import CaseResult

MANIFEST_NAME = "deploy.json"
MANIFEST_FORMAT = 1
# The batcher's wait for more requests when the pick runs batches: short enough to be invisible next to a
# CNN's latency, long enough for concurrent requests to meet.
BATCHING_DELAY_MS = 2.0


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}" if value < 1000 else f"{value:,.0f}"


def measured(case: CaseResult) -> dict[str, Any]:
    """The figures of a case that DEPLOY.md and the manifest quote."""
    stats = case.latency_ms
    return {
        "p50_ms": stats.p50 if stats else None,
        "p99_ms": stats.p99 if stats else None,
        "throughput_per_s": case.timing.throughput,
        "peak_rss_mb": case.memory.peak_rss_mb,
        "load_s": case.loading.load_s,
        "first_inference_ms": case.loading.first_inference_ms,
        "iterations": case.timing.iterations,
    }


def entry(case: CaseResult, source_model: str, folder: Path) -> dict[str, Any]:
    """A configuration as the manifest records it: what to load, with which backend and settings."""
    from infermeter.models.spec import file_sha256

    info = read_record(case, OptimizeStep)
    artifact = info.artifact if info else None
    accuracy = read_record(case, Accuracy)
    parity = read_record(case, ParityRecord)
    quantized_file = case.precision == "int8" and bool(artifact)
    return {
        "case_id": case.id,
        "label": f"{case.backend} {case.precision} b{case.batch} {case.shape_mode}",
        "variant": info.variant if info else "",
        "model": artifact or source_model,
        "model_is_file": bool(artifact),
        "sha256": file_sha256(folder / artifact) if artifact and (folder / artifact).is_file() else None,
        "backend": case.backend,
        "backend_version": case.backend_version,
        "precision": case.precision,
        "precision_effective": case.precision_effective,
        # What the backend is asked for: a quantized file fixes int8 itself; engines take fp32 for its float layers.
        "backend_precision": "fp32" if quantized_file else case.precision,
        "shape_mode": case.shape_mode,
        "batch": case.batch,
        "threads": case.threads,
        "options": dict(case.options),
        "input_shapes": case.shapes.input_shapes,
        "measured": measured(case),
        "accuracy": accuracy.to_dict() if accuracy else None,
        "parity_passed": parity.passed if parity else None,
    }


def write_manifest(folder: Path, data: dict[str, Any]) -> Path:
    """Write `deploy.json` atomically."""
    path = folder / MANIFEST_NAME
    write_text_atomically(path, json.dumps(data, indent=2, allow_nan=False, default=str))
    return path


@dataclass(frozen=True)
class ServeSettings:
    """What `infermeter serve DIR` starts: the model file or reference, backend and batching."""

    model: str
    backend: str
    _: KW_ONLY  # the rest by keyword
    precision: str
    threads: int
    options: tuple[tuple[str, str], ...]
    max_batch: int
    max_delay_ms: float
    label: str
    workers: int = 1  # model instances: the serving step's measured count, else one


def read_manifest(folder: Path, which: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the whole manifest, its `which` configuration) from `folder/deploy.json`. UsageError when the folder has no
    manifest, it cannot be read, it was written in another format version, or it lacks `which`."""
    path = folder / MANIFEST_NAME
    if not path.is_file():
        raise UsageError(
            f"{folder} is a folder without {MANIFEST_NAME}: give a model, or the output folder of a finished "
            "`infermeter optimize` run that made a pick"
        )
    try:
        data = json.loads(path.read_text())
        version, chosen = data.get("format"), data[which]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path} is not a readable deploy manifest ({type(exc).__name__}: {exc})") from exc
    if version != MANIFEST_FORMAT:
        raise UsageError(
            f"{path} is in manifest format {version!r}; this infermeter reads format {MANIFEST_FORMAT}: rerun "
            "`infermeter optimize` with this version"
        )
    if chosen is None:
        raise UsageError(f"{path} has no {which} configuration")
    return data, chosen


def serve_settings(folder: Path, which: str = "chosen") -> ServeSettings:
    """Read `folder/deploy.json` into serve settings for the `chosen` configuration (or `fallback`).
    UsageError when the folder holds no usable manifest."""
    data, chosen = read_manifest(folder, which)
    path = folder / MANIFEST_NAME
    try:
        serving = data["serving"] if which == "chosen" else {"max_batch": chosen["batch"], "max_delay_ms": 0.0}
    except (KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a readable deploy manifest ({type(exc).__name__}: {exc})") from exc
    model = str(folder / chosen["model"]) if chosen.get("model_is_file") else str(chosen["model"])
    return ServeSettings(
        model=model,
        backend=str(chosen["backend"]),
        precision=str(chosen["backend_precision"]),
        threads=int(chosen["threads"]),
        options=tuple(sorted((str(k), str(v)) for k, v in chosen.get("options", {}).items())),
        max_batch=int(serving["max_batch"]),
        max_delay_ms=float(serving["max_delay_ms"]),
        label=str(chosen["label"]),
        workers=int(serving.get("workers", 1)),
    )


def serve_command(folder: Path, chosen: dict[str, Any], serving: dict[str, Any]) -> str:
    """The explicit `infermeter serve` command equivalent to `infermeter serve DIR`."""
    model = str(folder / chosen["model"]) if chosen["model_is_file"] else chosen["model"]
    parts = [
        "infermeter serve",
        model,
        f"--backend {chosen['backend']}",
        f"--precision {chosen['backend_precision']}",
        f"--threads {chosen['threads']}",
        f"--max-batch {serving['max_batch']}",
        f"--max-delay-ms {serving['max_delay_ms']:g}",
    ]
    if serving.get("workers", 1) != 1:
        parts.append(f"--workers {serving['workers']}")
    parts += [f"-O {k}={v}" for k, v in sorted(chosen["options"].items())]
    return " ".join(parts)


def _row(title: str, item: dict[str, Any] | None, baseline_p50: float | None) -> str:
    if item is None:
        return f"| {title} | — | | | | | | | |"
    m = item["measured"]
    speedup = f"{baseline_p50 / m['p50_ms']:.2f}x" if baseline_p50 and m["p50_ms"] else "—"
    acc = item.get("accuracy")
    acc_text = f"{acc['metric']} {acc['value']:.4f} (drop {acc['drop_pct']:.2f})" if acc else (
        "parity pass" if item.get("parity_passed") else "—"
    )  # fmt: skip
    return (
        f"| {title}: {item['label']} {item['variant']} | {_fmt(m['p50_ms'])} | {_fmt(m['p99_ms'])} | "
        f"{_fmt(m['throughput_per_s'])} | {_fmt(m['peak_rss_mb'])} | {_fmt(m['load_s'])} | "
        f"{_fmt(m['first_inference_ms'])} | {acc_text} | {speedup} |"
    )


def _batching_origin(serving: dict[str, Any]) -> str:
    measured = serving.get("measured")
    if not measured:
        return "optimize's default, not measured (`optimize --serve --slo-p99-ms X` measures it)"
    return (
        f"measured by the serving step: {measured['throughput_per_s']:,.1f} inferences/s, P99 "
        f"{measured['p99_ms']:.3g} ms within the SLO of {measured['slo_p99_ms']:g} ms ({measured['load_file']})"
    )


def _settings_table(chosen: dict[str, Any], serving: dict[str, Any]) -> list[str]:
    """The "Exact settings" table: the artifact, engine, precision, shapes, threads, options and batching chosen."""
    return [
        "| setting | value |",
        "|---|---|",
        f"| model artifact | `{chosen['model']}`"
        + (f" (sha256 `{chosen['sha256'][:16]}…`)" if chosen["sha256"] else "")
        + " |",
        f"| backend | {chosen['backend']} {chosen['backend_version'] or ''} |",
        f"| precision | {chosen['precision']} (effective: {chosen['precision_effective']}; backend asked for "
        f"{chosen['backend_precision']}) |",
        f"| shapes | {chosen['shape_mode']}, batch {chosen['batch']}, inputs "
        + ", ".join(f"{k} {v}" for k, v in chosen["input_shapes"].items())
        + " |",
        f"| threads | {chosen['threads']} |",
        f"| backend options | {', '.join(f'{k}={v}' for k, v in chosen['options'].items()) or 'defaults'} |",
        f"| batching (serve) | max-batch {serving['max_batch']}, max-delay {serving['max_delay_ms']:g} ms, "
        f"{serving.get('workers', 1)} worker(s); {_batching_origin(serving)} |",
    ]


def _measured_table(manifest: dict[str, Any]) -> list[str]:
    """The "Measured" table: pick, runner-up, fallback and baseline, each with its speedup over the baseline."""
    baseline = manifest.get("baseline")
    base_p50 = baseline["measured"]["p50_ms"] if baseline else None
    return [
        "| configuration | P50 ms | P99 ms | throughput/s | peak MB | load s | first inference ms | accuracy | "
        "speedup vs baseline (P50) |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
        _row("pick", manifest["chosen"], base_p50),
        _row("runner-up", manifest.get("runner_up"), base_p50),
        _row("fallback", manifest.get("fallback"), base_p50),
        _row("baseline", baseline, base_p50),
    ]


def _fallback_section(fallback: dict[str, Any] | None, folder: Path, serving: dict[str, Any]) -> list[str]:
    """How to serve the ONNX Runtime FP32 fallback, or why there is none."""
    if not fallback:
        return ["No ONNX Runtime FP32 configuration was measured in this run (see report.html for why)."]
    return [
        "ONNX Runtime FP32 on the verified export: the most portable configuration measured here. Serve it with",
        "",
        "```",
        serve_command(folder, fallback, {"max_batch": serving["max_batch"], "max_delay_ms": serving["max_delay_ms"]}),
        "```",
    ]


def render_deploy_md(manifest: dict[str, Any], folder: Path, caveats: list[str]) -> str:
    """DEPLOY.md from the manifest (whose figures come from the results file) and the run's caveats."""
    chosen, serving = manifest["chosen"], manifest["serving"]
    lines = [
        f"# Deploying {manifest['source_model']}",
        "",
        f"Chosen by `infermeter optimize` (objective: {manifest['objective']}; constraints: "
        f"{manifest['constraints_text']}). Figures below are this machine's, measured in this run "
        f"({manifest['cpu']}); the full story is in `report.html`, every case in `results.json`.",
        "",
        "## Serve it",
        "",
        "```",
        f"infermeter serve {folder}",
        "```",
        "",
        "which is the same as",
        "",
        "```",
        serve_command(folder, chosen, serving),
        "```",
        "",
        "## Exact settings",
        "",
        *_settings_table(chosen, serving),
        "",
        "## Measured",
        "",
        *_measured_table(manifest),
        "",
        "## Caveats",
        "",
        *[f"- {text}" for text in caveats],
        "",
        "## Fallback",
        "",
        *_fallback_section(manifest.get("fallback"), folder, serving),
    ]
    return "\n".join(lines) + "\n"
