"""The seeds' framework comparison on this machine, through the real CLI, written to docs/frameworks.md.

mobilenet_v2 and resnet18 (and minilm at sequence length 128 when the zoo has it), batch 1 and 16, fp32, every
available CPU backend that can run the model; P50/P99/throughput/peak memory/load time per case. Then a
cross-check of infermeter's OpenVINO figure against OpenVINO's own `benchmark_app` on the same ONNX file, shapes,
precision hint (f32), threads and latency hint, interleaved pairs of runs, reported as the ratio of medians.

    python benchmarks/frameworks.py            # full settings (take final figures on a quiet machine)
    python benchmarks/frameworks.py --small    # a quick run that proves the pipeline works
    python benchmarks/frameworks.py --cross-check-only   # only the benchmark_app cross-check section
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infermeter.backends.registry import backend_names, get_backend
from infermeter.core.case import Case
from infermeter.machine.environment import collect_environment
from infermeter.measure.plan import seq_overrides
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import generate_feeds, resolve_shapes
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec
from infermeter.models.zoo import ZOO
from infermeter.results.env import default_threads
from infermeter.results.io import read_results
from infermeter.results.schema import CaseResult

ROOT = Path(__file__).resolve().parent.parent
SEQ_LEN = 128
BATCHES = (1, 16)
RATIO_TOLERANCE = 0.05


def models() -> list[str]:
    """The seeds' models; minilm joins automatically once the zoo has it."""
    return ["mobilenet_v2", "resnet18"] + (["minilm"] if "minilm" in ZOO else [])


def input_flags(spec: ModelSpec) -> list[str]:
    """`--input NAME:1xS` flags fixing text models' `seq` dimension to SEQ_LEN (the batch axis follows --batch)."""
    overrides = seq_overrides(spec, 1, SEQ_LEN)
    return [f for name, dims in overrides for f in ("--input", f"{name}:{'x'.join(map(str, dims))}")]


def cpu_backends(spec: ModelSpec, threads: int) -> list[str]:
    """Every available, non-synthetic CPU backend that can run `spec` in fp32."""
    chosen = []
    for name in backend_names():
        cls = get_backend(name)
        if cls.synthetic or cls.device != "cpu" or cls.available() is not None:
            continue
        if (
            cls.unsupported_reason(
                spec, Case(spec.ref, name, precision="fp32", batch=1, shape_mode="static", threads=threads)
            )
            is None
        ):
            chosen.append(name)
    return chosen


def run_bench(command: list[str]) -> None:
    print("$", shlex.join(command), flush=True)
    completed = subprocess.run(command, text=True, capture_output=True)
    print(completed.stdout[-4000:], completed.stderr[-2000:], sep="\n", flush=True)
    if completed.returncode != 0:
        raise SystemExit(f"infermeter bench failed with exit code {completed.returncode}")


OV_PRECISIONS = {"float32": "f32", "float16": "f16", "int64": "i64", "int32": "i32", "uint8": "u8", "bool": "boolean"}
# The compiled-model properties both tools print or record; the cross-check shows them side by side.
COMPARED_PROPERTIES = ("PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT")


@dataclass
class Run:
    """One timed run of one tool: its median latency and the compiled-model properties it reported."""

    median_ms: float
    properties: dict[str, str]


def benchmark_app_run(spec: ModelSpec, onnx: Path, batch: int, threads: int, seconds: float) -> Run:
    """OpenVINO's own benchmark_app on `onnx`: sync API, latency hint, f32 inference precision, `threads`.

    benchmark_app refuses -nthreads next to -hint (a UI rule of the tool), so the thread count, hint and precision
    go in through -load_config, which sets the same CPU properties infermeter sets. It is fed infermeter's own
    first input set (.npy files) with each input's own element type (-iop): left alone, it fills every input with
    uniform random values in [0, 255] -- token ids and masks out of any real range -- and feeds a 4-D input as u8
    images through an added conversion, which is not the model or the data infermeter runs."""
    shapes = resolve_shapes(spec.inputs, batch, seq_overrides(spec, batch, SEQ_LEN))
    feeds = generate_feeds(spec.inputs, shapes, 1)[0]
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "config.json"
        cpu = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": str(threads), "INFERENCE_PRECISION_HINT": "f32"}
        config.write_text(json.dumps({"CPU": cpu}))
        for name, array in feeds.items():
            np.save(Path(folder) / f"{name}.npy", array)
        data = ",".join(f"{name}:{Path(folder) / name}.npy" for name in feeds)
        shape = ",".join(f"{name}[{','.join(map(str, dims))}]" for name, dims in shapes.items())
        types = ",".join(f"{i.name}:{OV_PRECISIONS.get(i.dtype, 'f32')}" for i in spec.inputs)
        command = [
            str(Path(sys.executable).with_name("benchmark_app")),
            *("-m", str(onnx), "-d", "CPU", "-shape", shape, "-hint", "latency", "-iop", types, "-i", data),
            *("-load_config", str(config), "-api", "sync", "-t", f"{seconds:g}"),
        ]
        out = subprocess.run(command, text=True, capture_output=True, check=True).stdout
    match = re.search(r"Median:\s+([\d.]+)\s*ms", out)
    if not match:
        raise SystemExit(f"could not find the median latency in benchmark_app's output:\n{out[-2000:]}")
    properties = dict(re.findall(r"\]\s+(" + "|".join(COMPARED_PROPERTIES) + r"): (.+)", out))
    # "<Type: 'float32'>" -> "float32": the element type, as infermeter's read-back names it.
    cleaned = {k: re.sub(r"<Type: '(\w+)'>", r"\1", v.strip()) for k, v in properties.items()}
    return Run(float(match.group(1)), cleaned)


def infermeter_run(name: str, spec: ModelSpec, batch: int, threads: int, seconds: float, output: Path) -> Run:
    """infermeter's openvino case for the same model, batch and threads, timed for `seconds`."""
    command = [sys.executable, "-m", "infermeter", "bench", name, "-b", "openvino", "--batch", str(batch)]
    command += ["--precision", "fp32", "--threads", str(threads), *input_flags(spec), "--no-roofline"]
    command += ["--warmup", "10", "--iterations", "10", "--min-time", f"{seconds:g}", "--max-time", f"{seconds:g}"]
    subprocess.run([*command, "-o", str(output)], text=True, capture_output=True, check=True)
    case = read_results(output).cases[0]
    if case.latency_ms is None:
        raise SystemExit(f"infermeter's openvino case failed: {case.error}")
    # The backend's read-back note: "...; PERFORMANCE_HINT LATENCY; NUM_STREAMS 1; INFERENCE_NUM_THREADS 2; ..."
    note = next((n for n in case.notes if n.startswith("openvino:")), "")
    properties = dict(re.findall(r"(" + "|".join(COMPARED_PROPERTIES[:3]) + r") (\S+?)(?:;|$)", note))
    read_back = re.search(r"read back (\S+?);", note)
    if read_back:
        properties["INFERENCE_PRECISION_HINT"] = read_back.group(1)
    return Run(case.latency_ms.p50, properties)


def ratio_ci95(numerators: list[float], denominators: list[float]) -> tuple[float, float, float]:
    """Geometric mean of paired ratios and its 95% confidence interval (t-interval on the log ratios). Each pair
    ran back to back, so both of its runs saw the same machine."""
    from scipy import stats

    logs = np.log(np.asarray(numerators) / np.asarray(denominators))
    centre = float(np.exp(logs.mean()))
    if len(logs) < 2 or float(logs.std()) == 0.0:
        return centre, centre, centre
    low, high = stats.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    return centre, float(np.exp(low)), float(np.exp(high))


def verdict(low: float, high: float) -> str:
    """yes: the whole interval lies within 5% of 1; no: none of it does (a real difference); otherwise the
    machine's noise is too large for this many pairs to tell."""
    if low >= 1 - RATIO_TOLERANCE and high <= 1 + RATIO_TOLERANCE:
        return "yes"
    if high < 1 - RATIO_TOLERANCE or low > 1 + RATIO_TOLERANCE:
        return "**no**"
    return "undecided (interval wider than ±5%)"


@dataclass
class CrossCheck:
    """Interleaved runs on one model and batch: infermeter, benchmark_app, and a plain Python loop over the
    OpenVINO API (benchmarks/openvino_plain_loop.py) that tells harness from API differences."""

    model: str
    batch: int
    ours: list[Run]
    theirs: list[Run]
    plain_ms: list[float]

    def against_benchmark_app(self) -> tuple[float, float, float]:
        return ratio_ci95([r.median_ms for r in self.ours], [r.median_ms for r in self.theirs])

    def against_plain_loop(self) -> tuple[float, float, float]:
        return ratio_ci95([r.median_ms for r in self.ours], self.plain_ms)


def plain_loop_ms(name: str, batch: int, threads: int, seconds: float) -> float:
    """The median of benchmarks/openvino_plain_loop.py, in a fresh process like the other two arms."""
    script = Path(__file__).with_name("openvino_plain_loop.py")
    command = [sys.executable, str(script), name, str(batch), str(threads), f"{seconds:g}", "--seq-len", str(SEQ_LEN)]
    return float(subprocess.run(command, text=True, capture_output=True, check=True).stdout.strip())


def cross_check(name: str, batch: int, threads: int, rounds: int, seconds: float, scratch: Path) -> CrossCheck:
    """`rounds` back-to-back runs of each arm, the order reversed every other round (ABC CBA ...) so that a
    machine drifting slower or faster through the check favours no arm."""
    spec = resolve_model(name)
    onnx = onnx_for(spec).path
    check = CrossCheck(name, batch, [], [], [])
    arms = ["infermeter", "benchmark_app", "plain"]
    for index in range(rounds):
        for arm in arms if index % 2 == 0 else arms[::-1]:
            if arm == "infermeter":
                check.ours.append(infermeter_run(name, spec, batch, threads, seconds, scratch / "ov.json"))
            elif arm == "benchmark_app":
                check.theirs.append(benchmark_app_run(spec, onnx, batch, threads, seconds))
            else:
                check.plain_ms.append(plain_loop_ms(name, batch, threads, seconds))
        print(
            f"  {name} b{batch} round {index + 1}: infermeter {check.ours[-1].median_ms:.3f} ms, "
            f"benchmark_app {check.theirs[-1].median_ms:.3f} ms, plain loop {check.plain_ms[-1]:.3f} ms",
            flush=True,
        )
    return check


def cross_check_lines(checks: list[CrossCheck], pairs: int, seconds: float) -> list[str]:
    """The cross-check section of docs/frameworks.md."""
    lines = [
        "## OpenVINO cross-check against `benchmark_app`",
        "",
        f"Run {datetime.date.today().isoformat()} by `python benchmarks/frameworks.py` (`--cross-check-only` reruns",
        "only this section).",
        "",
        "Same ONNX file, shapes, input data (infermeter's first input set, as .npy files) and element types,",
        "INFERENCE_PRECISION_HINT f32, threads and LATENCY hint, sync API (benchmark_app reuses its one input set;",
        "infermeter rotates its sets). A third arm, a plain Python loop over the OpenVINO API with no infermeter",
        "measurement code (`benchmarks/openvino_plain_loop.py`), tells a harness difference from a difference",
        f"between OpenVINO's Python API and its C++ tool. {pairs} rounds of {seconds:g}-second runs per row, back to",
        "back, the order reversed every other round: on a machine whose speed moves (docs/benchmarks.md, machine",
        "stability), runs minutes apart are not comparable, runs seconds apart are. Ratios: the geometric mean of",
        "each round's ratio (infermeter P50 / the other arm's median), with its 95% confidence interval; within 5%",
        "means the whole interval is.",
        "",
        "| model | batch | infermeter P50 ms | benchmark_app median ms | plain loop median ms "
        "| infermeter / benchmark_app [95% CI] | within 5% | infermeter / plain loop [95% CI] |",
        "|---|---:|---|---|---|---|---|---|",
    ]
    for check in checks:
        ours = ", ".join(f"{r.median_ms:.2f}" for r in check.ours)
        theirs = ", ".join(f"{r.median_ms:.2f}" for r in check.theirs)
        plain = ", ".join(f"{ms:.2f}" for ms in check.plain_ms)
        centre, low, high = check.against_benchmark_app()
        plain_centre, plain_low, plain_high = check.against_plain_loop()
        lines.append(
            f"| {check.model} | {check.batch} | {ours} | {theirs} | {plain} "
            f"| {centre:.3f} [{low:.3f}, {high:.3f}] | {verdict(low, high)} "
            f"| {plain_centre:.3f} [{plain_low:.3f}, {plain_high:.3f}] |"
        )
    lines += ["", "Compiled-model properties as each tool read them back (first run of each row):", ""]
    lines += ["| model | batch | property | infermeter | benchmark_app |", "|---|---:|---|---|---|"]
    for check in checks:
        for key in COMPARED_PROPERTIES:
            ours_value = check.ours[0].properties.get(key, "—")
            theirs_value = check.theirs[0].properties.get(key, "—")
            lines.append(f"| {check.model} | {check.batch} | {key} | {ours_value} | {theirs_value} |")
    return [*lines, ""]


def row(case: CaseResult) -> str:
    if case.status != "ok" or case.latency_ms is None:
        return f"| {case.model} | {case.backend} | {case.batch} | {case.status}: {case.error} | | | | | |"
    stats = case.latency_ms
    return (
        f"| {case.model} | {case.backend} | {case.batch} | {case.precision_effective} | {stats.p50:.3f} | "
        f"{stats.p99:.3f} | {case.timing.throughput or 0:.1f} | {case.memory.peak_rss_mb or 0:.0f} | "
        f"{case.loading.load_s or 0:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="few iterations: proves the pipeline, not the figures")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: physical cores)")
    parser.add_argument("--models", default="", help="comma-separated subset of the models")
    parser.add_argument("--skip-backends", default="", help="comma-separated backends to leave out")
    parser.add_argument("--pairs", type=int, default=6, help="interleaved rounds (one run of each arm) per row")
    parser.add_argument("--pair-seconds", type=float, default=4.0, help="timed seconds of each cross-check run")
    parser.add_argument(
        "--cross-check-only",
        action="store_true",
        help="run only the benchmark_app cross-check and rewrite that section of --doc, keeping the table",
    )
    parser.add_argument("--results-dir", type=Path, default=ROOT / "results")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "frameworks.md")
    args = parser.parse_args()
    threads = args.threads or default_threads()
    timing = ["--warmup", "3", "--iterations", "20", "--min-time", "0.5"] if args.small else []
    timing += ["--warmup", "10", "--iterations", "200", "--min-time", "5"] if not args.small else []
    skipped = {b for b in args.skip_backends.split(",") if b}
    chosen_models = [m for m in models() if not args.models or m in args.models.split(",")]
    args.results_dir.mkdir(parents=True, exist_ok=True)

    commands: list[str] = []
    cases: list[CaseResult] = []
    for name in [] if args.cross_check_only else chosen_models:
        spec = resolve_model(name)
        backends = [b for b in cpu_backends(spec, threads) if b not in skipped]
        output = args.results_dir / f"frameworks-{name}.json"
        command = [sys.executable, "-m", "infermeter", "bench", name, "-b", ",".join(backends)]
        command += ["--batch", ",".join(map(str, BATCHES)), "--precision", "fp32", "--threads", str(threads)]
        command += [*input_flags(spec), *timing, "-o", str(output)]
        run_bench(command)
        commands.append(shlex.join(["infermeter", *command[3:]]))
        cases += read_results(output).cases

    checks = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in chosen_models:
            if "openvino" in skipped or "openvino" not in cpu_backends(resolve_model(name), threads):
                continue
            for batch in BATCHES:
                checks.append(cross_check(name, batch, threads, args.pairs, args.pair_seconds, Path(scratch)))
    cross_section = cross_check_lines(checks, args.pairs, args.pair_seconds)
    if args.cross_check_only:
        text = args.doc.read_text() if args.doc.exists() else ""
        kept = text[: text.index("## OpenVINO cross-check")] if "## OpenVINO cross-check" in text else text
        kept = kept + "\n" if kept and not kept.endswith("\n\n") else kept
        args.doc.write_text(kept + "\n".join(cross_section))
        print("\n".join(cross_section))
        print(f"rewrote the cross-check section of {args.doc}")
        return

    env = collect_environment()
    machine = (
        f"{env['cpu_model']}, {env['physical_cores']} physical / {env['logical_cores']} logical cores, "
        f"ISA {' '.join(env['isa'])}, {env['memory_total_gb']} GB, {env['os']}, Python {env['python']}"
    )
    frameworks = ", ".join(f"{k} {v}" for k, v in sorted(env["frameworks"].items()))
    lines = [
        "# Framework comparison (CPU, fp32)",
        "",
        f"Machine: {machine}.  ",
        f"Frameworks: {frameworks}.  ",
        f"Threads: {threads}. Settings: {'SMALL (smoke run: figures are not final)' if args.small else 'full'}.",
        "",
        "Generated by `python benchmarks/frameworks.py" + (" --small" if args.small else "") + "`, which ran:",
        "",
        *[f"    {c}" for c in commands],
        "",
        "| model | backend | batch | effective precision | P50 ms | P99 ms | throughput/s | peak MB | load s |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
        *[row(c) for c in cases],
        "",
        *cross_section,
    ]
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
