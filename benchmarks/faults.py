"""Fault injection at random points: does any fault lose, duplicate or corrupt a finished case, leave a worker
behind, or make `--resume` run anything but the original plan?

Each trial starts a sweep (null backend, or onnxruntime with null in the same comparison groups, so rounds are
interleaved), injects one fault at a random point, then resumes with a bare `--resume` and checks the invariants
(tests/fault_harness.py). Faults: SIGINT once, twice, three times; SIGTERM; SIGKILL of the parent; SIGKILL of a
worker; a worker that hangs (killed by --case-timeout, Ctrl-C meanwhile); the output folder made read-only; the
file size capped (disk full); the file cut in half by hand, then `--resume` (must be refused, file untouched).

    python benchmarks/faults.py --trials 200 --write-docs
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fault_harness import FAULTS, Outcome, SweepSpec, run_trial

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SWEEPS = {
    "null": SweepSpec(batches=(1, 2, 3)),
    "null-interleaved": SweepSpec(batches=(1, 2), precisions=("fp32", "fp16")),
    "onnxruntime": SweepSpec(backends=("onnxruntime", "null"), batches=(1, 2), options=("null.wait=sleep",)),
}
COLUMNS = ("lost", "duplicates", "invalid", "leftover", "wrong_resume")


def _table(outcomes: list[Outcome]) -> str:
    rows: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        rows[(outcome.fault, outcome.backend)].append(outcome)
    head = (
        "| fault | sweep | trials | lost cases | duplicates | invalid files | leftover processes | wrong resumptions |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (fault, backend), group in sorted(rows.items()):
        sums = [sum(getattr(o, c) for o in group) for c in COLUMNS]
        lines.append(f"| {fault} | {backend} | {len(group)} | " + " | ".join(map(str, sums)) + " |")
    totals = [sum(getattr(o, c) for o in outcomes) for c in COLUMNS]
    lines.append(f"| **all** | | **{len(outcomes)}** | " + " | ".join(f"**{t}**" for t in totals) + " |")
    return "\n".join(lines)


def _write_docs(table: str, command: str, seconds: float) -> None:
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    section = (
        f"## Faults\n\n`{command}` ({seconds / 60:.0f} min on this machine). Each trial injects one fault at a "
        "random point of a sweep, then runs a bare `bench --resume` and checks: the file is valid JSON, every case "
        "finished before the fault is there exactly once, the resumed file holds exactly the original plan's "
        "cases (ids computed apart from the stored plan) with the original command, and no process the sweep "
        "started is alive 6 s after it ended. `corrupt`: the file cut in half, then `--resume` must exit 2 with "
        "one `error:` line and leave it byte for byte. Harness: `tests/fault_harness.py`.\n\n" + table + "\n"
    )
    start = text.find("## Faults\n")
    if start == -1:
        text = text.rstrip() + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1 :] if end != -1 else "")
    DOCS.write_text(text)


def main() -> None:
    """Run the trials, print the table, optionally write it into docs/benchmarks.md."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ort-share", type=float, default=0.25, help="fraction of trials on onnxruntime")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    outcomes: list[Outcome] = []
    started = time.monotonic()
    for trial in range(args.trials):
        fault = FAULTS[trial % len(FAULTS)]  # every class equally often, each at a random point
        sweep = (
            "onnxruntime"
            if rng.random() < args.ort_share and fault != "hang"
            else rng.choice(["null", "null-interleaved"])
        )
        point_s, min_done = rng.uniform(0.0, 1.5), rng.randint(0, 2)
        with tempfile.TemporaryDirectory(prefix="faults-") as folder:
            outcome = run_trial(Path(folder), fault, point_s, SWEEPS[sweep], min_done)
        outcome.backend = sweep
        outcomes.append(outcome)
        mark = "ok" if outcome.ok else f"FAIL {outcome}"
        print(
            f"{trial + 1}/{args.trials} {fault} {sweep} at {point_s:.2f}s after {min_done} case(s): {mark}", flush=True
        )
    table = _table(outcomes)
    print(table)
    if args.write_docs:
        command = "python benchmarks/faults.py " + " ".join(sys.argv[1:])
        _write_docs(table, command, time.monotonic() - started)


if __name__ == "__main__":
    main()
