"""INT8 by each engine's own quantizer against the cross-fed QDQ graph, on this machine (issue 20 item 5): ONNX
Runtime (static QDQ), OpenVINO with NNCF's IR (its own), and OpenVINO fed ONNX Runtime's QDQ graph
(`-b openvino:int8_source=qdq`), each beside its FP32, in one interleaved `bench` run per model; then every INT8 graph
scored on the same evaluation samples against the same FP32 reference.

    python benchmarks/int8_engines.py --write-docs          # resnet18, mobilenet_v2, the digits CNN, minilm
    python benchmarks/int8_engines.py --models digits --rounds 4 --max-time 2     # a smoke run

Calibration is the same set for every quantizer (`-O quantize.calib=FILE`): the digits CNN's real training split;
for the others generated inputs the model's own feed generator makes (tokenized real sentences for MiniLM, random
images for the seeded-weight CNNs, so their accuracy column is agreement with FP32, not a task metric). Per row: P50
of FP32 and INT8, the INT8 speedup over the engine's FP32 with the spread of its per-round ratios, the accuracy drop,
the per-layer precision mix OpenVINO reads back, and, where INT8 is slower than FP32, why (OpenVINO's per-node
counters). Below: OpenVINO's own INT8 against the cross-fed QDQ graph, paired per round. Nothing else should run on
the machine meanwhile.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infermeter.report.int8_explanation import fp32_twin, int8_explanation
from infermeter.results.io import read_results
from infermeter.results.records import Int8Run, read_record
from infermeter.results.schema import CaseResult

DOCS = Path(__file__).resolve().parents[1] / "docs" / "int8-engines.md"
MODELS = ("resnet18", "mobilenet_v2", "digits", "minilm")
BACKENDS = ("onnxruntime", "openvino", "openvino:int8_source=qdq")


@dataclass(frozen=True)
class ModelCase:
    """What one model is benched and scored with: its MODEL argument, calibration file, evaluation file."""

    name: str
    model: str
    calib: Path
    evaluation: Path


def _generated_data(model: str, folder: Path, count: int, seed: int) -> Path:
    """`count` batch-1 inputs from the model's own feed generator, stacked into an .npz named like its inputs."""
    from infermeter.models.inputs import generate_feeds, resolve_shapes
    from infermeter.models.resolve import resolve_model

    spec = resolve_model(model)
    feeds = generate_feeds(spec.inputs, resolve_shapes(spec.inputs, 1), count, seed=seed)
    path = folder / f"{model}-{seed}.npz"
    np.savez(path, **{name: np.concatenate([f[name] for f in feeds]) for name in feeds[0]})
    return path


def model_case(name: str, folder: Path, samples: int) -> ModelCase:
    """The digits CNN trained here with its real splits, or a zoo model with generated calibration/evaluation."""
    if name == "digits":
        from infermeter.quantize.digits import write_case

        model, train, test, _ = write_case(folder / "digits")
        return ModelCase(name, str(model), train, test)
    calib = _generated_data(name, folder, samples, seed=1)
    return ModelCase(name, name, calib, _generated_data(name, folder, samples, seed=2))


def bench(case: ModelCase, args: argparse.Namespace, folder: Path) -> list[CaseResult]:
    """One interleaved bench: every backend at FP32 and INT8, the same calibration for every quantizer."""
    out = folder / f"{case.name}.json"
    command = [sys.executable, "-m", "infermeter", "bench", case.model, "--batch", "1", "--threads", str(args.threads)]
    for backend in BACKENDS:
        command += ["-b", backend]
    command += ["--precision", "fp32,int8", "--allow-mixed-precision", "-O", f"quantize.calib={case.calib}"]
    command += ["--rounds", str(args.rounds), "--max-time", str(args.max_time), "--target-ci", args.target_ci]
    command += ["--case-timeout", str(args.case_timeout), "--no-history", "--no-roofline"]
    command += ["-o", str(out)]
    print("$", " ".join(command[2:]), flush=True)
    subprocess.run(command, check=False)
    return read_results(out).cases if out.exists() else []


def accuracy_drops(case: ModelCase, results: list[CaseResult], threads: int) -> dict[str, str]:
    """Each INT8 row's accuracy drop (points) on the evaluation file, against the FP32 ONNX model's outputs,
    every row scored the same way (`optimize.accuracy`)."""
    from infermeter.models.convert import onnx_for
    from infermeter.models.resolve import resolve_model
    from infermeter.models.samples import load_samples
    from infermeter.optimize.accuracy import score_backend
    from infermeter.quantize.study import fp32_reference

    spec = resolve_model(case.model)
    evaluation = load_samples(spec.inputs, str(case.evaluation))
    reference = fp32_reference(onnx_for(spec).path, spec.task, evaluation, threads)
    calib = {"quantize.calib": str(case.calib)}
    drops = {}
    for result in results:
        if result.precision != "int8" or not result.ok:
            continue
        try:
            options = tuple(sorted((calib | result.options).items()))
            scored = score_backend(spec, result.backend, "int8", reference, evaluation, threads, options)
            drops[result.id] = f"{scored.accuracy.drop_pct:.2f} ({scored.accuracy.metric})"
        except Exception as exc:  # one engine that cannot be scored must not cost the others their column
            drops[result.id] = f"not scored: {type(exc).__name__}"
    return drops


def _label(case: CaseResult) -> str:
    crossed = case.options.get("openvino.int8_source") == "qdq"
    return f"{case.backend} (cross-fed QDQ)" if crossed else case.backend


def ratio_spread(slow: CaseResult, fast: CaseResult) -> tuple[float, float, float] | None:
    """slow/fast: the ratio of the two P50s, with the smallest and largest ratio of one interleaved round's P50s
    (the run-to-run noise)."""
    if slow.latency_ms is None or fast.latency_ms is None or fast.latency_ms.p50 <= 0:
        return None
    ratios = [
        s / f for s, f in zip(slow.timing.rounds_p50_ms or [], fast.timing.rounds_p50_ms or [], strict=False) if f > 0
    ]
    ratio = slow.latency_ms.p50 / fast.latency_ms.p50
    return ratio, min(ratios, default=ratio), max(ratios, default=ratio)


def _spread(values: tuple[float, float, float] | None) -> str:
    return "—" if values is None else f"{values[0]:.2f}x [{values[1]:.2f}–{values[2]:.2f}]"


def rows(name: str, results: list[CaseResult], drops: dict[str, str]) -> tuple[list[str], list[str]]:
    """The table rows of one model's INT8 cases, and the why-sentences of those slower than their FP32."""
    lines, reasons = [], []
    for case in results:
        if case.precision != "int8":
            continue
        record = read_record(case, Int8Run)
        twin = fp32_twin(case, results)
        p50 = f"{case.latency_ms.p50:.3f}" if case.ok and case.latency_ms else f"{case.status}: {case.error}"
        fp32 = f"{twin.latency_ms.p50:.3f}" if twin is not None and twin.latency_ms else "—"
        speed = ratio_spread(twin, case) if twin is not None and case.ok else None
        mix = record.mix.describe() if record is not None and record.mix is not None else "—"
        quantizer = record.quantizer if record is not None else "—"
        cells = [name, _label(case), quantizer, fp32, p50, _spread(speed), drops.get(case.id, "—"), mix]
        lines.append("| " + " | ".join(cells) + " |")
        if speed is not None and speed[0] < 1:
            why = int8_explanation(case, results) or "no per-node profile (the engine has no per-node counters)"
            reasons.append(f"- {name}, {_label(case)}: {why}")
    return lines, reasons


def own_vs_crossed(name: str, results: list[CaseResult]) -> str:
    """OpenVINO's NNCF INT8 against the cross-fed QDQ graph, paired per round (>1: NNCF faster)."""
    int8 = [c for c in results if c.backend == "openvino" and c.precision == "int8" and c.ok]
    own = next((c for c in int8 if "openvino.int8_source" not in c.options), None)
    crossed = next((c for c in int8 if c.options.get("openvino.int8_source") == "qdq"), None)
    if own is None or crossed is None:
        return f"| {name} | — | — |"
    spread = ratio_spread(crossed, own)
    verdict = "—" if spread is None else ("within noise" if spread[1] <= 1 <= spread[2] else
                                          ("NNCF faster" if spread[0] > 1 else "NNCF SLOWER"))  # fmt: skip
    return f"| {name} | {_spread(spread)} | {verdict} |"


def document(tables: list[str], reasons: list[str], pairs: list[str], args: argparse.Namespace) -> str:
    """The markdown section."""
    head = [
        "| model | engine | quantizer | FP32 P50 ms | INT8 P50 ms | INT8 speedup [rounds min–max] | accuracy drop "
        "(points) | compute layers (runtime) |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    pair_head = ["| model | cross-fed QDQ P50 / NNCF P50 [rounds min–max] | verdict |", "|---|---:|---|"]
    return "\n".join([
        "# INT8 by each engine's own quantizer",
        "",
        f"`python benchmarks/int8_engines.py {' '.join(sys.argv[1:])}` on {_cpu()}: {args.threads} thread(s), "
        f"{args.rounds} interleaved rounds of up to {args.max_time:g} s, batch 1, {args.samples} generated "
        "calibration/evaluation samples (the digits CNN: its real splits).",
        "",
        *head, *tables, "",
        "## Where INT8 is slower than FP32, why",
        "",
        *(reasons or ["- none: every engine's INT8 was at least as fast as its FP32"]), "",
        "## OpenVINO: NNCF's INT8 against the cross-fed QDQ graph",
        "",
        *pair_head, *pairs, "",
    ])  # fmt: skip


def _cpu() -> str:
    from infermeter.machine.environment import collect_environment

    return str(collect_environment().get("cpu_model") or platform.machine())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--max-time", type=float, default=10.0)
    parser.add_argument("--samples", type=int, default=64, help="calibration and evaluation samples (generated)")
    parser.add_argument("--target-ci", default="1%", help="bench --target-ci (a smoke run: 5%%)")
    parser.add_argument("--case-timeout", type=float, default=1800.0, help="bench --case-timeout, seconds")
    parser.add_argument("--write-docs", action="store_true", help=f"write {DOCS.name}")
    args = parser.parse_args()
    tables: list[str] = []
    reasons: list[str] = []
    pairs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="int8-engines-") as scratch:
        folder = Path(scratch)
        for name in args.models.split(","):
            case = model_case(name, folder, args.samples)
            results = bench(case, args, folder)
            lines, why = rows(name, results, accuracy_drops(case, results, args.threads))
            tables += lines
            reasons += why
            pairs.append(own_vs_crossed(name, results))
    text = document(tables, reasons, pairs, args)
    print(text)
    if args.write_docs:
        DOCS.write_text(text)
        print(f"wrote {DOCS}")


if __name__ == "__main__":
    main()
