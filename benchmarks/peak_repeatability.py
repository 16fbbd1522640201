"""Is `infermeter peak` repeatable? Measures the ceilings several times (each a fresh `infermeter peak --refresh`
process) and prints, per ceiling, every run, the spread (max-min)/max and the winning engines. Exit status 1 when
a ceiling varies by more than --tolerance (default 10%).

Run on a quiet machine: other processes on the same cores make any ceiling look lower and noisier.
    python benchmarks/peak_repeatability.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

KEYS = ("fp32_gflops", "bf16_gflops", "fp16_gflops", "int8_gops", "bandwidth_gbs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--save", help="write every run's full result (probes included) to this JSON file")
    args = parser.parse_args()
    runs = []
    for index in range(args.runs):
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "infermeter", "peak", "--refresh", "--json"], capture_output=True, text=True
        )
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 2
        runs.append(json.loads(proc.stdout))
        print(
            f"run {index + 1}: {time.perf_counter() - start:.1f} s wall, {runs[-1].get('rounds')} rounds, "
            f"engines {runs[-1]['engines']}"
        )
        if args.save:
            with open(args.save, "w") as handle:
                json.dump(runs, handle, indent=1)
    worst = 0.0
    print(f"\n{'ceiling':<15} {'runs':<40} spread")
    for key in KEYS:
        values = [r.get(key) for r in runs]
        if any(v is None for v in values):
            print(f"{key:<15} {'not measurable here':<40}")
            continue
        spread = (max(values) - min(values)) / max(values)
        worst = max(worst, spread)
        shown = ", ".join(f"{v:,.1f}" for v in values)
        print(f"{key:<15} {shown:<40} {spread:.1%}")
    verdict = "within" if worst <= args.tolerance else "OUTSIDE"
    print(f"\nworst spread {worst:.1%}: {verdict} the {args.tolerance:.0%} tolerance")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
