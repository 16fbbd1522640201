"""`infermeter quantize` as a library call: quantize, evaluate against FP32, rank layers, search a mixed model
under an accuracy budget, fine-tune (QAT), and time every variant. Prints nothing; returns a `QuantizeOutcome`.
The data, the FP32 reference, the plain INT8 graph, the sensitivity → greedy → budget search and the writing of
the chosen model are the INT8 study optimize runs too (`quantize.study_data`, `quantize.study`)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path

from infermeter.build.int8.feeds import own as own_inputs
from infermeter.build.int8.feeds import sample_shapes
from infermeter.build.int8.ort_quant import QuantConfig
from infermeter.core.errors import InfermeterError
from infermeter.models.reshape import reshape_notes
from infermeter.models.resolve import resolve_model
from infermeter.models.samples import SampleSet, load_samples
from infermeter.models.spec import ModelSpec
from infermeter.models.torch_form import load_torch_module
from infermeter.quantize.evaluate import Accuracy
from infermeter.quantize.request import NNCF, ModelRow, QuantizeOutcome, QuantizeRequest, check_request, quantizer_of
from infermeter.quantize.study import (
    Prepared,
    Reference,
    fp32_reference,
    plain_beside,
    prepare,
    quantize_plain,
    rank_layers,
    score_file,
    search_mixed,
    write_model,
)
from infermeter.quantize.study_data import DataFlags, StudyData, choose_study_data
from infermeter.results.records import QuantizedVariant, write_record
from infermeter.results.schema import CaseResult, ResultsFile


def study_data(request: QuantizeRequest, spec: ModelSpec) -> StudyData:
    """The request's calibration and evaluation sets, chosen as optimize chooses them (`choose_study_data`)."""
    flags = DataFlags(request.calib, request.eval, request.calib_size, request.eval_size, request.seed)
    inputs = own_inputs(spec.inputs, request.input_shapes, request.input_values)
    return choose_study_data(inputs, flags, static=request.config.mode == "static")


@dataclass
class _Study:
    """One run of `quantize_model`: the request, its data and FP32 reference, its scratch folder, the outcome
    being filled in and where progress goes."""

    request: QuantizeRequest
    spec: ModelSpec
    _: KW_ONLY  # the rest by keyword
    data: StudyData
    reference: Reference
    scratch: Path
    outcome: QuantizeOutcome
    progress: Callable[[str], None]

    @property
    def evaluation(self) -> SampleSet:
        """The evaluation samples."""
        return self.data.evaluation

    def score(self, path: Path) -> Accuracy:
        """Accuracy of a variant file against the FP32 reference."""
        return score_file(path, self.reference, self.evaluation, self.request.threads)


def _fp32_source(spec: ModelSpec) -> Path:
    """The float model as given: its ONNX form, or an OpenVINO IR as it is (the FP32 reference runs it, and NNCF
    quantizes it)."""
    if spec.kind == "openvino_ir" and spec.path:
        return Path(spec.path)
    from infermeter.models.convert import onnx_for

    return onnx_for(spec).path


def quantize_model(request: QuantizeRequest, on_progress: Callable[[str], None] | None = None) -> QuantizeOutcome:
    """Run the whole request (see the module docstring). Raises InfermeterError subclasses for bad input."""
    check_request(request)
    progress = on_progress or (lambda _msg: None)
    spec = resolve_model(request.model, request.reshape)
    outcome = QuantizeOutcome(request.output)
    outcome.notes.extend(reshape_notes(spec))
    progress("loading data")
    data = study_data(request, spec)
    outcome.notes.extend(data.notes)
    outcome.warnings.extend(data.warnings)
    with tempfile.TemporaryDirectory(prefix="infermeter-quantize-") as scratch_name:
        progress("exporting / pre-processing")
        source = _fp32_source(spec)
        reference = fp32_reference(source, spec.task, data.evaluation, request.threads)
        outcome.rows.append(ModelRow("fp32", "FP32", path=source, precision="fp32", accuracy=reference.accuracy))
        study = _Study(
            request,
            spec,
            data=data,
            reference=reference,
            scratch=Path(scratch_name),
            outcome=outcome,
            progress=progress,
        )
        if quantizer_of(request.engine) == NNCF:
            _openvino_rows(study, source)
        else:
            _onnx_rows(study, source)
        if request.finetune:
            _finetune_row(study)
        if request.latency:
            _time_rows(study)
    return outcome


def _label(config: QuantConfig) -> str:
    return f"INT8 {config.mode}" + (f" {config.method}" if config.mode == "static" else "")


def _openvino_rows(study: _Study, source: Path) -> None:
    """NNCF's INT8 IR, and under --max-drop NNCF's own accuracy control when plain INT8 breaks the budget."""
    from infermeter.build.int8.ov_quant import quantize_openvino

    request, outcome = study.request, study.outcome
    if source.suffix.lower() == ".xml":
        outcome.notes.append("OpenVINO IR quantized as it is (NNCF)")
    study.progress(f"quantizing ({_label(request.config)})")
    request.output.parent.mkdir(parents=True, exist_ok=True)
    outcome.notes.append(quantize_openvino(source, request.output, request.config, study.data.calib))
    accuracy = study.score(request.output)
    outcome.rows.append(
        ModelRow("int8", _label(request.config), path=request.output, precision="int8", accuracy=accuracy)
    )
    if request.max_drop_pct is not None:
        _nncf_controlled(study, source)


def _onnx_rows(study: _Study, source: Path) -> None:
    """ONNX Runtime's QDQ graph; with --sensitivity the ranking, with --max-drop the mixed search; the chosen
    model written to -o."""
    request, outcome = study.request, study.outcome
    prepared = prepare(source, study.scratch, static=request.config.mode == "static")
    outcome.notes.append(prepared.note)
    study.progress(f"quantizing ({_label(request.config)})")
    quantized = study.scratch / "int8.onnx"
    quantize_plain(prepared, request.config, study.data.calib, quantized)
    outcome.rows.append(
        ModelRow("int8", _label(request.config), path=request.output, precision="int8", accuracy=study.score(quantized))
    )
    chosen = quantized
    if request.sensitivity or request.max_drop_pct is not None:
        study.progress("per-layer sensitivity")
        outcome.sensitivity = rank_layers(
            prepared, request.config, study.data, study.reference, study.scratch, study.progress
        )
    if request.max_drop_pct is not None:
        chosen = _search_mixed(study, prepared, request.max_drop_pct)
    write_model(chosen, request.output)


def _nncf_controlled(study: _Study, source: Path) -> None:
    """OpenVINO's counterpart of the sensitivity search: when NNCF's plain INT8 breaks --max-drop, NNCF's own
    accuracy control (`ov_control.quantize_openvino_controlled`), scored like every other row."""
    from infermeter.build.int8.ov_quant import float_compute_layers
    from infermeter.quantize.ov_control import quantize_openvino_controlled

    request, outcome, data = study.request, study.outcome, study.data
    assert request.max_drop_pct is not None and data.calib is not None
    plain = outcome.rows[-1]
    assert plain.accuracy is not None
    outcome.budget_met = plain.accuracy.drop_pct <= request.max_drop_pct
    if outcome.budget_met:
        outcome.notes.append(
            f"plain NNCF INT8 is within --max-drop {request.max_drop_pct:g}: no accuracy control needed"
        )
        return
    target = study.scratch / "controlled.xml"
    reference = (study.reference.kind, study.reference.outputs)
    outcome.notes.append(
        quantize_openvino_controlled(source, target, data.calib, data.evaluation, reference, request.max_drop_pct)
    )
    accuracy = study.score(target)
    floats = float_compute_layers(target)
    outcome.budget_met = accuracy.drop_pct <= request.max_drop_pct
    # The plain INT8 IR is no longer the -o output: kept beside it for comparison.
    plain.path = write_model(request.output, plain_beside(request.output))
    write_model(target, request.output)
    label = f"NNCF accuracy control ({len(floats)} float)"
    outcome.rows.append(
        ModelRow("mixed", label, path=request.output, precision="int8", accuracy=accuracy, float_nodes=tuple(floats))
    )


def _search_mixed(study: _Study, prepared: Prepared, max_drop_pct: float) -> Path:
    """The study's greedy search from the ranking, each candidate timed when latency is asked; returns the
    chosen candidate's file (the first within budget, else the most accurate, with the warning)."""
    request, outcome = study.request, study.outcome
    measure = None
    if request.latency:
        from infermeter.quantize.latency import measure_file

        shapes = sample_shapes(study.evaluation)

        def measure(path: Path) -> float | None:
            timing = measure_file(path, request.threads, shapes, input_values=request.input_values)
            return timing.latency_ms.p50 if timing.latency_ms else None

    search = search_mixed(
        prepared, request.config, study.data, study.reference, max_drop_pct, study.scratch, outcome.sensitivity,
        measure,
    )  # fmt: skip
    outcome.frontier = search.frontier
    outcome.budget_met = search.budget_met
    missed = search.missed_warning()
    if missed is not None:
        outcome.warnings.append(missed)
    chosen = search.chosen
    if chosen.float_nodes:
        label = f"mixed ({len(chosen.float_nodes)} float)"
        outcome.rows.append(
            ModelRow(
                "mixed",
                label,
                path=request.output,
                precision="int8",
                accuracy=chosen.accuracy,
                float_nodes=chosen.float_nodes,
            )
        )
        # The plain INT8 file is no longer the -o output: keep it beside it for comparison.
        outcome.rows[1].path = write_model(search.frontier[0].path, plain_beside(request.output))
    return chosen.path


def _finetune_row(study: _Study) -> None:
    from infermeter.quantize import qat

    request, spec, calib = study.request, study.spec, study.data.calib
    assert request.finetune is not None and calib is not None
    train = load_samples(spec.inputs, request.finetune)
    study.progress("quantization-aware fine-tuning")
    module = qat.finetune(
        load_torch_module(spec),
        spec.inputs,
        train,
        calib,
        request.finetune_epochs,
        per_channel=request.config.per_channel,
    )
    exported = study.scratch / "qat-fp32.onnx"
    qat.export_module(module, spec.inputs, spec.output_names, exported)
    tuned = prepare(exported, study.scratch / "qat")
    target = request.output.with_name(f"{request.output.stem}.qat{request.output.suffix}")
    quantize_plain(tuned, request.config, calib, target)
    label = f"QAT ({request.finetune_epochs} epochs)"
    study.outcome.rows.append(ModelRow("qat", label, path=target, precision="int8", accuracy=study.score(target)))


def _time_rows(study: _Study) -> None:
    from infermeter.quantize.latency import measure_file

    request, outcome = study.request, study.outcome
    shapes = sample_shapes(study.evaluation)
    for row in outcome.rows:
        study.progress(f"timing {row.label}")
        try:
            row.timing = measure_file(row.path, request.threads, shapes, input_values=request.input_values)
        except InfermeterError as exc:  # e.g. a file kind `bench` cannot load yet: accuracy still stands
            outcome.notes.append(f"{row.label} not timed: {exc}")
            continue
        if row.timing.precision_effective:
            row.precision = row.timing.precision_effective


def outcome_results(outcome: QuantizeOutcome, model: str) -> list[CaseResult]:
    """The timed rows as results-file cases, with their `Accuracy` and `QuantizedVariant` records."""
    cases = []
    for row in outcome.rows:
        if row.timing is None:
            continue
        case = replace(row.timing)
        case.extra = dict(case.extra)
        if row.accuracy is not None:
            write_record(case, row.accuracy)
        write_record(case, QuantizedVariant(row.role, row.label, model, str(row.path), list(row.float_nodes)))
        cases.append(case)
    return cases


def outcome_results_file(outcome: QuantizeOutcome, model: str, command: Sequence[str]) -> ResultsFile:
    """The timed variants of a quantize run as a results file, each case carrying the study's warnings."""
    from infermeter.machine.environment import new_results_file

    results = new_results_file(command)
    results.cases = outcome_results(outcome, model)
    for case in results.cases:
        case.warnings = [*case.warnings, *outcome.warnings]
    return results
