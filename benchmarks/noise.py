"""Do comparisons hold on a noisy machine? Repeatability, interference detection and the default run, in one go.

    python benchmarks/noise.py --repeats 5 --doc docs/benchmarks.md

For each repeat, four runs of `infermeter bench MODEL -b onnxruntime,openvino --batch 1` with its defaults, back
to back: idle interleaved, idle sequential (--no-interleave), then the same two while a background process burns
one core (a Python busy loop, started before and stopped after the run). The order of the two modes flips every
other repeat. Then `make run`'s command once, on the idle machine.

Reported:
- repeatability: the spread (max/min - 1) of the openvino-over-onnxruntime speedup over the idle runs, per mode;
- interference: the share of the burner's cases flagged `interference`, and how many idle cases were flagged;
- robustness: each burner run's interleaved speedup against the idle median (within 5%, or refused as invalid);
- the default run: wall time, warnings printed, each case's P50 interval half-width.
Nothing else may run on the machine meanwhile: this script is itself the interference it measures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = [sys.executable, "-m", "infermeter", "bench"]


@dataclass(frozen=True)
class Run:
    """One bench run: its mode, whether the burner ran, the speedup (None when refused), flags per case."""

    mode: str
    burner: bool
    speedup: float | None
    flagged: list[bool]
    moved: float | None
    wall_s: float


def _speedup(cases: list[dict]) -> float | None:
    base, other = cases
    if any(w["code"] == "interference" for c in cases for w in c["warnings"]):
        return None  # the table refuses it: the run is marked invalid
    if other["timing"]["paired"]:
        return float(other["timing"]["paired"]["ratio"])
    return float(base["latency_ms"]["p50"] / other["latency_ms"]["p50"])


def bench_once(model: str, mode: str, burner: bool, out: Path) -> Run:
    """One run of bench, with the one-core burner around it when asked."""
    command = [*BENCH, model, "-b", "onnxruntime,openvino", "--batch", "1", "--no-history", "-o", str(out)]
    if mode == "sequential":
        command.append("--no-interleave")
    burn = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if burner else None
    try:
        time.sleep(0.5 if burn else 0.0)  # let the burner reach the CPU before the first case loads
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, text=True)
        wall_s = time.perf_counter() - start
    finally:
        if burn is not None:
            burn.kill()
            burn.wait()
    data = json.loads(out.read_text())
    cases = [c for c in data["cases"] if c["status"] == "ok"]
    flagged = [any(w["code"] == "interference" for w in c["warnings"]) for c in cases]
    moved = data.get("machine_speed", {}).get("moved")
    return Run(mode, burner, _speedup(cases) if len(cases) == 2 else None, flagged, moved, wall_s)


def _spread(values: list[float]) -> float:
    return max(values) / min(values) - 1 if values else float("nan")


def default_run(work: Path) -> list[str]:
    """`make run`'s command once: wall time, warnings printed, each case's P50 interval half-width."""
    out = work / "default.json"
    start = time.perf_counter()
    proc = subprocess.run([*BENCH, "--max-time", "5", "--no-history", "-o", str(out)], capture_output=True, text=True)
    wall_s = time.perf_counter() - start
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning")]
    lines = [f"- `infermeter bench --max-time 5` (make run): exit {proc.returncode}, wall {wall_s:.0f} s, "
             f"{len(warnings)} warning line(s){': ' + '; '.join(warnings) if warnings else ''}"]  # fmt: skip
    for case in json.loads(out.read_text())["cases"]:
        if case["status"] != "ok":
            lines.append(f"  - {case['backend']} b{case['batch']}: {case['status']}")
            continue
        stats = case["latency_ms"]
        low, high = stats["p50_ci95"]
        half = max(stats["p50"] - low, high - stats["p50"]) / stats["p50"]
        lines.append(
            f"  - {case['backend']} b{case['batch']}: P50 {stats['p50']:.3f} ms ±{half:.2%}, "
            f"{case['timing']['iterations']} samples, {len(case['timing']['rounds_p50_ms'])} rounds"
        )
    return lines


def report(runs: list[Run], model: str, repeats: int) -> list[str]:
    """The findings as markdown lines."""
    lines = [f"Model {model}, `-b onnxruntime,openvino --batch 1`, defaults otherwise; {repeats} repeats.", ""]
    lines += ["| mode | burner | speedups (openvino / onnxruntime) | spread | flagged cases | speed moved |"]
    lines += ["|---|---|---|---:|---:|---|"]
    idle: dict[str, float] = {}
    for mode in ("interleaved", "sequential"):
        for burner in (False, True):
            mine = [r for r in runs if r.mode == mode and r.burner == burner]
            if not mine:
                continue
            values = [r.speedup for r in mine if r.speedup is not None]
            shown = ", ".join("invalid" if r.speedup is None else f"{r.speedup:.3f}" for r in mine)
            flagged = sum(sum(r.flagged) for r in mine)
            total = sum(len(r.flagged) for r in mine)
            moved = ", ".join("—" if r.moved is None else f"{r.moved:.0%}" for r in mine)
            lines.append(
                f"| {mode} | {'one core' if burner else 'idle'} | {shown} | {_spread(values):.1%} | "
                f"{flagged}/{total} | {moved} |"
            )
            if not burner and values:
                idle[mode] = statistics.median(values)
    if not any(r.burner for r in runs):
        return lines
    burned = [r for r in runs if r.burner and r.mode == "interleaved"]
    held = sum(1 for r in burned if r.speedup is None or abs(r.speedup / idle["interleaved"] - 1) <= 0.05)
    flagged_burn = sum(sum(r.flagged) for r in runs if r.burner)
    total_burn = sum(len(r.flagged) for r in runs if r.burner)
    flagged_idle = sum(sum(r.flagged) for r in runs if not r.burner)
    total_idle = sum(len(r.flagged) for r in runs if not r.burner)
    lines += [
        "",
        f"- Interference flagged in {flagged_burn}/{total_burn} cases with the burner "
        f"({flagged_burn / max(total_burn, 1):.0%}); {flagged_idle}/{total_idle} idle cases flagged.",
        f"- Interleaved runs with the burner whose speedup stayed within 5% of the idle median "
        f"({idle.get('interleaved', float('nan')):.3f}) or was refused as invalid: {held}/{len(burned)}.",
    ]
    return lines


def write_doc(doc: Path, title: str, body: list[str]) -> None:
    """Replace (or append) the section `title` of `doc`."""
    text = doc.read_text() if doc.exists() else ""
    section = f"## {title}\n\n" + "\n".join(body) + "\n"
    start = text.find(f"## {title}")
    if start < 0:
        doc.write_text(text.rstrip("\n") + "\n\n" + section)
        return
    end = text.find("\n## ", start + 1)
    doc.write_text(text[:start] + section + (text[end + 1 :] if end >= 0 else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-default-run", action="store_true", help="skip make run's command")
    parser.add_argument("--idle-only", action="store_true", help="skip the runs with the burner (quick recheck)")
    parser.add_argument("--doc", type=Path, help="write the findings into this markdown file's Noise section")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="noise-"))
    runs: list[Run] = []
    started = time.strftime("%Y-%m-%d %H:%M")
    for repeat in range(args.repeats):
        modes = ("interleaved", "sequential") if repeat % 2 == 0 else ("sequential", "interleaved")
        for burner in (False,) if args.idle_only else (False, True):
            for mode in modes:
                run = bench_once(args.model, mode, burner, work / f"{repeat}-{mode}-{burner}.json")
                runs.append(run)
                speed = "invalid" if run.speedup is None else f"{run.speedup:.3f}"
                print(f"repeat {repeat + 1} {mode:11} burner={burner!s:5} speedup {speed} flagged {run.flagged} "
                      f"wall {run.wall_s:.0f} s", flush=True)  # fmt: skip
    lines = report(runs, args.model, args.repeats)
    if not args.no_default_run:
        lines += ["", *default_run(work)]
    print("\n".join(lines))
    if args.doc:
        title = "Noise — `python benchmarks/noise.py --repeats 5`"
        write_doc(args.doc, title, [f"Run {started} on this workplace's 2-vCPU VM.", "", *lines])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
