"""Does `infermeter check` decide *same* on an unchanged model within its default budget, on this machine? (issue 47)

    python benchmarks/check_unchanged.py                 # 5 runs of check on ResNet-18 against git:HEAD
    python benchmarks/check_unchanged.py --runs 2 --model tiny_cnn   # a smoke run

Each run: a fresh git repository holding one model file (`resnet18` of `benchmarks/gate_models.py`, or a zoo name),
committed, then `infermeter check FILE:model --baseline git:HEAD -b onnxruntime` with every gate setting at its
default (α 0.01, β 0.05, δ 5%, δ₀ 1%, at least 6 rounds, at most 60): the working tree's model is the commit's,
so any outcome other than *same* is the gate's error or its budget running out. The decision's record is read
from the JUnit file's `decision.*` properties. Writes docs/data/check-unchanged/summary.json. Nothing else should
run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "benchmarks" / "gate_models.py"
SUMMARY = ROOT / "docs" / "data" / "check-unchanged" / "summary.json"


def _repository(folder: Path, model: str) -> str:
    """A git repository whose one commit holds the model file; the MODEL argument of check."""
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    if model == "resnet18":
        shutil.copy(MODELS, folder / "model.py")
        source = "model.py:resnet18"
    else:  # a zoo model, wrapped so that check has a file to compare at HEAD
        (folder / "model.py").write_text(
            "from infermeter.models.zoo_torch import build\nimport torch\n\n\n"
            f"def model():\n    return build({model!r}, 0), (torch.zeros(1, 3, 32, 32),)\n"
        )
        source = "model.py:model"
    git = ["git", "-C", str(folder), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the model"], check=True)
    return source


def one_run(model: str, engine: str) -> dict[str, object]:
    """One check of the unchanged model: its decision's outcome, rounds and wall time."""
    with tempfile.TemporaryDirectory(prefix="check-unchanged-") as name:
        folder = Path(name)
        source = _repository(folder, model)
        junit = folder / "junit.xml"
        command = [sys.executable, "-m", "infermeter", "check", source, "--baseline", "git:HEAD", "-b", engine]
        command += ["--junit", str(junit)]
        started = time.monotonic()
        proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        properties = {p.get("name"): p.get("value") for p in ET.parse(junit).iter("property")} if junit.exists() else {}
    outcome = properties.get("decision.outcome")
    print(f"exit {proc.returncode}, {outcome}, {properties.get('decision.rounds_used')} rounds, {seconds:.0f} s: "
          f"{properties.get('decision.stopped_by')}", flush=True)  # fmt: skip
    if outcome is None:
        print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n")
    return {
        "exit": proc.returncode,
        "outcome": outcome,
        "direction": properties.get("decision.direction"),
        "rounds_used": int(properties.get("decision.rounds_used") or 0),
        "rounds_set_aside": int(properties.get("decision.rounds_set_aside") or 0),
        "ratio": properties.get("decision.ratio"),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    from infermeter.machine.environment import collect_environment

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="resnet18", help="resnet18 (gate_models.py) or a zoo name")
    parser.add_argument("--engine", default="onnxruntime")
    parser.add_argument("--summary", type=Path, default=SUMMARY)
    args = parser.parse_args()
    runs = [one_run(args.model, args.engine) for _ in range(args.runs)]
    summary = {
        "model": args.model,
        "engine": args.engine,
        "machine": f"{collect_environment().get('cpu_model')}, {os.cpu_count()} CPUs",
        "runs": len(runs),
        "same": sum(r["outcome"] == "same" for r in runs),
        "different": sum(r["outcome"] == "different" for r in runs),
        "unknown": sum(r["outcome"] == "unknown" for r in runs),
        "each": runs,
    }
    args.summary.parent.mkdir(parents=True, exist_ok=True)
    args.summary.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "each"}))
    print(f"summary: {args.summary}")


if __name__ == "__main__":
    main()
