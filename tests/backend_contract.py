"""The contract every inference backend honours, as checks a test calls with the backend's class: what it declares
is consistent (options, extra, distribution, capabilities), it loads and runs a model to finite outputs of the
model's outputs, reports the precision it computes in, and a case goes through the real isolated worker.

Used by tests/backends/test_contract.py (every registered backend) and tests/backends/test_adding_a_backend.py (the
worked example of docs/adding-a-backend.md): a new backend is tested by registering it.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np

from backend_helpers import feeds_for, write_tflite_mlp
from infermeter.backends.base import Backend, BackendInfo
from infermeter.build.case_build import build_artifact, load_model
from infermeter.core.case import PRECISIONS, Case, MeasureSettings
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
# Short on purpose: the contract is that a case measures and records, not how precisely.
CONTRACT_SETTINGS = MeasureSettings(
    warmup_iterations=1, min_iterations=3, min_time_s=0.2, max_time_s=2.0, input_sets=1, target_ci=0.0,
    case_timeout_s=120.0,
)  # fmt: skip


def project_extras() -> set[str]:
    """The extras pyproject.toml declares (what `install_extra` may name)."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return set(tomllib.load(handle)["project"]["optional-dependencies"])


def check_declaration(cls: type[BackendInfo], name: str) -> None:
    """What a backend of any task says about itself without loading anything is consistent."""
    assert cls.name == name, f"the class says {cls.name!r}, the registry {name!r}"
    reason = cls.available()
    assert reason is None or (isinstance(reason, str) and reason.strip()), "an unavailable backend must say why"
    keys = [option.key for option in cls.options]
    assert len(keys) == len(set(keys)), f"options declared twice: {keys}"
    for option in cls.options:
        assert option.help.strip(), f"{option.key} has no help"
        default = option.default_text()
        if default is not None:  # a default must be a value its own option accepts, unchanged
            assert option.parse(default) == default, f"{option.key}: default {default!r} is not valid for its type"
    if reason is None and cls.distribution:
        assert cls.version() is not None, f"{name} is available but distribution {cls.distribution} is not installed"


def check_capabilities(cls: type[Backend]) -> None:
    """An inference backend's capability flags agree with each other and with the project."""
    assert cls.precisions and set(cls.precisions) <= set(PRECISIONS), cls.precisions
    if cls.install_extra is not None:
        assert cls.install_extra in project_extras(), f"install_extra {cls.install_extra!r} is no extra"
    if cls.runs_quantized_onnx:
        assert cls.consumes_onnx, "a backend that runs quantized ONNX graphs must read ONNX"
    if cls.reference_options is not None:
        declared = {option.key for option in cls.options}
        assert {key for key, _ in cls.reference_options} <= declared, "reference options must be declared ones"
    assert all(suffix.startswith(".") and suffix == suffix.lower() for suffix in cls.model_files), cls.model_files


def contract_model(cls: type[Backend], tmp_path: Path) -> ModelSpec:
    """The model the contract runs `cls` on: the zoo's tiny_cnn, or a small real file of the one kind it reads."""
    if cls.model_files == (".tflite",):
        rng = np.random.default_rng(0)
        layers = [(rng.standard_normal((8, 16)).astype(np.float32), np.zeros(8, np.float32))]
        return resolve_model(str(write_tflite_mlp(tmp_path / "mlp.tflite", layers, 16)))
    return resolve_model("tiny_cnn")


def onnx_file_model() -> ModelSpec:
    """tiny_cnn as a plain .onnx file: what a `consumes_onnx` backend must take as it is."""
    from infermeter.models.convert import onnx_for

    return resolve_model(str(onnx_for(resolve_model("tiny_cnn")).path))


def contract_case(spec: ModelSpec, backend: str, batch: int = 2) -> Case:
    """A one-thread fp32 static case of `backend` on `spec` with the contract's fast settings."""
    return Case(
        spec.name, backend, precision="fp32", batch=batch, shape_mode="static", threads=1, settings=CONTRACT_SETTINGS
    )


def check_runs(cls: type[Backend], spec: ModelSpec, case: Case) -> str:
    """load -> prepare -> run -> outputs: one finite array per model output, batch first; returns the precision
    the session reports (one of PRECISIONS)."""
    assert cls.unsupported_reason(spec, case) is None, cls.unsupported_reason(spec, case)
    artifact = build_artifact(spec, case)  # built by the registered backend of that name
    session = cls().load(load_model(spec, artifact), case, artifact)
    try:
        outputs = session.outputs_to_numpy(session.run(session.prepare(feeds_for(spec, case))))
        session.sync()
        precision = session.effective_precision()
    finally:
        session.close()
    assert len(outputs) == len(spec.output_names), (len(outputs), spec.output_names)
    for output in outputs:
        assert output.ndim >= 1 and output.shape[0] == case.batch, output.shape
        assert np.issubdtype(output.dtype, np.number) and np.isfinite(output).all()
    assert precision in PRECISIONS, precision
    assert all(isinstance(v, float) and v >= 0 for v in session.load_phases_s.values()), session.load_phases_s
    return precision


def check_isolated(spec: ModelSpec, case: Case, precision: str) -> None:
    """The case measured by the real isolated worker: ok, the precision `check_runs` saw recorded, latencies."""
    from infermeter.measure.worker import run_isolated

    result = run_isolated(spec, replace(case, settings=CONTRACT_SETTINGS))
    assert result.status == "ok", result.error
    assert result.isolated
    assert result.precision_effective == precision
    assert result.timing.iterations >= CONTRACT_SETTINGS.min_iterations
    assert result.latency_ms is not None and result.latency_ms.p50 > 0
    assert result.loading.load_s is not None and result.loading.load_s >= 0
