"""Digits CNN (real scikit-learn digits, trained here in seconds): FP32 vs INT8 (defaults) vs sensitivity-guided
mixed model under a 0.5-point budget vs QAT, top-1 on the held-out split.
Targets: INT8 drop <= 1 point with defaults; the mixed model meets 0.5 points when plain INT8 does not.
    python benchmarks/quantize_digits.py [--epochs 30] [--budget 0.5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from infermeter.quantize import digits
from infermeter.quantize.pipeline import quantize_model
from infermeter.quantize.request import QuantizeRequest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=digits.DEFAULT_EPOCHS)
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--qat-epochs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        model, train, test, torch_top1 = digits.write_case(folder, args.epochs)
        print(f"digits CNN trained {args.epochs} epochs: torch FP32 top-1 {torch_top1:.4f} on 540 held-out digits")
        request = QuantizeRequest(
            str(model), folder / "digits.int8.onnx", calib=str(train), eval=str(test), max_drop_pct=args.budget,
            finetune=None, latency=True, threads=1,
        )  # fmt: skip
        outcome = quantize_model(request)
        # QAT needs the torch module: fine-tune the trained CNN through simulated int8, then the same PTQ.
        from infermeter.build.int8.ort_quant import QuantConfig, preprocess, quantize_onnx
        from infermeter.models.inputs import InputSpec
        from infermeter.models.samples import load_samples
        from infermeter.quantize import qat
        from infermeter.quantize.evaluate import ModelRunner, score

        data = digits.load_split()
        net = digits.train(data, args.epochs)
        inputs = (InputSpec("input", "float32", shape=("batch", 1, 8, 8)),)
        train_samples, test_samples = load_samples(inputs, str(train)), load_samples(inputs, str(test))
        qat.finetune(net, inputs, train_samples, train_samples.head(300), epochs=args.qat_epochs)
        digits.export(net, folder / "qat-fp32.onnx")
        preprocess(folder / "qat-fp32.onnx", folder / "qat-pre.onnx")
        quantize_onnx(folder / "qat-pre.onnx", folder / "qat-int8.onnx", QuantConfig(), train_samples.head(300))
        fp32_out = ModelRunner(model).predict(test_samples)
        qat_acc = score(
            "classification", fp32_out, ModelRunner(folder / "qat-int8.onnx").predict(test_samples), test_samples.labels
        )
    for row in outcome.rows:
        acc, p50 = row.accuracy, row.timing.latency_ms.p50 if row.timing and row.timing.latency_ms else None
        assert acc is not None
        print(
            f"{row.label:<22} top-1 {acc.value:.4f}  drop {acc.drop_pct:+.2f} points  P50 {p50 or float('nan'):.4f} ms"
        )
    print(f"{f'QAT ({args.qat_epochs} epochs)':<22} top-1 {qat_acc.value:.4f}  drop {qat_acc.drop_pct:+.2f} points")
    for item in outcome.sensitivity:
        print(f"  sensitivity {item.node:<14} recovered {item.recovered_pct:+.2f} points, output SQNR gain "
              f"{item.output_sqnr_gain_db:+.1f} dB, activation SQNR {item.activation_sqnr_db:.1f} dB")  # fmt: skip
    for point in outcome.frontier:
        print(f"  frontier: {len(point.float_nodes)} float layer(s) {list(point.float_nodes)} drop "
              f"{point.accuracy.drop_pct:+.2f} P50 {point.latency_p50_ms or float('nan'):.4f} ms")  # fmt: skip
    plain = outcome.rows[1].accuracy
    assert plain is not None
    print(f"plain INT8 drop {plain.drop_pct:+.2f} points (target <= 1): {'met' if plain.drop_pct <= 1 else 'NOT met'}")
    print(f"budget {args.budget} points: {'met' if outcome.budget_met else 'NOT met'}"
          + (" by plain INT8 already" if outcome.budget_met and len(outcome.rows) == 2 else ""))  # fmt: skip


if __name__ == "__main__":
    main()
