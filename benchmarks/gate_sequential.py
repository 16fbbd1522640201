"""The sequential decision's calibration (issue 47), run by `gate_calibration.py --sequential`: false alarms on
unchanged pairs, detections of real 5% and 10% slowdowns, undecided pairs, and the rounds it took against what a
fixed-horizon test needs at the same α and β. On this machine; nothing else should run meanwhile.

The slowdowns are more work in the graph, never a sleep: ResNet-18 with `count` extra 1x1 convolutions
(`gate_models.resnet18_extra_convs`), `count` sized by measurement: the base and an 8-convolution model timed
interleaved in this process with ONNX Runtime, the cost of one convolution read off their ratio, and `count` chosen
for each target. Each pair: `bench` of the base and of the new model (short: they only supply the cases), then
`compare --rerun`'s decision (`compare_rerun.rerun_comparison` with `DecisionParams`), on one engine.
Writes docs/data/gate-calibration/summary.json.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from infermeter.compare.decision import DecisionParams, fixed_horizon_rounds
from infermeter.compare.rerun import load_side, rerun_comparison
from infermeter.core.case import MeasureSettings
from infermeter.results.io import read_results

MODELS = Path(__file__).resolve().parent / "gate_models.py"
SUMMARY = Path(__file__).resolve().parents[1] / "docs" / "data" / "gate-calibration" / "summary.json"
PROBE_CONVS = 8


def _model_file(folder: Path, count: int) -> str:
    """A model source with `count` extra convolutions (a file:factory the CLI resolves)."""
    path = folder / f"slowed_{count}.py"
    path.write_text(
        "import importlib.util\n"
        f"_spec = importlib.util.spec_from_file_location('gate_models', {str(MODELS)!r})\n"
        "_m = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_m)\n\n\n"
        f"def model():\n    return _m.resnet18_extra_convs({count})\n"
    )
    return f"{path}:model"


def _onnx_session(factory: object, folder: Path, name: str) -> object:
    import onnxruntime as ort
    import torch

    model, example = factory()  # type: ignore[operator]
    path = folder / f"{name}.onnx"
    torch.onnx.export(model, example, str(path), dynamo=False)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]), example[0].numpy()


def size_convs(folder: Path, targets: tuple[float, ...], rounds: int = 20) -> dict[float, int]:
    """Extra convolutions for each target slowdown, from the measured cost of PROBE_CONVS of them."""
    sys.path.insert(0, str(MODELS.parent))
    import gate_models

    base, feed = _onnx_session(gate_models.resnet18, folder, "probe_base")
    probe, _ = _onnx_session(lambda: gate_models.resnet18_extra_convs(PROBE_CONVS), folder, "probe_slow")
    ratios = []
    for _ in range(rounds):  # interleaved: the machine's drift hits both
        times = []
        for session in (base, probe):
            samples = []
            for _ in range(5):
                start = time.perf_counter()
                session.run(None, {session.get_inputs()[0].name: feed})  # type: ignore[attr-defined]
                samples.append(time.perf_counter() - start)
            times.append(float(np.median(samples)))
        ratios.append(times[1] / times[0])
    per_conv = max(float(np.median(ratios)) - 1.0, 1e-4) / PROBE_CONVS
    return {target: max(1, round(target / per_conv)) for target in targets}


def bench(model: str, out: Path, args: argparse.Namespace) -> None:
    """A short `bench` of `model` on the engine: it only supplies the case that the rerun measures again."""
    command = [sys.executable, "-m", "infermeter", "bench", model, "-b", args.engine, "--batch", "1"]
    command += ["--min-time", "0.2", "--rounds", "2", "--target-ci", "0", "--no-history", "-o", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def judge(
    base_model: str, new_model: str, folder: Path, name: str, args: argparse.Namespace
) -> tuple[str, int, float | None, float | None]:
    """(verdict, rounds run, the counted rounds' log-ratio sd, their ratio new/base) of one pair by compare --rerun's
    decision."""
    paths = folder / f"{name}-base.json", folder / f"{name}-new.json"
    bench(base_model, paths[0], args)
    bench(new_model, paths[1], args)
    settings = MeasureSettings(min_time_s=args.min_time, max_time_s=args.max_time, rounds=args.rounds, target_ci=0.0)
    params = DecisionParams(args.alpha, args.beta, args.threshold, None, args.rounds, args.budget_rounds)
    sides = [load_side(path, read_results(path)) for path in paths]
    comparison = rerun_comparison(sides[0], sides[1], settings, args.threshold, args.alpha, decision=params)
    (change,) = comparison.changes
    decision = change.decision
    if decision is None:
        return "not measured", 0, None, None
    print(f"{name}: {decision.summary()}", flush=True)
    return change.verdict, decision.rounds_used + decision.rounds_set_aside, decision.log_ratio_sd, decision.ratio


def tally(
    verdicts: dict[str, list[str]],
    rounds: list[int],
    ratios: dict[str, list[float]],
    spreads: list[float],
    counts: dict[float, int],
    args: argparse.Namespace,
) -> dict[str, object]:
    """The summary of the pairs judged so far."""
    sd = math.sqrt(float(np.mean(np.square(spreads)))) if spreads else math.nan  # pooled over the unchanged pairs
    params = DecisionParams(args.alpha, args.beta, args.threshold, None, args.rounds, args.budget_rounds)
    return {
        "null_pairs": len(verdicts["null"]),
        "false_alarms": sum(v in ("slower", "faster") for v in verdicts["null"]),
        "pairs_5": len(verdicts["5"]),
        "detected_5": verdicts["5"].count("slower"),
        "pairs_10": len(verdicts["10"]),
        "detected_10": verdicts["10"].count("slower"),
        "unknown": sum(v.count("unknown") for v in verdicts.values()),
        "median_rounds": float(np.median(rounds)) if rounds else None,
        "fixed_horizon_rounds": fixed_horizon_rounds(params, sd) if math.isfinite(sd) and sd > 0 else None,
        "log_ratio_sd": sd,
        "alpha": args.alpha,
        "beta": args.beta,
        "threshold": args.threshold,
        "extra_convs": {"5": counts[0.05], "10": counts[0.10]},
        "measured_ratio": {kind: math.exp(float(np.mean(np.log(values)))) for kind, values in ratios.items()},
        "engine": args.engine,
    }


def run(args: argparse.Namespace, out: Path) -> dict[str, object]:
    """Every pair, the kinds taking turns (so a run cut short still has some of each); the summary, written to
    `out` after every pair (marked `partial` until the last)."""
    verdicts: dict[str, list[str]] = {"null": [], "5": [], "10": []}
    rounds: list[int] = []
    ratios: dict[str, list[float]] = {}  # kind -> each pair's measured new/base (is a "5%" pair really 5%?)
    spreads: list[float] = []  # the unchanged pairs' per-round log-ratio sd (counted rounds only)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gate-seq-") as name:
        folder = Path(name)
        counts = size_convs(folder, (0.05, 0.10))
        print(f"extra convolutions by measurement: 5% -> {counts[0.05]}, 10% -> {counts[0.10]}", flush=True)
        base = f"{MODELS}:resnet18"
        models = {"null": base, "5": _model_file(folder, counts[0.05]), "10": _model_file(folder, counts[0.10])}
        for index in range(args.pairs):
            for kind, model in models.items():
                verdict, used, sd_pair, ratio = judge(base, model, folder, f"{kind}{index}", args)
                verdicts[kind].append(verdict)
                if ratio is not None:
                    ratios.setdefault(kind, []).append(ratio)
                rounds.append(used)
                if kind == "null" and sd_pair is not None:
                    spreads.append(sd_pair)
                partial = tally(verdicts, rounds, ratios, spreads, counts, args)
                partial.update(partial=True, seconds=round(time.monotonic() - started))
                out.write_text(json.dumps(partial, indent=2) + "\n")
    return tally(verdicts, rounds, ratios, spreads, counts, args)


def main(args: argparse.Namespace) -> None:
    """Run, print and write the summary."""
    started = time.monotonic()
    out = Path(args.summary) if args.summary else SUMMARY
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = run(args, out)
    summary["seconds"] = round(time.monotonic() - started)
    text = json.dumps(summary, indent=2)
    print(text)
    out.write_text(text + "\n")
    print(f"summary: {out}")
    if args.write_docs:
        write_docs(summary, args)


def write_docs(summary: dict[str, object], args: argparse.Namespace) -> None:
    """The calibration table into docs/benchmarks.md (its own section), with the command that made it."""
    from gate_calibration import write_docs as replace_section

    section = "## Regression gate, sequential decision"
    command = "python benchmarks/gate_calibration.py " + " ".join(sys.argv[1:])
    s = summary
    rows = [
        "| pairs | decided slower | target |",
        "|---|---:|---|",
        f"| unchanged | {s['false_alarms']}/{s['null_pairs']} (false alarms, either direction) | ≤ 1 of 20 |",
        f"| real 5% slowdown | {s['detected_5']}/{s['pairs_5']} | ≥ 15 of 20 |",
        f"| real 10% slowdown | {s['detected_10']}/{s['pairs_10']} | ≥ 19 of 20 |",
    ]
    text = (
        f"{section} — `{command}`\n\n{s['seconds']} s on this machine; ResNet-18 batch 1 on {s['engine']}, "
        f"α {s['alpha']}, β {s['beta']}, δ {float(str(s['threshold'])):.0%}; slowed sides: {s['extra_convs']} extra "
        f"1x1 convolutions (sized by measurement). Undecided (unknown): {s['unknown']}. Median rounds to a decision "
        f"{s['median_rounds']}, against {s['fixed_horizon_rounds']} for a fixed-horizon test at the same α and β "
        f"(per-round log-ratio sd {float(str(s['log_ratio_sd'])):.3f}). Data: docs/data/gate-calibration/summary.json."
        "\n\n" + "\n".join(rows) + "\n"
    )
    replace_section(text, section)
