"""Target: the load generator alone sustains >= 5,000 requests/s with a P99 scheduling lag <= 1 ms.

The server is `immediate_server.py` (answers at once, in its own process), so every figure is the generator's.
Runs the server scenario (Poisson arrivals) at each --qps and prints offered vs achieved rate, scheduling lag
and round-trip latency. Also prints closed-loop capacity. Figures are only meaningful on an otherwise idle
machine (two cores: one for the server, one for the generator).

The arrivals come from `load/arrivals.py` (`paced`, shared with the OpenAI sweep's rate levels).

Usage: python benchmarks/loadgen_capacity.py [--qps 5000,10000] [--duration 10] [--arrivals poisson|constant]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

from infermeter.load.generator import LoadRun, run_async, run_closed_loop, run_server
from infermeter.load.http_client import ConnectionPool, build_request


def _requests(pool: ConnectionPool) -> list[bytes]:
    body = b'{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'
    return [build_request(pool.host, pool.port, "POST", "/v2/models/m/infer", body, {})]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qps", default="5000,10000")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--arrivals", choices=("poisson", "constant"), default="poisson")
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("immediate_server.py"))], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split("listening on ")[1].strip()

        def server_run(qps: float) -> LoadRun:
            async def go() -> LoadRun:
                pool = ConnectionPool(url)
                await run_closed_loop(pool, _requests(pool), 8, 0.5)  # open connections, warm up
                return await run_server(pool, _requests(pool), qps, args.duration, seed=0, arrivals=args.arrivals)

            return run_async(go)

        print(f"{'target QPS':>10} {'achieved':>9} {'lag P50':>8} {'lag P99':>8} {'lag max':>8} {'RTT P50':>8} "
              f"{'RTT P99':>8} errors  verdict")  # fmt: skip
        for qps in (float(q) for q in args.qps.split(",")):
            run = server_run(qps)
            lag = np.percentile(run.lag_ms, [50, 99, 100])
            rtt = np.percentile(run.latencies_ms, [50, 99]) if run.latencies_ms else [float("nan")] * 2
            ok = run.achieved_qps >= 0.95 * qps and lag[1] <= 1.0 and not run.errors
            print(
                f"{qps:>10.0f} {run.achieved_qps:>9.0f} {lag[0]:>8.3f} {lag[1]:>8.3f} {lag[2]:>8.3f} {rtt[0]:>8.3f} "
                f"{rtt[1]:>8.3f} {sum(run.errors.values()):>6}  {'meets target' if ok else 'MISSES target'}"
            )

        async def closed() -> LoadRun:
            pool = ConnectionPool(url)
            return await run_closed_loop(pool, _requests(pool), 32, min(args.duration, 5.0))

        run = run_async(closed)
        print(f"closed loop, 32 in flight: {run.achieved_qps:.0f} requests/s")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
