"""Cross-check of `infermeter load` against an independent HTTP load tool: `hey` (Debian's package, Go's net/http).

Both tools load the same `infermeter serve` process with the same request body (one KServe v2 request with the
binary tensor extension, as `load` sends it) in a closed loop at the same concurrency (1, 4, 16), interleaved
(the order alternates every run) for several rounds. The table gives the median over rounds of requests per
second, P50 and P99 latency for each tool and their ratios (ours / hey's). Ours runs through the same driver as
`infermeter load URL --scenario offline --concurrency N`; hey's per-request CSV is read with the same arithmetic
(successful requests over first send to last answer; numpy percentiles of the successful latencies).

hey is installed with apt-get when it is missing (as root; `make benchmark-deps` does the same).

Usage:
    python benchmarks/load_crosscheck.py [--model tiny_cnn] [--backend onnxruntime] [--duration 5] [--rounds 3]
        [--concurrency 1,4,16] [--quick] [--write-docs]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from infermeter.load.driver import RunSettings, run_once
from infermeter.load.target import LoadTarget, prepare_target
from infermeter.serve.server import spawn_server

DOCS = Path(__file__).resolve().parents[1] / "docs" / "load-crosscheck.md"
TOOLS = ("infermeter load", "hey")
SMOKE_NOTE = """
**These figures come from a smoke run (`--quick`: one round of 1 s runs) on a machine busy with other work:
they show the table's shape, not the agreement. Rerun without `--quick` on a quiet machine.**
"""


@dataclass(frozen=True)
class Figures:
    """One run of one tool: successful requests per second, latency percentiles (ms) and failed requests."""

    tool: str
    concurrency: int
    req_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    server_ms: float = float("nan")  # the server's own mean time per request over the run (Triton statistics)


def ensure_hey() -> str:
    """The path of `hey`, installed from Debian when missing (needs root and apt-get)."""
    found = shutil.which("hey")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SystemExit("hey is not installed and cannot be installed here: run `apt-get install hey` as root")
    print("installing hey from Debian (apt-get install hey) …", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "hey"], check=True, env=env, stdout=subprocess.DEVNULL)
    found = shutil.which("hey")
    if not found:
        raise SystemExit("apt-get installed hey but it is not on PATH")
    return found


def _figures(tool: str, concurrency: int, latencies_ms: list[float], elapsed_s: float, errors: int) -> Figures:
    if not latencies_ms:
        return Figures(tool, concurrency, 0.0, float("nan"), float("nan"), errors)
    p50, p99 = (float(v) for v in np.percentile(latencies_ms, [50, 99]))
    return Figures(tool, concurrency, len(latencies_ms) / elapsed_s, p50, p99, errors)


def run_ours(target: LoadTarget, concurrency: int, duration_s: float) -> Figures:
    """`infermeter load URL --scenario offline --concurrency N` (its driver, with its 0.5 s warm-up)."""
    run = run_once(target, RunSettings("offline", duration_s, concurrency=concurrency))
    return _figures(TOOLS[0], concurrency, run.latencies_ms, run.elapsed_s, sum(run.errors.values()))


def run_hey(hey: str, url: str, body: Path, header_length: int, concurrency: int, duration_s: float) -> Figures:
    """hey -z DURATION -c N, POSTing the body; figures from its per-request CSV."""
    command = [
        hey, "-z", f"{duration_s:g}s", "-c", str(concurrency), "-m", "POST", "-D", str(body),
        "-T", "application/octet-stream", "-H", f"Inference-Header-Content-Length: {header_length}", "-o", "csv", url,
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=duration_s + 60, check=True)
    latencies_ms: list[float] = []
    last_s = 0.0
    errors = 0
    # Columns: response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset (seconds).
    for row in csv.DictReader(io.StringIO(proc.stdout)):
        response_s, offset_s = float(row["response-time"]), float(row["offset"])
        if row["status-code"] != "200":
            errors += 1
            continue
        latencies_ms.append(response_s * 1e3)
        last_s = max(last_s, offset_s + response_s)
    return _figures(TOOLS[1], concurrency, latencies_ms, last_s, errors)


def server_success(base_url: str, model: str) -> tuple[int, int]:
    """(successful requests, their total ns) from the server's Triton statistics (GET /v2/models/NAME/stats)."""
    with urllib.request.urlopen(f"{base_url}/v2/models/{model}/stats", timeout=10) as response:
        success = json.load(response)["model_stats"][0]["inference_stats"]["success"]
    return int(success["count"]), int(success["ns"])


def with_server_time(base_url: str, model: str, run: Callable[[], Figures]) -> Figures:
    """`run()`'s figures plus the server's mean time per successful request during it."""
    count_before, ns_before = server_success(base_url, model)
    figures = run()
    count_after, ns_after = server_success(base_url, model)
    served = count_after - count_before
    mean_ms = (ns_after - ns_before) / served / 1e6 if served else float("nan")
    return replace(figures, server_ms=mean_ms)


def _median(runs: list[Figures], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def table(results: list[Figures], levels: list[int]) -> str:
    """Markdown: per concurrency, each tool's median req/s, P50, P99 and the ratios ours / hey's."""
    lines = [
        "| concurrency | req/s load | req/s hey | ratio | P50 ms load | P50 ms hey | ratio | P99 ms load | "
        "P99 ms hey | ratio | server ms load / hey | errors load / hey |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in levels:
        ours = [r for r in results if r.tool == TOOLS[0] and r.concurrency == level]
        theirs = [r for r in results if r.tool == TOOLS[1] and r.concurrency == level]
        cells = [str(level)]
        for field, digits in (("req_s", 1), ("p50_ms", 3), ("p99_ms", 3)):
            a, b = _median(ours, field), _median(theirs, field)
            cells += [f"{a:.{digits}f}", f"{b:.{digits}f}", f"{a / b:.3f}" if b else "-"]
        cells.append(f"{_median(ours, 'server_ms'):.3f} / {_median(theirs, 'server_ms'):.3f}")
        cells.append(f"{sum(r.errors for r in ours)} / {sum(r.errors for r in theirs)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Bench:
    """The served model and the one request both tools send."""

    target: LoadTarget
    url: str
    body_file: Path
    header_length: int
    hey: str

    def run(self, tool: int, level: int, duration_s: float) -> Figures:
        """One run of tool 0 (`load`) or 1 (hey), with the server's own time per request."""
        base = self.target.base_url
        if tool == 0:
            return with_server_time(base, self.target.model_name, lambda: run_ours(self.target, level, duration_s))
        return with_server_time(
            base,
            self.target.model_name,
            lambda: run_hey(self.hey, self.url, self.body_file, self.header_length, level, duration_s),
        )


def run_rounds(bench: Bench, levels: list[int], rounds: int, duration_s: float) -> list[Figures]:
    """Every level in every round, both tools, the order alternating from one run to the next."""
    results: list[Figures] = []
    for round_index in range(rounds):
        for index, level in enumerate(levels):
            for tool in (0, 1) if (round_index + index) % 2 == 0 else (1, 0):
                figures = bench.run(tool, level, duration_s)
                results.append(figures)
                print(
                    f"round {round_index + 1} c={level:<3} {figures.tool:<16} {figures.req_s:9.1f} req/s  "
                    f"P50 {figures.p50_ms:7.3f} ms  P99 {figures.p99_ms:7.3f} ms  "
                    f"server {figures.server_ms:.3f} ms  errors {figures.errors}",
                    file=sys.stderr,
                )
    return results


def _request(target: LoadTarget) -> tuple[bytes, int]:
    """The body of the target's first request and its Inference-Header-Content-Length."""
    head, body = target.requests[0].split(b"\r\n\r\n", 1)
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"inference-header-content-length:"):
            return body, int(line.split(b":", 1)[1])
    raise SystemExit("the request has no Inference-Header-Content-Length (binary extension expected)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny_cnn")
    parser.add_argument("--backend", default="onnxruntime")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--threads", type=int, default=1, help="the server's intra-op threads")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--max-delay-ms", type=float, default=0.5)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 s runs, one round, concurrency 1,4")
    parser.add_argument("--write-docs", action="store_true", help=f"write {DOCS.name}")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.rounds, args.concurrency = 1.0, 1, "1,4"
    levels = [int(c) for c in args.concurrency.split(",")]
    hey = ensure_hey()
    serve_args = [args.model, "--backend", args.backend, "--threads", str(args.threads)]
    serve_args += ["--max-batch", str(args.max_batch), "--max-delay-ms", f"{args.max_delay_ms:g}"]
    server = spawn_server([*serve_args, "--max-queue", "4096"])
    try:
        target = prepare_target(server.url)
        body, header_length = _request(target)
        target.requests = target.requests[:1]  # one request, the one hey sends too
        url = f"{server.url}/v2/models/{target.model_name}/infer"
        with tempfile.TemporaryDirectory() as folder:
            body_file = Path(folder) / "body.bin"
            body_file.write_bytes(body)
            run_ours(target, max(levels), 1.0)  # the server's warm-up, outside every measured run
            bench = Bench(target, url, body_file, header_length, hey)
            results = run_rounds(bench, levels, args.rounds, args.duration)
    finally:
        server.stop()
    rendered = table(results, levels)
    print(rendered)
    if args.write_docs:
        command = "python benchmarks/load_crosscheck.py " + " ".join(sys.argv[1:])
        write_docs(rendered, command, args, len(body), _hey_version(hey))
        print(f"wrote {DOCS}")


def _hey_version(hey: str) -> str:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "hey"], capture_output=True, text=True)
    return f"hey {proc.stdout.strip()} (Debian)" if proc.returncode == 0 and proc.stdout else f"hey at {hey}"


def _cpu() -> str:
    proc = subprocess.run(["lscpu"], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def write_docs(rendered: str, command: str, args: argparse.Namespace, body_bytes: int, hey: str) -> None:
    """docs/load-crosscheck.md: the table, how it was made, and why the tools may differ."""
    text = f"""# `infermeter load` cross-checked against hey

`load`'s figures are checked here against an independent load generator, `hey` ({hey}; Go's net/http), on the
same `infermeter serve` process: {args.model} on {args.backend} ({args.threads} thread(s), max-batch
{args.max_batch}, max-delay {args.max_delay_ms:g} ms), the same request body ({body_bytes} bytes: a KServe v2
request with the binary tensor extension, as `load` sends it), a closed loop at each concurrency, {args.rounds}
round(s) of {args.duration:g} s runs, the two tools interleaved (the order alternates every run). Figures are
the median over rounds; ratios are `load` / hey. Machine: {_cpu()}, {os.cpu_count()} logical CPUs; the server,
the load tool and anything else running share them.
{SMOKE_NOTE if args.quick else ""}
Command: `{command}`

{rendered}

## How both are counted

- **Requests per second**: successful answers divided by the time from the first request sent to the last
  answer received. hey's CSV gives each request's start offset and response time; the script applies the same
  arithmetic `load` uses (`LoadRun.achieved_qps`), so a ratio away from 1 is a difference in the rate the tools
  drove, not in how it is computed.
- **Latency**: numpy percentiles of the successful requests' latencies, for both tools.
- **Server ms**: the server's own mean time per successful request during each tool's runs (from its Triton
  statistics, `GET /v2/models/NAME/stats`: from the endpoint's start, headers parsed, to its response, so
  without the socket and HTTP parsing time): a third witness. When it is the same for both tools and the client
  latencies differ, the difference lies in the clients, the HTTP layer or the network stack.

## Why they can differ

- **Where each clock starts and stops.** `load` stamps a request just before its pre-built bytes are written
  to an idle keep-alive socket, and stops when its protocol callback has the last byte of the response (it
  parses only the status line and Content-Length). hey times `client.Do` plus reading the body: Go builds the
  request, takes a connection from its pool, writes headers and body, parses the response headers into a map
  and copies the body out; its scheduler and garbage collector run inside that window. Expect hey's latencies
  to carry a few tens of microseconds more at concurrency 1, where the server's own time is smallest.
- **Connection reuse.** Both keep connections alive. `load` opens its connections during its 0.5 s warm-up, so
  no measured request pays a TCP handshake; hey opens one connection per worker inside the measured run, so
  its first request per worker includes the dial (visible only in the P99 when a run has few requests).
- **CPU taken from the server.** On a small machine the load generator competes with the server for the
  cores. A client that spends more CPU per request (hey: a goroutine per worker, net/http's parsing,
  allocations) leaves less to the server at high concurrency and lowers the throughput both measure in its
  runs; `load` is one Python thread on uvloop doing a bytes write and a header search per request.
- **The end of a run.** hey stops issuing at its `-z` deadline and discards what is still in flight; `load`
  stops issuing at its deadline and waits for the requests in flight (they count, and the run's time includes
  them). With {args.duration:g} s runs this moves the rate by well under 1% at concurrency 16.

Where a ratio is outside 0.95..1.05, the bullets above are the candidates; the rows give which figure moved
(rate, P50 or P99) and at which concurrency.
"""
    DOCS.write_text(text)


if __name__ == "__main__":
    main()
