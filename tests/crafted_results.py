"""Crafted, deterministic results files for the report, compare, history and advise tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from infermeter.figures.latency_stats import latency_stats
from infermeter.results.records import Accuracy, LoadRecord, ParityRecord, Roofline, Tolerance
from infermeter.results.schema import CaseResult, CaseWarning, ResultsFile, ShapeFigures

ENVIRONMENT: dict[str, Any] = {
    "hostname": "bench-host",
    "cpu_model": "Test CPU 3000",
    "isa": ["avx2", "fma"],
    "architecture": "x86_64",
    "logical_cores": 8,
    "physical_cores": 4,
    "memory_total_gb": 16.0,
    "os": "Linux 6.1",
    "python": "3.11.7",
    "frameworks": {"infermeter": "0.1.0", "numpy": "2.0.0", "onnxruntime": "1.20.0", "torch": "2.13.0"},
    "thread_env": {},
    "gpu": [],
}


def draw_samples(p50_ms: float, n: int = 400, sigma: float = 0.05, seed: int = 0) -> list[float]:
    """Lognormal latencies around p50_ms (the median of a lognormal is its scale)."""
    rng = np.random.default_rng(seed)
    return [round(float(v), 6) for v in p50_ms * rng.lognormal(0.0, sigma, n)]


def parity_field(passed: bool, reason: str = "") -> dict[str, Any]:
    """`extra` entries of a parity verdict against torch (a full record, as the parity check writes it)."""
    status = "pass" if passed else "fail"
    tolerance = Tolerance("fp32", 1e-5, 1e-4, 0.99999)
    return {
        "parity": ParityRecord(
            "x", "torch", precision="fp32", status=status, reason=reason or f"crafted {status}", tolerance=tolerance
        ).to_dict()
    }


def accuracy_field(value: float, drop_pct: float, metric: str = "top1") -> dict[str, Any]:
    """`extra` entries of an accuracy score `value`, `drop_pct` points under FP32's."""
    return {"accuracy": Accuracy(metric, value, value + drop_pct / 100, drop_pct, 64).to_dict()}


def roofline_fields(flops: float, achieved_gflops: float, intensity: float) -> dict[str, Any]:
    """`extra` entries of a roofline annotation without a measured peak."""
    return Roofline(
        int(flops),
        int(flops / intensity),
        achieved_gflops=achieved_gflops,
        arithmetic_intensity=intensity,
        peak_precision="fp32_gflops",
    ).to_dict()


def load_field(valid: bool, concurrency: int = 8) -> dict[str, Any]:
    """`extra` entries of an offline load run at `concurrency`, VALID or not."""
    reasons = [] if valid else ["P99 exceeds the SLO"]
    record = LoadRecord(
        "http://127.0.0.1",
        "offline",
        target_qps=None,
        offered_qps=100.0,
        achieved_qps=99.0,
        concurrency=concurrency,
        duration_s=10.0,
        issued=990,
        ok=990,
        errors={},
        slo_p99_ms=20.0,
        valid=valid,
        reasons=reasons,
    )
    return {"load": record.to_dict()}


def make_case(
    backend: str,
    batch: int = 1,
    p50_ms: float = 1.0,
    *,
    model: str = "tiny_cnn",
    precision: str = "fp32",
    effective: str | None = None,
    samples: list[float] | None = None,
    sigma: float = 0.05,
    n: int = 400,
    seed: int = 0,
    peak_mb: float | None = 100.0,
    load_s: float | None = 0.5,
    status: str = "ok",
    error: str | None = None,
    threads: int = 4,
    warnings: list[CaseWarning] | None = None,
    extra: dict[str, Any] | None = None,
    case_id: str | None = None,
) -> CaseResult:
    """One case; ok cases get samples, statistics and throughput consistent with each other."""
    ident = case_id or f"{backend}-{precision}-b{batch}-static-t{threads}-{model}"
    case = CaseResult(
        id=ident,
        model=model,
        backend=backend,
        backend_version="1.0",
        device="cpu",
        batch=batch,
        shape_mode="static",
        precision=precision,
        precision_effective=effective or precision,
        threads=threads,
        status=status,
        error=error,
        shapes=ShapeFigures(input_shapes={"input": [batch, 3, 32, 32]}),
        warnings=list(warnings or []),
        extra=dict(extra or {}),
    )
    if status != "ok":
        case.precision_effective = None
        return case
    values = samples if samples is not None else draw_samples(p50_ms, n, sigma, seed)
    case.timing.samples_ms = values
    case.latency_ms = latency_stats(values)
    case.timing.iterations = len(values)
    case.timing.warmup_iterations = 10
    case.timing.throughput = batch * 1000.0 / float(np.mean(values))
    case.memory.peak_rss_mb = peak_mb
    case.memory.rss_before_load_mb = 40.0 if peak_mb is not None else None
    case.loading.load_s = load_s
    case.loading.first_inference_ms = p50_ms * 3
    case.started = "2026-01-01T00:00:00+00:00"
    case.duration_s = 1.5
    return case


def make_results(
    cases: list[CaseResult],
    environment: dict[str, Any] | None = None,
    created: str = "2026-01-01T00:00:00+00:00",
    extra: dict[str, Any] | None = None,
) -> ResultsFile:
    """A results file around `cases` with the fixed test environment (or `environment`)."""
    return ResultsFile(
        created=created,
        environment=dict(environment or ENVIRONMENT),
        cases=cases,
        command=["infermeter", "bench", "tiny_cnn"],
        extra=dict(extra or {}),
    )


def sample_results() -> ResultsFile:
    """Three backends at two batches, a failed case, a parity failure, warnings and roofline fields."""
    noisy = CaseWarning("high_cv", "latency varies a lot (CV 21%): close other programs", "CV 21%")
    roof = roofline_fields(2.0e7, 12.0, 8.0)
    cases = [
        make_case("torch", 1, 2.0, seed=1, peak_mb=320, load_s=1.9, extra={**roof, **parity_field(True)}),
        make_case("onnxruntime", 1, 0.5, seed=2, peak_mb=150, load_s=0.4, extra=parity_field(True)),
        make_case(
            "openvino",
            1,
            0.4,
            seed=3,
            peak_mb=210,
            load_s=3.5,
            warnings=[noisy],
            extra=parity_field(False, "output logits: max abs err 0.3 exceeds atol"),
        ),
        make_case("torch", 8, 9.0, seed=4, peak_mb=340, load_s=1.9),
        make_case(
            "onnxruntime",
            8,
            2.5,
            seed=5,
            peak_mb=180,
            load_s=0.4,
            extra=roofline_fields(1.6e8, 64.0, 20.0),
        ),
        make_case("openvino", 8, 0.0, status="failed", error="openvino: model not supported"),
    ]
    peak = {"fp32_gflops": 500.0, "bf16_gflops": 1000.0, "bandwidth_gbs": 40.0}
    return make_results(cases, extra={"peak": peak})


def serving_level_case(
    level: int,
    tokens_per_s: float,
    e2e_p50_ms: float,
    status: str = "ok",
    slo_attainment: float | None = None,
) -> CaseResult:
    """One level of a crafted serving sweep (series `s`, by concurrency): `tokens_per_s` output tokens per second,
    every request's end-to-end time `e2e_p50_ms`, and the share of requests within the SLO when one was set."""
    from dataclasses import replace

    from infermeter.results.records import Distribution, GenerationSummary, ServingLevel, write_record

    case = make_case("openai-endpoint", 1, e2e_p50_ms, n=5, status=status)
    summary = GenerationSummary(
        5,
        5,
        failed=0,
        errors_by_kind={},
        wall_s=1.0,
        requests_per_s=5.0,
        output_tokens=10,
        prompt_tokens=10,
        output_tokens_per_s=tokens_per_s,
        ttft_ms=None,
        tpot_ms=None,
        itl_ms=None,
        e2e_ms=None,
        tokens_per_s_per_request=None,
    )
    e2e = Distribution(e2e_p50_ms, e2e_p50_ms, p99=e2e_p50_ms, mean=e2e_p50_ms, min=1, max=1, count=5)
    write_record(case, replace(summary, e2e_ms=e2e))
    write_record(case, ServingLevel("s", "concurrency", level, slo_attainment))
    return case
