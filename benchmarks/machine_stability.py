"""Is this machine's own speed steady? A ceiling can only be repeatable on a machine that is.

Times one fixed workload -- a torch matrix product on every core, each call on its own -- without pause for
--seconds, and prints, per --window-s window, the fastest call and the median call (GFLOP/s). The fastest call of
a window is what `infermeter peak` takes as a ceiling; if it moves by more than 10% between windows of the same
run, then no method can make `peak` repeatable within 10% on this machine: the hardware share it is given moves.

    python benchmarks/machine_stability.py --seconds 120
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--window-s", type=float, default=5.0)
    parser.add_argument("--size", type=int, default=512, help="matrix side n (2n^3 operations per call)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = parser.parse_args()

    import torch

    from infermeter.results.env import default_threads

    threads = default_threads()
    torch.set_num_threads(threads)
    dtype = getattr(torch, args.dtype)
    a = torch.randn(args.size, args.size).to(dtype)
    b = torch.randn(args.size, args.size).to(dtype)
    flops = 2.0 * args.size**3
    for _ in range(20):
        torch.mm(a, b)
    print(
        f"torch {torch.__version__}, {threads} threads, {args.dtype} {args.size}^3 product, {args.window_s:g} s windows"
    )
    print(f"{'t s':>6} {'fastest GFLOP/s':>16} {'median GFLOP/s':>15}")
    start = time.perf_counter()
    bests: list[float] = []
    while time.perf_counter() - start < args.seconds:
        rates: list[float] = []
        window_start = time.perf_counter()
        while time.perf_counter() - window_start < args.window_s:
            t0 = time.perf_counter()
            torch.mm(a, b)
            rates.append(flops / (time.perf_counter() - t0) / 1e9)
        bests.append(max(rates))
        print(f"{window_start - start:6.0f} {max(rates):16.1f} {statistics.median(rates):15.1f}")
    spread = (max(bests) - min(bests)) / max(bests)
    print(
        f"\nfastest call per window: min {min(bests):.1f}, median {statistics.median(bests):.1f}, "
        f"max {max(bests):.1f} GFLOP/s; spread (max-min)/max {spread:.1%}"
    )
    print("steady enough for a 10% repeatability check" if spread <= 0.10 else "NOT steady: the machine's speed moves")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
