"""The real all-MiniLM-L6-v2 (zoo `minilm`): dynamic and static INT8 with ONNX Runtime, scored by cosine similarity
of sentence embeddings to FP32 and top-1 nearest-neighbour (retrieval) agreement on the shipped sentences.
Target: mean cosine >= 0.99 for the chosen INT8 model.
    python benchmarks/quantize_minilm.py [--seq 32]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from infermeter.build.int8.ort_quant import QuantConfig
from infermeter.models.text_feeds import load_sentences, tokenize
from infermeter.quantize.pipeline import quantize_model
from infermeter.quantize.request import QuantizeRequest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--per-channel", action="store_true", help="per-channel weight scales")
    parser.add_argument("--modes", default="dynamic,static")
    parser.add_argument("--method", default="minmax", help="static calibration: minmax, entropy or percentile")
    parser.add_argument(
        "--max-drop", type=float, default=None, help="keep the most sensitive layers float until the drop is met"
    )
    args = parser.parse_args()
    sentences = load_sentences()
    half = len(sentences) // 2
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        np.savez(folder / "calib.npz", **tokenize(sentences[:half], args.seq))
        np.savez(folder / "eval.npz", **tokenize(sentences[half:], args.seq))
        print(f"{len(sentences)} shipped sentences: {half} calibrate, {len(sentences) - half} evaluate, seq {args.seq}")
        for mode in args.modes.split(","):
            outcome = quantize_model(
                QuantizeRequest(
                    "minilm", folder / f"minilm-{mode}.onnx",
                    config=QuantConfig(mode=mode, per_channel=args.per_channel, method=args.method),
                    calib=str(folder / "calib.npz"), eval=str(folder / "eval.npz"), threads=args.threads,
                    max_drop_pct=args.max_drop if mode == "static" else None,
                )
            )  # fmt: skip
            for row in outcome.rows:
                acc = row.accuracy
                p50 = row.timing.latency_ms.p50 if row.timing and row.timing.latency_ms else float("nan")
                assert acc is not None
                print(f"minilm {row.label:<20} cosine mean {acc.details['cosine_mean']:.5f} min "
                      f"{acc.details['cosine_min']:.5f}  retrieval agreement "
                      f"{acc.details.get('retrieval_agreement', 1.0):.4f}  "
                      f"P50 {p50:.3f} ms ({row.precision})")  # fmt: skip
            for warning in outcome.warnings:
                print(f"  warning {warning.code}: {warning.detail}")


if __name__ == "__main__":
    main()
