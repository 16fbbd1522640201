"""Target: dynamic batching (max-batch 8) gives >= 2x the throughput of max-batch 1 at saturation, with the
P50/P99 cost reported. mobilenet_v2 on ONNX Runtime CPU by default.

Each policy is served by `infermeter serve` in its own process and saturated with a closed loop of
--concurrency requests in flight (enough to fill batches of 8 twice); then the server scenario runs at 70% of
max-batch 1's saturated rate on both, to show the latency cost at equal load.

Usage: python benchmarks/serving_batching.py [--model mobilenet_v2] [--backend onnxruntime] [--duration 10]
"""

from __future__ import annotations

import argparse

from infermeter.load.driver import RunSettings, run_once
from infermeter.load.target import prepare_target
from infermeter.load.verdict import LoadSummary, summarize
from infermeter.serve.server import spawn_server


def _line(label: str, summary: LoadSummary) -> str:
    stats = summary.stats
    assert stats is not None
    errors = sum(summary.run.errors.values())
    return (
        f"{label:<28} {summary.throughput:>9.1f}/s  P50 {stats.p50:>8.2f} ms  P99 {stats.p99:>8.2f} ms  errors {errors}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--backend", default="onnxruntime")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-delay-ms", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: physical cores)")
    args = parser.parse_args()
    common = [args.model, "--backend", args.backend, "--max-queue", "4096"]
    if args.threads:
        common += ["--threads", str(args.threads)]
    saturated: dict[int, LoadSummary] = {}
    for max_batch in (1, 8):
        server = spawn_server([*common, "--max-batch", str(max_batch), "--max-delay-ms", str(args.max_delay_ms)])
        try:
            target = prepare_target(server.url)
            run = run_once(target, RunSettings("offline", args.duration, concurrency=args.concurrency, warmup_s=2.0))
            saturated[max_batch] = summarize(run, None)
        finally:
            server.stop()
        print(_line(f"max-batch {max_batch}, {args.concurrency} in flight", saturated[max_batch]), flush=True)
    ratio = saturated[8].throughput / saturated[1].throughput
    one, eight = saturated[1].stats, saturated[8].stats
    assert one is not None and eight is not None
    print(
        f"throughput max-batch 8 / max-batch 1: {ratio:.2f}x ({'meets' if ratio >= 2 else 'MISSES'} the 2x target); "
        f"latency cost at saturation: P50 {eight.p50 / one.p50:.2f}x, P99 {eight.p99 / one.p99:.2f}x"
    )
    qps = 0.7 * saturated[1].run.achieved_qps
    for max_batch in (1, 8):
        server = spawn_server([*common, "--max-batch", str(max_batch), "--max-delay-ms", str(args.max_delay_ms)])
        try:
            target = prepare_target(server.url)
            run = run_once(target, RunSettings("server", args.duration, qps=qps, warmup_s=1.0))
            print(_line(f"max-batch {max_batch}, Poisson {qps:.0f} QPS", summarize(run, None)), flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
