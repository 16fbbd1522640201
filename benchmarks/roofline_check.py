"""No measured case may beat the ceiling it is compared with: bench real models on the available backends, add
the roofline fields with `annotate_roofline` (this machine's cached `peak`, measured on a miss) and check every
case's achieved GFLOP/s against its precision's ceiling. Exit status 1 when a case exceeds it (then the ceiling
is wrong and the peak measurement must be fixed).

    python benchmarks/roofline_check.py --models tiny_cnn,mobilenet_v2 --backends torch,onnxruntime,openvino
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tiny_cnn,mobilenet_v2")
    parser.add_argument("--backends", default="torch,onnxruntime,openvino")
    parser.add_argument("--precisions", default="fp32")
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--min-time", default="1")
    parser.add_argument("--results", type=Path, default=None, help="Annotate this results file instead of benching.")
    args = parser.parse_args()

    from infermeter.graph.roofline import annotate_roofline
    from infermeter.machine.ceilings_cache import load_or_measure_peak
    from infermeter.results.io import read_results, write_results

    path = args.results
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="infermeter-roofline-")) / "bench.json"
        command = [sys.executable, "-m", "infermeter", "bench", *args.models.split(","), "-b", args.backends]
        command += ["--precision", args.precisions, "--batch", args.batch, "--min-time", args.min_time, "-o", str(path)]
        print(" ".join(command))
        subprocess.run(command, check=False)
    results = read_results(path)
    peak, cache_hit = load_or_measure_peak()
    start = time.perf_counter()
    annotate_roofline(results, peak)
    print(f"annotate_roofline: {time.perf_counter() - start:.2f} s (peak {'cached' if cache_hit else 'measured'})")
    write_results(path, results)
    violations = 0
    print(f"{'case':<60} {'GFLOP/s':>9} {'ceiling':>9} {'fraction':>9} {'FLOP/B':>7}")
    for case in results.cases:
        if "achieved_gflops" not in case.extra:
            print(f"{case.id:<60} {case.status} {case.extra.get('roofline_error', case.error or '')}")
            continue
        ceiling = case.extra["peak_ceiling_gflops"]
        fraction = case.extra["peak_fraction"]
        exceeded = ceiling is not None and case.extra["achieved_gflops"] > ceiling
        violations += exceeded
        print(
            f"{case.id:<60} {case.extra['achieved_gflops']:>9.1f} {ceiling or 0:>9.1f} "
            f"{(fraction or 0):>9.1%} {case.extra['arithmetic_intensity']:>7.1f}{'  EXCEEDS' if exceeded else ''}"
        )
    print(f"\n{violations} case(s) above their ceiling; results with roofline fields: {path}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
