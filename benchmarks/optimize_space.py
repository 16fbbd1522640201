"""The space `optimize` searches, enumerated whole, and what its journal says about one configuration; used by
benchmarks/optimize_vs_exhaustive.py. Nothing here is imported by infermeter or its tests.

A configuration is what optimize can pick on this machine: engine × precision × shape mode × batch, at the
request's threads and one stream (optimize varies neither, nor engine options beyond compiler tuning, which the
exhaustive reference leaves out with the compilers themselves). The precisions per engine follow optimize's steps:
FP32 everywhere (step 3), INT8 where the engine has its own quantizer (step 4a: `Backend.int8_quantizer`), BF16/FP16
where the engine offers them and the CPU computes them natively (step 4b), dynamic shapes where the engine compiles
for shapes (`shape_aware`, step 5a) and the model has a dynamic axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infermeter.backends.registry import get_backend
from infermeter.core.case import Case
from infermeter.models.spec import ModelSpec
from infermeter.optimize.candidates import hardware_precision_reason, plan_backends


@dataclass(frozen=True)
class Config:
    """One configuration of the space."""

    backend: str
    precision: str
    shape_mode: str
    batch: int

    @property
    def label(self) -> str:
        """`openvino int8 b1 static`, as optimize's journal names a case."""
        return f"{self.backend} {self.precision} b{self.batch} {self.shape_mode}"

    @staticmethod
    def of(case: dict[str, Any]) -> Config:
        """The configuration of a results-file case (a JSON dict)."""
        return Config(case["backend"], case["precision"], case["shape_mode"], int(case["batch"]))


def _precisions(backend: str) -> list[str]:
    cls = get_backend(backend)
    found = ["fp32"]
    if "int8" in cls.precisions and cls.int8_quantizer is not None:
        found.append("int8")
    found += [p for p in ("bf16", "fp16") if p in cls.precisions and hardware_precision_reason(p, "cpu") is None]
    return found


def enumerate_space(spec: ModelSpec, backends: tuple[str, ...], batches: tuple[int, ...]) -> list[Config]:
    """Every configuration optimize could pick for `spec` on this CPU among `backends` (each runnable here, and
    able to run the model: `unsupported_reason` as optimize checks it)."""
    dynamic_axes = any(isinstance(d, str) for i in spec.inputs for d in i.shape)
    configs = []
    for backend in plan_backends("cpu", backends).usable:
        cls = get_backend(backend)
        modes = ("static", "dynamic") if dynamic_axes and cls.shape_aware else ("static",)
        for precision in _precisions(backend):
            for mode in modes:
                for batch in batches:
                    case = Case(spec.ref, backend, precision=precision, batch=batch, shape_mode=mode)
                    if cls.unsupported_reason(spec, case) is None:
                        configs.append(Config(backend, precision, mode, batch))
    return configs


def admissible(case: dict[str, Any]) -> bool:
    """An ok case whose parity check (at its precision's tolerance) did not fail: the exhaustive side's budget."""
    parity = case.get("parity")
    return case.get("status") == "ok" and not (isinstance(parity, dict) and parity.get("passed") is False)


def optimize_drops(optimize_results: dict[str, Any]) -> dict[tuple[str, str], float]:
    """The accuracy drop (points) optimize measured for each engine × precision, on the model itself or its plain
    INT8 artifact (its mixed and FP32-fallback variants are files outside the exhaustive space)."""
    drops: dict[tuple[str, str], float] = {}
    for case in optimize_results.get("cases", []):
        accuracy = case.get("accuracy")
        if isinstance(accuracy, dict) and "drop_pct" in accuracy and "mixed" not in str(case.get("model", "")):
            drops[(case["backend"], case["precision"])] = float(accuracy["drop_pct"])
    return drops


def within_budget(case: dict[str, Any], drops: dict[tuple[str, str], float], max_drop: float) -> bool:
    """Admissible, and within optimize's accuracy budget where optimize scored its engine and precision: the
    exhaustive side held to the same budget as optimize (FP32 is the reference; an engine and precision optimize
    could not score is admitted, as optimize admits it, flagged unverified)."""
    drop = drops.get((case["backend"], case["precision"]), 0.0)
    return admissible(case) and (case["precision"] == "fp32" or drop <= max_drop)


def p50(case: dict[str, Any]) -> float:
    """The case's P50 in ms."""
    return float(case["latency_ms"]["p50"])


def journal_story(optimize_results: dict[str, Any], config: Config) -> str:
    """What optimize did with `config`: the step that measured it (and why it was not the pick), or the step that
    pruned it and its reason, or that no step considered it."""
    journal = optimize_results.get("optimize", {})
    cases = {c["id"]: c for c in optimize_results.get("cases", [])}
    for step in journal.get("steps", []):
        for case_id in step.get("case_ids", []):
            case = cases.get(case_id)
            if case is not None and Config.of(case) == config:
                verdict = "ok" if admissible(case) else f"status {case['status']}, or its parity failed"
                drop = (case.get("accuracy") or {}).get("drop_pct")
                if drop is not None:
                    verdict += f", accuracy drop {drop:.2f} points"
                figure = f", P50 {p50(case):.3f} ms" if case.get("latency_ms") else ""
                return f"measured by step {step['key']} ({verdict}{figure}) but not picked"
    names = (config.label, f"{config.backend} {config.precision}", config.backend, config.precision)
    for step in journal.get("steps", []):
        for skipped in step.get("skipped", []):
            what = str(skipped.get("what", ""))
            if what in names or what.startswith(f"{config.backend} {config.precision}"):
                return f"pruned by step {step['key']} ({what}): {skipped.get('reason', '')}"
    return "considered by no step (outside what optimize tries: e.g. dynamic shapes beyond its top two)"
