"""`infermeter optimize` on the digits CNN (trained in seconds on scikit-learn's real digits; see
`infermeter.quantize.digits`) with a 1-point accuracy budget: calibrated on the training split, evaluated on the
held-out split with its labels. Prints the pick with its top-1 evidence (target: drop <= 1 point).
    python benchmarks/optimize_digits.py [--budget-minutes M] [--min-time S] [-o DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from optimize_resnet18 import report, run_optimize, summary


def main() -> None:
    from infermeter.quantize.digits import write_case

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-minutes", type=float, default=6.0)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--max-accuracy-drop", type=float, default=1.0)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    root = args.output or Path(tempfile.mkdtemp(prefix="optimize-digits-"))
    model, train, test, torch_top1 = write_case(root / "digits")
    print(f"digits CNN trained: FP32 PyTorch top-1 on the held-out split {torch_top1:.4f}")
    extra = ["--calib", str(train), "--eval", str(test), "--max-accuracy-drop", str(args.max_accuracy_drop)]
    extra += ["--budget-minutes", str(args.budget_minutes), "--min-time", str(args.min_time)]
    code = run_optimize(str(model), root / "out", extra)
    print(f"exit code {code}")
    report(root / "out", 1.0)
    found = summary(root / "out")
    for case in found["cases"].values():
        acc = case.get("accuracy")
        if acc:
            verdict = "within" if acc["drop_pct"] <= args.max_accuracy_drop else "OUTSIDE"
            print(f"  {case['backend']} {case['precision']} {case['shape_mode']}: top-1 {acc['value']:.4f} vs FP32 "
                  f"{acc['fp32_value']:.4f}, drop {acc['drop_pct']:.2f} points ({verdict} budget)")  # fmt: skip
    pick = found["pick"]
    if pick is not None:
        acc = pick.get("accuracy")
        parity = (pick.get("parity") or {}).get("passed")
        evidence = (
            f"drop {acc['drop_pct']:.2f} points"
            if acc
            else "FP32 with parity passed (no accuracy risk)"
            if parity
            else "FP32 ONNX Runtime, the baseline itself"
        )
        print(f"pick respects the {args.max_accuracy_drop:g}-point budget: {evidence}")


if __name__ == "__main__":
    main()
