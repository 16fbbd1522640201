"""Accuracy-aware INT8, two ways, on the same data and the same scoring (issue 20): our sensitivity search on ONNX
Runtime's QDQ graph (`quantize --max-drop`, layers ranked by their accuracy cost and returned to float greedily) and
NNCF's own accuracy control on OpenVINO (`quantize --engine openvino --max-drop`,
`nncf.quantize_with_accuracy_control`). Per model and budget: plain INT8's drop, the chosen model's drop and float
layers, the search's seconds and each model's P50 on its own engine. The digits CNN (real data, top-1 on its
held-out split) and MiniLM (the shipped sentences, mean cosine to FP32), the models `quantize` is benchmarked on.

    python benchmarks/accuracy_control.py [--models digits,minilm] [--budget 0.5] [--write-docs]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from infermeter.quantize import digits
from infermeter.quantize.pipeline import quantize_model
from infermeter.quantize.request import QuantizeOutcome, QuantizeRequest

DOCS = Path(__file__).resolve().parents[1] / "docs" / "int8-engines.md"
SECTION = "## Accuracy-aware INT8: our sensitivity search against NNCF's accuracy control"
ENGINES = {"onnxruntime": ".onnx", "openvino": ".xml"}


def data(model: str, folder: Path) -> tuple[str, Path, Path]:
    """(MODEL argument, calibration file, evaluation file)."""
    if model == "digits":
        path, train, test, _ = digits.write_case(folder / "digits")
        return str(path), train, test
    from infermeter.models.text_feeds import load_sentences, tokenize

    sentences = load_sentences()
    half = len(sentences) // 2
    np.savez(folder / "calib.npz", **tokenize(sentences[:half], 32))
    np.savez(folder / "eval.npz", **tokenize(sentences[half:], 32))
    return model, folder / "calib.npz", folder / "eval.npz"


def run(model: str, engine: str, budget: float, folder: Path, threads: int) -> tuple[QuantizeOutcome, float]:
    """One `quantize --max-drop budget` on `engine`, timed without its latency step (the sensitivity search would
    time its candidates, NNCF's does not); then each row's P50, measured apart (`quantize.latency.measure_file`)."""
    from infermeter.models.resolve import resolve_model
    from infermeter.models.samples import load_samples
    from infermeter.quantize.latency import measure_file

    ref, calib, evaluation = data(model, folder)
    output = folder / f"{Path(ref).stem}-{engine}{ENGINES[engine]}"
    request = QuantizeRequest(ref, output, engine=engine, calib=str(calib), eval=str(evaluation),
                              max_drop_pct=budget, threads=threads, latency=False)  # fmt: skip
    start = time.perf_counter()
    outcome = quantize_model(request)
    searched_s = time.perf_counter() - start
    samples = load_samples(resolve_model(ref).inputs, str(evaluation)).head(1)
    shapes = tuple((name, tuple(array.shape)) for name, array in samples.arrays.items())
    for row in outcome.rows[1:]:  # FP32 is not in the table
        row.timing = measure_file(row.path, threads, shapes)
    return outcome, searched_s


def lines(model: str, engine: str, outcome: QuantizeOutcome, searched_s: float, budget: float) -> list[str]:
    """Table rows: plain INT8 and the chosen model."""
    out = []
    for row in outcome.rows[1:]:
        assert row.accuracy is not None
        p50 = f"{row.timing.latency_ms.p50:.3f}" if row.timing and row.timing.latency_ms else "—"
        floats = str(len(row.float_nodes)) if row.role == "mixed" else "0"
        took = f"{searched_s:.1f}" if row is outcome.rows[-1] else ""
        cells = [model, engine, f"{budget:g}", row.label, f"{row.accuracy.drop_pct:.2f} ({row.accuracy.metric})",
                 floats, p50, took]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="digits,minilm")
    parser.add_argument("--budget", type=float, default=0.5, help="--max-drop, points")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    table = [
        "| model | engine | budget (points) | row | drop (points) | float compute layers | P50 ms | seconds (all of "
        "quantize) |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    notes = []
    with tempfile.TemporaryDirectory(prefix="accuracy-control-") as scratch:
        for model in args.models.split(","):
            for engine in ENGINES:
                folder = Path(scratch) / f"{model}-{engine}"
                folder.mkdir()
                outcome, searched_s = run(model, engine, args.budget, folder, args.threads)
                table += lines(model, engine, outcome, searched_s, args.budget)
                notes += [f"- {model}, {engine}: {note}" for note in outcome.notes if "drop" in note]
                print(table[-1], flush=True)
    command = f"python benchmarks/accuracy_control.py --models {args.models} --budget {args.budget:g}"
    body = [SECTION, "", f"`{command}`, {args.threads} thread(s):", "", *table, "", *notes, ""]
    print("\n".join(body))
    if args.write_docs:
        text = DOCS.read_text()
        head = text.split(SECTION)[0].rstrip()
        DOCS.write_text(head + "\n\n" + "\n".join(body))


if __name__ == "__main__":
    main()
