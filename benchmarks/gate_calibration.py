"""How often does the regression gate cry wolf, and how often does it catch a real slowdown? On this machine.

    python benchmarks/gate_calibration.py --pairs 10 --write-docs          # resnet18, about an hour
    python benchmarks/gate_calibration.py --pairs 10 --repeat 3 --no-rerun --write-docs   # each bench --repeat 3
    python benchmarks/gate_calibration.py --quick [--repeat 3]             # a smoke run (tiny_cnn, one pair)
    python benchmarks/gate_calibration.py --sequential --pairs 20 --rounds 6   # issue 47: the sequential decision

`--sequential` runs `gate_sequential.py` instead (its docstring): 20 unchanged pairs and 20 each with a real 5% and
10% slowdown (more work in the graph, sized by measurement), judged by compare --rerun's sequential decision, into
docs/data/gate-calibration/summary.json.

Unchanged pairs: `bench MODEL -b onnxruntime,openvino --batch 1` twice, back to back, same command. Slowed pairs:
the same, then `bench SLOW_MODEL` (default: ResNet-18 with one more residual block, `benchmarks/gate_models.py`,
about 11% slower on both engines), optionally with `--option SLOW_OPTION` (then only that option's engine counts as
slowed; the other's case is an unchanged pair). Each pair is judged at --threshold (5%) by three gates:
- old: the raw-sample test `compare` used before (every timed iteration a replicate): two-sided Mann–Whitney U
  p < 0.01 and a slowdown of the P50 beyond the threshold (the old bootstrap interval excluded 1 whenever that
  p-value was that small at these sample counts, so it is left out here);
- files: today's `compare BASE NEW` (Welch's t on each file's round medians; with `--repeat N`, every bench runs
  each case in N fresh processes and `compare` judges the per-process medians instead);
- rerun: `compare BASE NEW --rerun` (both sides re-measured, interleaved, per-round ratios).
A false alarm is an unchanged case flagged as a regression; a detection is a slowed case flagged.
The slowdown's real size is the geometric mean of the rerun's interleaved ratios, per engine (`--no-rerun` skips
that gate, and the size is then not known). Nothing else should run on the machine meanwhile.

Target (issue 34): with `--repeat 3`, the files gate raises no false alarm in at least 9 of 10 unchanged pairs.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infermeter.compare.pairing import pair_cases
from infermeter.compare.rerun import load_side, rerun_comparison
from infermeter.compare.verdict import compare_results
from infermeter.core.case import MeasureSettings
from infermeter.results.io import read_results
from infermeter.results.schema import ResultsFile

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Regression gate"
GATES = ("old", "files", "rerun")
MODELS = Path(__file__).resolve().parent / "gate_models.py"
ENGINES = ("onnxruntime", "openvino")  # the engines every pair is measured on


@dataclass
class Tally:
    """Per gate: unchanged cases judged and flagged, pairs with any false alarm, slowed cases judged and caught."""

    unchanged_cases: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GATES, 0))
    false_alarms: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GATES, 0))
    alarmed_pairs: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GATES, 0))
    slowed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GATES, 0))
    detected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GATES, 0))
    slowdowns: dict[str, list[float]] = field(default_factory=dict)  # engine -> the rerun's ratio per slowed pair
    methods: set[str] = field(default_factory=set)  # what the files gate's compare rested on (its `method` line)


def bench(args: argparse.Namespace, out: Path, slow: bool) -> ResultsFile:
    """One `infermeter bench` run of the calibration's configuration."""
    model = args.slow_model if slow else args.model
    command = [sys.executable, "-m", "infermeter", "bench", model, "-b", ",".join(ENGINES), "--batch", "1"]
    command += ["--min-time", str(args.min_time), "--max-time", str(args.max_time), "--rounds", str(args.rounds)]
    command += ["--target-ci", str(args.target_ci), "--no-history", "--repeat", str(args.repeat), "-o", str(out)]
    if slow and args.slow_option:
        command += ["--option", args.slow_option]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return read_results(out)


def old_gate(base: ResultsFile, new: ResultsFile, threshold: float, alpha: float = 0.01) -> dict[str, bool]:
    """The raw-sample gate `compare` used before: backend -> flagged."""
    from scipy.stats import mannwhitneyu

    flagged = {}
    for b, n, _how in pair_cases(base.cases, new.cases)[0]:
        if not (b.ok and n.ok and b.timing.samples_ms and n.timing.samples_ms):
            continue
        p_value = float(mannwhitneyu(b.timing.samples_ms, n.timing.samples_ms, alternative="two-sided").pvalue)
        slowdown = float(np.median(n.timing.samples_ms) / np.median(b.timing.samples_ms))
        flagged[b.backend] = p_value < alpha and slowdown > 1.0 + threshold
    return flagged


def slowed_backends(args: argparse.Namespace) -> set[str]:
    """The engines the slowed side really slows: both for a slower model, else the one the option is for."""
    if args.slow_model != args.model:
        return set(ENGINES)
    return {args.slow_option.split(".", 1)[0]} if args.slow_option else set()


def judge_pair(args: argparse.Namespace, folder: Path, index: int, slow: bool, tally: Tally) -> None:
    """Run one pair, judge it with the three gates, add to the tally."""
    kind = "slow" if slow else "same"
    paths = (folder / f"{kind}{index}-base.json", folder / f"{kind}{index}-new.json")
    base, new = bench(args, paths[0], False), bench(args, paths[1], slow)
    files = compare_results(base, new, "p50", args.threshold)
    tally.methods.add(files.method)
    verdicts = {
        "old": old_gate(base, new, args.threshold),
        "files": {c.base.backend: c.regression for c in files.changes if c.ratio is not None},
    }
    rerun = None
    if not args.no_rerun:
        settings = MeasureSettings(
            min_time_s=args.min_time, max_time_s=args.max_time, rounds=args.rounds, target_ci=args.target_ci
        )
        rerun = rerun_comparison(load_side(paths[0], base), load_side(paths[1], new), settings, args.threshold)
        verdicts["rerun"] = {c.base.backend: c.regression for c in rerun.changes if c.ratio is not None}
    slowed = slowed_backends(args) if slow else set()
    for change in rerun.changes if rerun is not None else []:
        if change.base.backend in slowed and change.ratio is not None:
            tally.slowdowns.setdefault(change.base.backend, []).append(change.ratio)
    for gate, flags in verdicts.items():
        alarm = False
        for backend, flagged in flags.items():
            if backend in slowed:
                tally.slowed[gate] += 1
                tally.detected[gate] += flagged
            else:
                tally.unchanged_cases[gate] += 1
                tally.false_alarms[gate] += flagged
                alarm |= flagged
        tally.alarmed_pairs[gate] += alarm and not slow
    print(f"{'slowed' if slow else 'unchanged'} pair {index + 1}: {verdicts}", flush=True)


def table(tally: Tally, pairs: int, repeat: int, gates: tuple[str, ...]) -> str:
    """The markdown table of the gates run."""
    files = f"`compare`, files of `--repeat {repeat}` (process medians, Welch)" if repeat > 1 else None
    names = {
        "old": "old: raw samples (Mann–Whitney)",
        "files": files or "`compare` (round medians, Welch)",
        "rerun": "`compare --rerun` (interleaved, paired)",
    }
    lines = [
        "| gate | unchanged pairs with a false alarm | unchanged cases flagged | real slowdowns detected |",
        "|---|---:|---:|---:|",
    ]
    for gate in gates:
        lines.append(
            f"| {names[gate]} | {tally.alarmed_pairs[gate]}/{pairs} | "
            f"{tally.false_alarms[gate]}/{tally.unchanged_cases[gate]} | {tally.detected[gate]}/{tally.slowed[gate]} |"
        )
    return "\n".join(lines)


def slowdown_text(ratios: list[float]) -> str:
    """The geometric mean of a slowed engine's rerun ratios, with their range."""
    mean = math.exp(float(np.mean(np.log(ratios))))
    return f"{mean:.3f}x ({min(ratios):.3f}–{max(ratios):.3f})"


def target_line(tally: Tally, pairs: int) -> str:
    """Whether the files gate met issue 34's target: no false alarm in at least 9 of 10 unchanged pairs."""
    quiet = pairs - tally.alarmed_pairs["files"]
    verdict = "met" if quiet >= 0.9 * pairs else "missed"
    return f"files gate: {quiet}/{pairs} unchanged pairs without a false alarm (target ≥ 90%: {verdict})"


def write_docs(text: str, section: str = SECTION) -> None:
    """Put `text` (a whole section headed `section`) into docs/benchmarks.md in place of the old one."""
    doc = DOCS.read_text()
    start = doc.find(section + " ")  # "## Regression gate " is not "## Regression gate, files of --repeat 3 "
    if start == -1:
        doc = doc.rstrip() + "\n\n" + text
    else:
        end = doc.find("\n## ", start + 1)
        doc = doc[:start] + text + (doc[end + 1 :] if end != -1 else "")
    DOCS.write_text(doc)


QUICK = {  # --quick: a smoke run on the zoo's tiny CNN, one pair of each kind, short cases
    "model": "tiny_cnn",
    "slow_model": "tiny_cnn",
    "slow_option": "onnxruntime.opt_level=basic",
    "pairs": 1,
    "min_time": 0.5,
    "target_ci": 0.0,
    "max_time": 3.0,
}


def parse_args() -> argparse.Namespace:
    """The command line (with --quick's settings applied)."""
    from infermeter.core.validation import parse_threshold

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=f"{MODELS}:resnet18", help="default: the zoo's ResNet-18")
    parser.add_argument("--slow-model", default=f"{MODELS}:resnet18_extra_block", help="the slowed side's model")
    parser.add_argument("--pairs", type=int, default=10, help="unchanged pairs, and as many slowed pairs")
    parser.add_argument("--threshold", type=parse_threshold, default=0.05)
    parser.add_argument("--slow-option", default="", help="KEY=VALUE for the slowed side, e.g. onnxruntime.threads")
    parser.add_argument("--min-time", type=float, default=3.0, help="bench and rerun: timed seconds per case")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--max-time", type=float, default=60.0, help="bench and rerun: at most seconds per case")
    parser.add_argument("--target-ci", type=float, default=0.01, help="bench and rerun: P50/ratio known to ±this")
    parser.add_argument("--repeat", type=int, default=1, help="every bench runs each case in this many processes")
    parser.add_argument("--no-rerun", action="store_true", help="skip the compare --rerun gate (it ignores --repeat)")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: " + ", ".join(f"{k}={v}" for k, v in QUICK.items())
    )
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--sequential", action="store_true", help="issue 47's calibration (gate_sequential.py)")
    parser.add_argument("--alpha", type=float, default=0.01, help="--sequential: the decision's false-alarm rate")
    parser.add_argument("--beta", type=float, default=0.05, help="--sequential: its miss rate at --threshold")
    parser.add_argument("--budget-rounds", type=int, default=60, help="--sequential: at most this many rounds")
    parser.add_argument("--engine", default="onnxruntime", help="--sequential: the engine each pair runs on")
    parser.add_argument("--summary", help="--sequential: write the summary here (default docs/data/...)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    return args


def main() -> None:
    """Run the pairs, print the table, optionally write it into docs/benchmarks.md."""
    args = parse_args()
    if args.sequential:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import gate_sequential

        gate_sequential.main(args)
        return
    tally, started = Tally(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gate-") as folder:
        for slow in (False, True):
            for index in range(args.pairs):
                judge_pair(args, Path(folder), index, slow, tally)
    gates = tuple(g for g in GATES if not (g == "rerun" and args.no_rerun))
    result = table(tally, args.pairs, args.repeat, gates)
    sizes = "; ".join(f"{engine} {slowdown_text(ratios)}" for engine, ratios in sorted(tally.slowdowns.items()))
    sizes = sizes or "not measured (--no-rerun)"
    slowed = f"`{Path(args.slow_model).name}`" + (f" with `--option {args.slow_option}`" if args.slow_option else "")
    print(result)
    print(f"slowed side {slowed}, by the interleaved reruns: {sizes}")
    print(target_line(tally, args.pairs))
    print("; ".join(sorted(m for m in tally.methods if m)))
    if args.write_docs:
        command = "python benchmarks/gate_calibration.py " + " ".join(sys.argv[1:])
        section = SECTION if args.repeat == 1 else f"{SECTION}, files of --repeat {args.repeat}"
        write_docs(
            f"{section} — `{command}`\n\n{time.monotonic() - started:.0f} s on this machine; "
            f"`{Path(args.model).name}` batch 1 on ONNX Runtime and OpenVINO, threshold {args.threshold:.0%}, "
            f"{args.pairs} unchanged and {args.pairs} slowed pairs (the slowed side: {slowed}; its real size by the "
            f"interleaved reruns: {sizes}). Method in the script's docstring.\n\n{result}\n\n"
            f"{target_line(tally, args.pairs)}.\n",
            section,
        )


if __name__ == "__main__":
    main()
