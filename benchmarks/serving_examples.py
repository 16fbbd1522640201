"""The two examples of docs/serving.md, run for real: a KServe `load` run and an `llm load` run, each searching the
peak rate under an SLO and reporting goodput at every probe, with the one latency definition (each request timed
from its scheduled send time, its wait in any queue included; the client's own lag beside it).

- KServe: `infermeter serve MODEL -b BACKEND` (a child process on 127.0.0.1), then
  `infermeter load URL --find-peak --slo-p99-ms MS --slo latency_ms=MS`.
- LLM: llama-cpp-python's OpenAI-compatible server on a GGUF (`tiny-llama` by default, built in code; the packaged
  `smollm2-135m` with `--llm-model smollm2-135m`), started as tests/llm/test_llm.py starts it (one request at a time,
  `--interrupt_requests False` so that no stream is cut short), then one client's rate measured with
  `infermeter llm load URL --concurrency 1`, then `infermeter llm load URL --rates TOP --find-peak --slo ...` from
  twice that rate down.

Each command runs as a user would type it (`python -m infermeter …`); the doc shows the commands with the port
the examples use (8000 for `serve`, 8080 for the LLM server). With --write-docs the figures go into docs/serving.md
between its markers, with the machine line; take them on a quiet machine (other processes on the cores change
every figure). --quick is a smoke run (short probes, few requests): it shows the tables' shape, not figures.

Usage:
    python benchmarks/serving_examples.py [--quick] [--write-docs] [--machine-note "quiet machine"]
        [--kserve-model tiny_cnn] [--kserve-backend onnxruntime] [--llm-model tiny-llama]
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from infermeter.results.io import read_results
from infermeter.results.schema import ResultsFile

DOCS = Path(__file__).resolve().parents[1] / "docs" / "serving.md"
START, END = "<!-- serving-examples:start -->", "<!-- serving-examples:end -->"
DOC_PORTS = {"kserve": 8000, "llm": 8080}


@dataclass(frozen=True)
class Example:
    """One example run: the commands as the doc shows them, its results file and the peak line it printed."""

    commands: tuple[str, ...]
    results: ResultsFile
    peak_line: str


def infermeter(args: list[str], shown: list[str], url: str, doc_url: str, work: Path) -> str:
    """Run `infermeter ARGS` in `work` as a user would; note it for the doc (its URL as the doc's); its stdout."""
    shown.append(shlex.join(["infermeter", *(a.replace(url, doc_url) for a in args)]))
    command = [sys.executable, "-m", "infermeter", *args]
    proc = subprocess.run(command, capture_output=True, text=True, check=False, cwd=work)
    if proc.returncode != 0:
        raise SystemExit(f"`{shown[-1]}` failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    print(proc.stdout, end="", flush=True)
    return proc.stdout


def peak_line(stdout: str) -> str:
    """The peak search's line of a command's output (`peak 12.5 QPS: the SLO stops holding between …`)."""
    found = [line.strip() for line in stdout.splitlines() if re.search(r"\bpeak\b|no rate met the SLO", line)]
    return found[-1] if found else "(no peak line printed)"


def kserve_example(args: argparse.Namespace, work: Path) -> Example:
    """`infermeter serve` in a child process, then `infermeter load URL --find-peak` with a goodput bound."""
    from infermeter.serve.server import spawn_server

    serve_args = [args.kserve_model, "-b", args.kserve_backend]
    shown = [shlex.join(["infermeter", "serve", *serve_args, "--port", str(DOC_PORTS["kserve"])]) + " &"]
    server = spawn_server(serve_args)
    out = work / "kserve.json"
    try:
        stdout = infermeter(
            ["load", server.url, "--find-peak", "--slo-p99-ms", f"{args.kserve_slo_ms:g}",
             "--slo", f"latency_ms={args.kserve_slo_ms:g}", "--duration", f"{args.duration:g}", "-o", out.name],
            shown, server.url, f"http://127.0.0.1:{DOC_PORTS['kserve']}", work,
        )  # fmt: skip
    finally:
        server.stop()
    return Example(tuple(shown), read_results(out), peak_line(stdout))


@contextmanager
def llama_server(model: str) -> Iterator[tuple[str, list[str]]]:
    """llama-cpp-python's server on `model`'s GGUF, started for a load run (`llm.openai_server`): (URL, its command
    as the doc shows it)."""
    from infermeter.llm.models import resolve_gguf
    from infermeter.llm.openai_server import free_port, llama_cpp_server_command, llama_cpp_server_flags, started_server

    flags = llama_cpp_server_flags(model, threads=1)
    shown = ["python -m llama_cpp.server --model MODEL.gguf " + shlex.join([*flags, "--port", "8080"]) + " &"]
    port = free_port()
    with started_server(
        llama_cpp_server_command(resolve_gguf(model), port, flags), f"http://127.0.0.1:{port}"
    ) as server:
        yield server.url, shown


def llm_example(args: argparse.Namespace, work: Path) -> Example:
    """One client's rate (`llm load --concurrency 1`), then `llm load --rates TOP --find-peak` from twice it."""
    from infermeter.results.records import GenerationSummary, read_record

    with llama_server(args.llm_model) as (url, shown):
        doc_url = f"http://127.0.0.1:{DOC_PORTS['llm']}"
        request = ["--model-name", args.llm_model, "--prompt-len", str(args.prompt_len), "--gen-len",
                   str(args.gen_len), "--ignore-eos"]  # fmt: skip
        one = work / "llm-one-client.json"
        infermeter(["llm", "load", url, *request, "--concurrency", "1", "-o", one.name], shown, url, doc_url, work)
        summary = read_record(read_results(one).cases[0], GenerationSummary)
        if summary is None or not summary.requests_per_s:
            raise SystemExit("the one-client level had no successful request: no rate to search from")
        top = float(f"{2 * summary.requests_per_s:.2g}")
        out = work / "llm.json"
        slo = ["--slo", f"ttft_ms={args.ttft_ms:g}", "--slo", f"tpot_ms={args.tpot_ms:g}"]
        requests = ["--requests", str(args.requests)] if args.requests else []
        stdout = infermeter(
            ["llm", "load", url, *request, "--rates", f"{top:g}", "--find-peak", *slo, *requests, "-o", out.name],
            shown, url, doc_url, work,
        )  # fmt: skip
    return Example(tuple(shown), read_results(out), peak_line(stdout).replace(url, doc_url))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kserve-model", default="tiny_cnn")
    parser.add_argument("--kserve-backend", default="onnxruntime")
    parser.add_argument("--kserve-slo-ms", type=float, default=10.0, help="P99 bound and goodput latency bound")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per KServe probe")
    parser.add_argument("--llm-model", default="tiny-llama", help="a GGUF infermeter resolves")
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--gen-len", type=int, default=32)
    parser.add_argument("--ttft-ms", type=float, default=2000.0)
    parser.add_argument("--tpot-ms", type=float, default=200.0)
    parser.add_argument("--requests", type=int, help="requests per LLM rate level (default: 10 s worth, ≥ 16)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 s probes, 6 requests per LLM level")
    parser.add_argument("--write-docs", action="store_true", help="write the figures into --doc")
    parser.add_argument("--doc", type=Path, default=DOCS, help="the doc to write (default: docs/serving.md)")
    parser.add_argument("--machine-note", default="quiet machine", help="how busy the machine was (for the doc)")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.requests, args.gen_len, args.prompt_len = 1.0, 6, 8, 16
        args.machine_note = "smoke run (--quick) on a busy machine: the tables' shape, not figures"
    with tempfile.TemporaryDirectory(prefix="serving-examples-") as folder:
        kserve = kserve_example(args, Path(folder))
        llm = llm_example(args, Path(folder))
    text = render(kserve, llm, args)
    print(text)
    if args.write_docs:
        write_between_markers(args.doc, text)
        print(f"wrote {args.doc}")


def write_between_markers(doc: Path, text: str) -> None:
    """Replace what lies between the doc's markers with `text` (the rest of the doc is kept as written)."""
    head, start, rest = doc.read_text().partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{doc} has no {START} … {END} block to write into")
    doc.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def stamp(args: argparse.Namespace, results: ResultsFile) -> str:
    """The machine line: when, the CPU and its cores as the results file recorded them, and how busy it was."""
    env = results.environment
    cpus = env.get("cpu_affinity") or env.get("logical_cores") or "?"
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    return f"{when}, {env.get('cpu_model', 'unknown CPU')}, {cpus} CPUs usable; **{args.machine_note}**"


def kserve_rows(results: ResultsFile) -> list[list[str]]:
    """One row per probe of `load --find-peak`: the capacity run first, then each rate."""
    from infermeter.results.records import LoadRecord, read_record

    rows = []
    for case in results.cases:
        record = read_record(case, LoadRecord)
        if record is None:
            continue
        stats = case.latency_ms
        probe = (
            f"{record.target_qps:.0f} QPS"
            if record.scenario == "server"
            else f"capacity ({record.scenario} x{record.concurrency})"
        )
        rows.append([
            probe,
            f"{record.achieved_qps:.0f}",
            f"{stats.p50:.2f}" if stats else "-",
            f"{stats.p99:.2f}" if stats else "-",
            f"{record.goodput_qps:.0f}" if record.goodput_qps is not None else "-",
            f"{record.lag_p99_ms:.2f}" if record.lag_p99_ms is not None else "-",
            "VALID" if record.valid else "INVALID: " + "; ".join(record.reasons),
        ])  # fmt: skip
    return rows


def llm_rows(results: ResultsFile) -> list[list[str]]:
    """One row per probe of `llm load --find-peak`, as `infermeter report` writes a rate sweep."""
    from infermeter.llm.serving_verdict import verdicts
    from infermeter.report.serving import level_row

    return [level_row(point, verdict) for verdict in verdicts(results.cases) for point in verdict.points]


def render(kserve: Example, llm: Example, args: argparse.Namespace) -> str:
    """The block of docs/serving.md between its markers: the machine, then each example's commands and table."""
    from infermeter.report.markdown_table import markdown_table
    from infermeter.report.serving import SERVING_COLUMNS

    kserve_columns = ("probe", "achieved QPS", "P50 ms", "P99 ms", f"goodput QPS (≤ {args.kserve_slo_ms:g} ms)",
                      "lag P99 ms", "verdict")  # fmt: skip
    out = [f"Written by `python benchmarks/serving_examples.py{' --quick' if args.quick else ''}` on "
           f"{stamp(args, kserve.results)}.", "", "### KServe v2: `infermeter load`", "", "```sh",
           *kserve.commands, "```", "", markdown_table(kserve_columns, kserve_rows(kserve.results)), "",
           f"- {kserve.peak_line}", "", f"### OpenAI streaming: `infermeter llm load` ({args.llm_model})", "",
           "```sh", *llm.commands, "```", "", markdown_table(SERVING_COLUMNS, llm_rows(llm.results)), "",
           f"- {llm.peak_line}"]  # fmt: skip
    return "\n".join(out)


if __name__ == "__main__":
    main()
