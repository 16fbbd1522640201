"""What going through Ray costs a sweep (`bench --cluster`), on this machine alone: a one-node local Ray cluster (one
`infermeter_slot`) against a local run, both through the same code path (`measure.benchrun.run_bench`).

1. Per-case overhead: a sweep of `--cases` null-backend cases (1 ms each, one case per task), run locally and on the
   cluster in alternation, `--repeats` times; overhead per case = (cluster wall - local wall) / cases, median over
   repeats. The cluster's start (`ray.init`) is reported apart: it is paid once per sweep. Target (issue 18): at most
   0.5 s per case.
2. A real case's P50: `--model` on onnxruntime at batch 1, locally and on the cluster in alternation; the P50s and
   their ratio (the figures must be those a local run gives: a ratio within the run-to-run spread). The Ray
   daemons stay up for both, so both see the same background.

    python benchmarks/cluster_overhead.py [--cases 10] [--repeats 3] [--model tiny_cnn] [--write-docs]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from infermeter.cluster.session import LOCAL, connect, disconnect
from infermeter.core.case import MeasureSettings
from infermeter.machine.environment import collect_environment
from infermeter.measure.benchrun import SilentDisplay, new_sweep, run_bench
from infermeter.measure.plan import Matrix
from infermeter.measure.scenarios import LATENCY
from infermeter.models.resolve import resolve_model
from infermeter.results.env import default_threads
from infermeter.results.schema import CaseResult

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Cluster overhead"
# Per repeat: the local P50s, the cluster P50s (ms), and the cluster cases' interference shares.
Figures = tuple[list[float], list[float], list[float]]


def _run(matrix: Matrix, on_cluster: bool) -> tuple[float, list[CaseResult]]:
    """Wall seconds of one sweep of `matrix` (in memory, nothing written) and its cases."""
    sweep = new_sweep(None, matrix, LATENCY, True, ["benchmarks/cluster_overhead.py"], {})
    start = time.perf_counter()
    run = run_bench(sweep, SilentDisplay(), roofline=False, history=False, on_cluster=on_cluster)
    return time.perf_counter() - start, run.cases


def null_matrix(cases: int) -> Matrix:
    """`cases` null cases of 1 ms, one task each (no interleaving), a short timed loop."""
    settings = MeasureSettings(warmup_iterations=0, min_iterations=10, min_time_s=0.1, max_time_s=1, target_ci=0,
                               interleave=False)  # fmt: skip
    return Matrix((resolve_model("tiny_cnn"),), (("null",),), batches=tuple(range(1, cases + 1)), threads=1,
                  settings=settings, options=(("null.latency_ms", "1"),))  # fmt: skip


def real_matrix(model: str) -> Matrix:
    """`model` on onnxruntime, batch 1, the machine's physical cores, a 2 s timed loop."""
    settings = MeasureSettings(min_time_s=2.0, max_time_s=10.0)
    return Matrix((resolve_model(model),), (("onnxruntime",),), threads=default_threads(), settings=settings)


def overhead(cases: int, repeats: int) -> tuple[list[float], list[float]]:
    """Per repeat: the local and the cluster sweep's wall seconds (alternating which goes first)."""
    matrix = null_matrix(cases)
    local, cluster = [], []
    for repeat in range(repeats):
        for on_cluster in (repeat % 2 == 1, repeat % 2 == 0):
            wall, results = _run(matrix, on_cluster)
            assert all(case.ok for case in results), [case.error for case in results]
            (cluster if on_cluster else local).append(wall)
    return local, cluster


def p50s(model: str, repeats: int) -> Figures:
    """Per repeat: the local and the cluster P50 (ms), and the cluster case's interference share."""
    matrix = real_matrix(model)
    local, cluster, shares = [], [], []
    for repeat in range(repeats):
        for on_cluster in (repeat % 2 == 1, repeat % 2 == 0):
            _, results = _run(matrix, on_cluster)
            case = results[0]
            assert case.ok and case.latency_ms is not None, case.error
            (cluster if on_cluster else local).append(case.latency_ms.p50)
            if on_cluster and case.timing.interference is not None:
                shares.append(case.timing.interference.other_share)
    return local, cluster, shares


def _report(args: argparse.Namespace, start_s: float, first_s: float, walls: tuple[list[float], list[float]],
            real: Figures) -> str:  # fmt: skip
    local, cluster = walls
    per_case = [(there - here) / args.cases for here, there in zip(local, cluster, strict=True)]
    env = collect_environment()
    p50_local, p50_cluster, shares = real
    ratio = statistics.median(p50_cluster) / statistics.median(p50_local)
    lines = [
        f"{env['cpu_model']}, {env['logical_cores']} logical CPUs, Ray {_ray_version()}, "
        f"{args.repeats} repeats alternating local and cluster.",
        "",
        "| figure | local | on the cluster | difference |",
        "|---|---:|---:|---:|",
        f"| {args.cases} null cases, wall s (median) | {statistics.median(local):.2f} | "
        f"{statistics.median(cluster):.2f} | **{statistics.median(per_case):+.3f} s per case** (target ≤ 0.5) |",
        f"| cluster start (`ray.init`, local), s | | {start_s:.1f} | once per sweep |",
        f"| first one-case sweep (the Ray worker's start and imports), s | | {first_s:.2f} | once per worker |",
        f"| {args.model} onnxruntime b1 P50 ms (median) | {statistics.median(p50_local):.3f} | "
        f"{statistics.median(p50_cluster):.3f} | ratio {ratio:.3f} |",
        f"| its P50s, every repeat | {', '.join(f'{v:.3f}' for v in p50_local)} | "
        f"{', '.join(f'{v:.3f}' for v in p50_cluster)} | |",
    ]
    if shares:
        lines.append(
            f"| other processes' CPU share on the cluster case (median) | | {statistics.median(shares):.0%} | |"
        )
    return "\n".join(lines)


def _ray_version() -> str:
    import ray

    return str(ray.__version__)


def _write_docs(table: str, command: str) -> None:
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    section = f"{SECTION} — `{command}`\n\n{table}\n"
    if SECTION in text:
        head, _, rest = text.partition(SECTION)
        tail = rest[rest.index("\n## ") + 1 :] if "\n## " in rest else ""
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10, help="null cases per sweep")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="tiny_cnn", help="the real case's model (on onnxruntime)")
    parser.add_argument("--write-docs", action="store_true", help=f"write the table into {DOCS.name}")
    args = parser.parse_args()
    start = time.perf_counter()
    connect(LOCAL)
    start_s = time.perf_counter() - start
    try:
        first_s, _ = _run(null_matrix(1), True)  # the Ray worker's first start and imports: reported apart
        walls = overhead(args.cases, args.repeats)
        real = p50s(args.model, args.repeats)
    finally:
        disconnect()
    table = _report(args, start_s, first_s, walls, real)
    print(table)
    if args.write_docs:
        _write_docs(table, "python benchmarks/cluster_overhead.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
