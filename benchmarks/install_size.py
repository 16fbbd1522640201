"""Installed size and install time of each extra, in fresh venvs, from a warm pip cache.

    python benchmarks/install_size.py --write-docs

For each target (core, [onnxruntime], [openvino], [all-cpu]): a new venv (`python -m venv`, its pip upgraded,
neither timed), a `pip download` of the same requirement first so that pip's cache is warm (not timed), then the
timed `pip install` of the built wheel with the extra. For [all-cpu] the CPU build of torch is installed first, as
the Makefile does, and its time is part of the total. Measured: the wall time of the install, the disk usage of
site-packages (du: allocated blocks, MB = 10^6 bytes), the largest distributions, and every GPU-only wheel
(nvidia-*, cuda-*, triton, or a torch that is not the +cpu build). With --write-docs the table replaces the
section between the markers in docs/install.md. Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "install.md"
START, END = "<!-- install-size:start -->", "<!-- install-size:end -->"
TARGETS = ("core", "onnxruntime", "openvino", "all-cpu")
GPU_ONLY = re.compile(r"^(nvidia-|cuda-|triton$)")
TORCH_VERSION = re.search(r'"torch==([\w.]+)"', (ROOT / "pyproject.toml").read_text())


@dataclass(frozen=True)
class Measurement:
    """One target's install: seconds, site-packages MB, distribution count, the largest ones, GPU-only wheels."""

    target: str
    install_s: float
    size_mb: float
    distributions: int
    largest: list[tuple[str, float]]
    gpu_only: list[str]


def run(command: list[str]) -> None:
    """Run a command; stop with its output when it fails."""
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def build_wheel(folder: Path) -> Path:
    """The project's wheel, built the way a release is (`python -m build --wheel`)."""
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(folder), str(ROOT)])
    (wheel,) = folder.glob("infermeter-*.whl")
    return wheel


def disk_usage_mb(paths: list[Path]) -> float:
    """Allocated size of files (as du counts it: blocks, each hard link once), in MB."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for top in paths:
        walker = os.walk(top) if top.is_dir() else [(str(top.parent), [], [top.name])]
        for folder, _, files in walker:
            for name in files:
                stat = os.lstat(os.path.join(folder, name))
                if (stat.st_dev, stat.st_ino) not in seen:
                    seen.add((stat.st_dev, stat.st_ino))
                    total += stat.st_blocks * 512
    return total / 1e6


def distribution_sizes(site: Path) -> list[tuple[str, str, float]]:
    """(name, version, MB) of every distribution installed in `site`, from the files its RECORD lists."""
    sizes = []
    for dist in importlib.metadata.distributions(path=[str(site)]):
        files = [Path(str(f.locate())) for f in dist.files or []]
        sizes.append((dist.metadata["Name"].lower(), dist.version, disk_usage_mb([f for f in files if f.exists()])))
    return sizes


def measure(target: str, wheel: Path, scratch: Path) -> Measurement:
    """Install `target` into a fresh venv under `scratch` and measure it."""
    venv = scratch / f"venv-{target}"
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip"]
    run([*pip, "install", "--quiet", "--upgrade", "pip"])
    requirement = str(wheel) if target == "core" else f"{wheel}[{target}]"
    steps = [[requirement]]
    if target == "all-cpu":
        assert TORCH_VERSION, "no torch pin in pyproject.toml"
        steps.insert(0, [f"torch=={TORCH_VERSION.group(1)}"])
    for step in steps:  # warm the cache: whatever pip would fetch, fetched once before the timed install
        run([*pip, "download", "--quiet", "--dest", str(scratch / "warm"), *step])
    started = time.perf_counter()
    for step in steps:
        run([*pip, "install", "--quiet", *step])
    seconds = time.perf_counter() - started
    site = next((venv / "lib").glob("python3*/site-packages"))
    dists = sorted(distribution_sizes(site), key=lambda d: -d[2])
    gpu = [f"{n}=={v}" for n, v, _ in dists if GPU_ONLY.match(n) or (n == "torch" and not v.endswith("+cpu"))]
    size = disk_usage_mb([site])
    shutil.rmtree(venv, ignore_errors=True)
    return Measurement(target, seconds, size, len(dists), [(n, mb) for n, _, mb in dists[:3]], gpu)


def machine() -> str:
    """CPU model, logical CPUs, memory and Python of this machine, in one line."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.+)", cpuinfo)
    memory = (
        re.search(r"MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text())
        if Path("/proc/meminfo").exists()
        else None
    )
    parts = [model.group(1).strip() if model else platform.processor(), f"{os.cpu_count()} logical CPUs"]
    if memory:
        parts.append(f"{int(memory.group(1)) / 2**20:.0f} GiB memory")
    pip_version = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True).stdout
    return ", ".join([*parts, f"Python {platform.python_version()}", " ".join(pip_version.split()[:2])])


def table(results: list[Measurement]) -> str:
    """The markdown table of the measurements."""
    lines = [
        "| install | time (s) | site-packages (MB) | distributions | largest (MB) | GPU-only wheels |",
        "|---|---:|---:|---:|---|---|",
    ]
    for m in results:
        name = "core (`pip install infermeter`)" if m.target == "core" else f"`infermeter[{m.target}]`"
        if m.target == "all-cpu":
            name += " (CPU torch first)"
        largest = ", ".join(f"{n} {mb:.0f}" for n, mb in m.largest)
        gpu = ", ".join(m.gpu_only) or "none"
        lines.append(f"| {name} | {m.install_s:.1f} | {m.size_mb:.0f} | {m.distributions} | {largest} | {gpu} |")
    return "\n".join(lines)


def write_doc(body: str) -> None:
    """Replace the text between the markers in docs/install.md with `body`."""
    text = DOC.read_text()
    start, end = text.index(START) + len(START), text.index(END)
    DOC.write_text(text[:start] + "\n" + body + "\n" + text[end:])


def main() -> None:
    """Measure every target, print the table, optionally write it into docs/install.md."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated, from: " + ", ".join(TARGETS))
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="install-size-") as folder:
        scratch = Path(folder)
        wheel = build_wheel(scratch / "dist")
        for target in args.targets.split(","):
            results.append(measure(target, wheel, scratch))
            print(json.dumps(results[-1].__dict__), flush=True)
    body = table(results)
    print(body)
    if args.write_docs:
        command = "python benchmarks/install_size.py " + " ".join(sys.argv[1:])
        stamp = time.strftime("%Y-%m-%d")
        write_doc(f"`{command}`, {stamp}, on {machine()}.\n\n{body}")


if __name__ == "__main__":
    main()
