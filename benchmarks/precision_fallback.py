"""The seeds' reduced-precision story (issue 31, seeds 004 §5.3), replayed with `infermeter quantize --to`: run a
model in FP16 and BF16 on each engine, count the decisions it changes against FP32, find the few layers that must
stay in FP32 (range pre-pass, operator types, bisection, shrink), and time full reduced, mixed and FP32
interleaved on the same engine.

Models: the real all-MiniLM-L6-v2 (`minilm`, the shipped sentences; an embedding, so judged by mean cosine), a
CNN from the zoo (`resnet18`, seeded weights, generated inputs: no image set ships offline), and a classifier
built with a deliberately fragile layer (`benchmarks/precision_models.py`: a LayerNorm written out as
Pow/ReduceMean/Add over ~1e3 activations, which overflows FP16) with its fused-LayerNorm twin.
FP16 is judged by emulation on the ONNX graph where the engine computes it in FP32 (ONNX Runtime's CPU provider
here), and by the engine itself otherwise; each row says which.

    python benchmarks/precision_fallback.py [--quick] [--models minilm,resnet18,fragile,fused] [--write-docs]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from infermeter.quantize.fallback.pipeline import FallbackOutcome, FallbackRequest, study_fallback
from infermeter.quantize.fallback.study import BenchArm, EngineStudy
from infermeter.quantize.reduced import Budget, Judgement

DOCS = Path(__file__).resolve().parents[1] / "docs" / "precision-fallback.md"
HERE = Path(__file__).resolve().parent
MODELS = {
    "minilm": "minilm",
    "resnet18": "resnet18",
    "fragile": f"{HERE / 'precision_models.py'}:fragile_layernorm",
    "fused": f"{HERE / 'precision_models.py'}:fused_layernorm",
}
# Per precision, the engines with a path for it here (ONNX Runtime and TensorRT: FP16 graph / constraints;
# OpenVINO and torch: BF16 on this CPU, whose f16 request OpenVINO runs as bf16).
ENGINES = {"fp16": ("onnxruntime", "tensorrt", "openvino"), "bf16": ("openvino", "torch")}
HEADER = [
    "| model | precision | engine | figures from | FP32 agreement (cos) | full: changed / cos | kept in FP32 | "
    "mixed: changed / cos | evals, s | FP32 ms | full ms (× vs FP32) | mixed ms (× vs FP32) |",
    "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|",
]


def minilm_data(folder: Path, count: int) -> str:
    """The shipped sentences, tokenized at 32 tokens, as an .npz `--data` file."""
    from infermeter.models.text_feeds import load_sentences, tokenize

    path = folder / "sentences.npz"
    np.savez(path, **tokenize(load_sentences()[:count], 32))
    return str(path)


def _judged(judgement: Judgement | None) -> str:
    if judgement is None:
        return "—"
    changed = "n/a" if judgement.decisions_changed is None else str(judgement.decisions_changed)
    return f"{changed} / {judgement.cosine:.6f}"


def _ms(arm: BenchArm | None, storage: bool) -> str:
    if arm is None or arm.result is None or not arm.result.ok or arm.result.latency_ms is None:
        return "—" if arm is None or arm.result is None else arm.result.status
    text = f"{arm.result.latency_ms.p50:.3f}"
    paired = arm.result.timing.paired
    if paired is not None:
        text += " (fp32 compute)" if storage else f" ({paired.ratio:.2f}× [{paired.ci_low:.2f}, {paired.ci_high:.2f}])"
    return text


def rows(name: str, study: EngineStudy) -> list[str]:
    """One table row for an engine with figures; its one-line statements otherwise (returned as notes)."""
    if study.full is None:
        return []
    search = study.search
    if search is None or search.full.meets:
        kept, cost = "— (within budget)", "—" if search is None else f"{search.evaluations}, {search.elapsed_s:.1f}"
    else:
        names = ", ".join(f"{la.name} ({la.op_type})" for la in search.kept) or "none"
        kept = names + (" — capped" if search.capped else "")
        kept += f"; {study.marks.summary()}" if study.marks is not None else ""
        cost = f"{search.evaluations}, {search.elapsed_s:.1f}"
    how = study.full.how + (f"; mixed {study.mixed.how}" if study.mixed and study.mixed.how != study.full.how else "")
    arms = {("mixed" if a.label == "mixed" else "fp32" if a.label == "FP32" else "full"): a for a in study.arms}
    storage = study.speed_note is not None
    fp32 = f"{study.fp32.cosine:.6f}" if study.fp32 else "reference"
    no_mixed = study.mixed_cell()  # no held mark (mixed = full), or the mixed model refused as a build
    cells = [name, study.precision, study.engine, how, fp32, _judged(study.full), kept,
             no_mixed or _judged(study.mixed), cost, _ms(arms.get("fp32"), False), _ms(arms.get("full"), storage),
             no_mixed or _ms(arms.get("mixed"), storage)]  # fmt: skip
    return ["| " + " | ".join(cells) + " |"]


def run(name: str, precision: str, folder: Path, args: argparse.Namespace) -> FallbackOutcome:
    """One study: `name` at `precision` on the engines with a path for it."""
    data = minilm_data(folder, args.samples) if name == "minilm" else None
    target = folder / f"{name}-{precision}"
    request = FallbackRequest(
        MODELS[name],
        precision,
        engines=ENGINES[precision],
        output=target,
        budget=Budget(),
        data=data,
        samples=args.samples,
        max_evaluations=args.max_evals,
        latency=not args.no_latency,
        threads=args.threads,
    )
    return study_fallback(request, lambda msg: print(f"  {name} {precision}: {msg}", flush=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="minilm,resnet18,fragile,fused")
    parser.add_argument("--precisions", default="fp16,bf16")
    parser.add_argument("--quick", action="store_true", help="smoke run: 16 samples, 12 evaluations, no timing")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--max-evals", type=int, default=64)
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.max_evals, args.no_latency = 16, 12, True
    table, notes = list(HEADER), []
    with tempfile.TemporaryDirectory(prefix="precision-fallback-") as scratch:
        for name in args.models.split(","):
            for precision in args.precisions.split(","):
                outcome = run(name, precision, Path(scratch), args)
                for study in outcome.studies:
                    table += rows(name, study)
                    lines = [*study.lines, *(x for x in (study.parity, study.speed_note) if x)]
                    lines += list(study.search.notes) if study.search else []
                    notes += [f"- {name} {precision}, {study.engine}: {line.removeprefix(study.engine + ': ')}"
                              for line in lines]  # fmt: skip
                print("\n".join(table[-len(outcome.studies) :]), flush=True)
    command = "python benchmarks/precision_fallback.py" + (" --quick" if args.quick else "")
    command += " --no-latency" if args.no_latency and not args.quick else ""
    command += f" --models {args.models} --precisions {args.precisions} --samples {args.samples}"
    write(table, notes, command, args)


def write(table: list[str], notes: list[str], command: str, args: argparse.Namespace) -> None:
    """Print the section; with --write-docs, write it as docs/precision-fallback.md (head kept)."""
    budget = Budget().describe()
    smoke = " A --quick run is a smoke run: few samples, a small cap, no timings." if args.quick else ""
    speeds = ("No timings (--no-latency): the ms columns need a run on a quiet machine." if args.no_latency else
              "Speeds: P50 at batch 1, interleaved, speedup vs FP32 with its 95% interval.")  # fmt: skip
    body = [SECTION, "", f"`{command}`, {args.threads} thread(s), budget: {budget} (mean cosine ≥ 0.999 for "
            f"an embedding). {speeds}{smoke} Machine: {machine()}.", "",
            *table, "", "Per engine, what it said:", "", *notes, ""]  # fmt: skip
    print("\n".join(body))
    if args.write_docs:
        text = DOCS.read_text() if DOCS.is_file() else ""
        head = text.split(SECTION)[0].rstrip()
        DOCS.write_text(head + "\n\n" + "\n".join(body))


def machine() -> str:
    """The CPU's model name, its logical CPUs and its reduced-precision flags, as the results were produced on."""
    import os

    from infermeter.results.env import cpu_model_and_flags

    model, flags = cpu_model_and_flags()
    wanted = [f for f in ("avx512_bf16", "avx512_fp16", "amx_bf16") if f in flags]
    return f"{model}, {os.cpu_count()} vCPU, flags {', '.join(wanted) or 'none'} of avx512_bf16/avx512_fp16/amx_bf16"


SECTION = "## Results"

if __name__ == "__main__":
    main()
