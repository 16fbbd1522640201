"""`infermeter optimize resnet18` at batch 1: the chosen configuration against PyTorch eager FP32 measured in the
same run (target: >= 4x faster at P50).

Speed only: the zoo's resnet18 has seeded random weights, so INT8 is calibrated on random inputs and its
"accuracy" is top-1 agreement with FP32 on random inputs, where a random network's logits are near ties (a few
flips in 64 samples are points of "drop" that mean nothing). The default --max-accuracy-drop here is therefore
10 points, stated in the output; the accuracy budget is exercised on real data by optimize_digits.py.
Run on a quiet machine:
    python benchmarks/optimize_resnet18.py [--budget-minutes M] [--min-time S] [-o DIR] [--max-accuracy-drop PCT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def run_optimize(model: str, folder: Path, extra: list[str]) -> int:
    """Run the real CLI (live view on this terminal); returns its exit code."""
    command = [sys.executable, "-m", "infermeter", "optimize", model, "-o", str(folder), *extra]
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, check=False).returncode


def summary(folder: Path) -> dict[str, Any]:
    """Baseline, pick, runner-up and fallback figures read back from the run's results and manifest."""
    results = json.loads((folder / "results.json").read_text())
    cases = {c["id"]: c for c in results["cases"]}
    advice = next(s for s in results["optimize"]["steps"] if s["key"] == "advise")["details"]
    picked = {role: cases.get(advice.get(role) or "") for role in ("baseline", "pick", "runner_up", "fallback")}
    return {"cases": cases, "advice": advice, **picked}


def describe(case: dict[str, Any] | None) -> str:
    """One line per configuration."""
    if case is None:
        return "—"
    acc = case.get("accuracy")
    acc_text = f", {acc['metric']} drop {acc['drop_pct']:.2f} points" if acc else ""
    variant = (case.get("optimize") or {}).get("variant") or ""
    return (
        f"{case['backend']} {case['precision']} b{case['batch']} {case['shape_mode']} {variant}: "
        f"P50 {case['latency_ms']['p50']:.3f} ms, P99 {case['latency_ms']['p99']:.3f} ms{acc_text}"
    )


def report(folder: Path, target: float) -> None:
    """Print the figures and the speedup of the pick over the baseline (same run)."""
    found = summary(folder)
    for role in ("baseline", "pick", "runner_up", "fallback"):
        print(f"{role:>9}: {describe(found[role])}")
    base, pick = found["baseline"], found["pick"]
    if base and pick:
        speedup = base["latency_ms"]["p50"] / pick["latency_ms"]["p50"]
        what = f"{base['backend']} {base['precision']}"
        print(f"pick vs the baseline, {what} (P50, same run): {speedup:.2f}x (target >= {target:g}x)")
    print(f"measured cases: {len(found['cases'])}; report: {folder / 'report.html'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument("--min-time", type=float, default=2.0)
    parser.add_argument("--max-accuracy-drop", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    folder = args.output or Path(tempfile.mkdtemp(prefix="optimize-resnet18-")) / "out"
    extra = ["--batch", "1", "--budget-minutes", str(args.budget_minutes), "--min-time", str(args.min_time)]
    extra += ["--max-accuracy-drop", str(args.max_accuracy_drop), "--threads", str(args.threads)]
    code = run_optimize("resnet18", folder, extra)
    print(f"exit code {code}")
    report(folder, 4.0)


if __name__ == "__main__":
    main()
