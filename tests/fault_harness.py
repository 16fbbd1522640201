"""Fault injection for `infermeter bench`: start a sweep, inject one fault at a chosen point, then check the
invariants (valid JSON, every case finished before the fault present exactly once, a bare `--resume` completes
exactly the original plan, no worker process left behind). Used by tests/test_faults.py and
benchmarks/faults.py; the expected case ids are computed here from `Case`, not from the plan stored in the file."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from infermeter.core.case import Case

FAULTS = (
    "sigint",
    "sigint2",
    "sigint3",
    "sigterm",
    "sigkill",
    "kill_worker",
    "hang",
    "readonly",
    "disk_full",
    "corrupt",
)
# Faults after which the run itself goes on to the end (the fault hits a worker or is absorbed).
FAST = ["--warmup", "0", "--iterations", "5", "--min-time", "0.2", "--max-time", "2", "--target-ci", "0"]
QUIET = ["--threads", "1", "--no-roofline", "--no-history"]


@dataclass(frozen=True)
class SweepSpec:
    """The sweep a trial runs: one model on `backends` (interleaved in rounds when 2+), batches × precisions."""

    backends: tuple[str, ...] = ("null",)
    batches: tuple[int, ...] = (1, 2, 3)
    precisions: tuple[str, ...] = ("fp32",)
    options: tuple[str, ...] = ("null.wait=sleep",)
    extra: tuple[str, ...] = ()

    def args(self) -> list[str]:
        """The bench command line (without the output file)."""
        opts = [w for o in self.options for w in ("-O", o)]
        matrix = ["-b", ",".join(self.backends), "--batch", ",".join(map(str, self.batches))]
        return ["bench", "tiny_cnn", *matrix, "--precision", ",".join(self.precisions), *FAST, *QUIET, *opts]

    def expected_ids(self) -> list[str]:
        """The plan's case ids in run order (model, batch, precision, then backend), from Case alone."""
        options = tuple(sorted(tuple(o.split("=", 1)) for o in self.options))
        return [
            Case(
                "tiny_cnn",
                b,
                precision=p,
                batch=batch,
                shape_mode="static",
                threads=1,
                input_shapes=(),
                options=options,
            ).id  # type: ignore[arg-type]
            for batch in self.batches
            for p in self.precisions
            for b in self.backends
        ]


@dataclass
class Outcome:
    """What one injected fault broke (all zero when every invariant held)."""

    fault: str
    backend: str
    lost: int = 0
    duplicates: int = 0
    invalid: int = 0
    leftover: int = 0
    wrong_resume: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every invariant held."""
        return not (self.lost or self.duplicates or self.invalid or self.leftover or self.wrong_resume)


def _cli(args: list[str], **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "infermeter", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )


def _case_ids(path: Path) -> list[str] | None:
    """The case ids in the file, or None when it is absent or not valid JSON."""
    try:
        return [c["id"] for c in json.loads(path.read_text())["cases"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _descendants(proc: subprocess.Popen[str], seen: dict[int, psutil.Process]) -> None:
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(proc.pid).children(recursive=True):
            seen.setdefault(child.pid, child)


def _leftovers(seen: dict[int, psutil.Process], grace_s: float = 6.0) -> int:
    """Descendants still running `grace_s` after the parent ended (killed here, so that trials stay apart).
    A parked worker exits once its pipe closes; one in a burst after the burst."""
    deadline = time.monotonic() + grace_s
    alive = list(seen.values())
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _running(p)]
        time.sleep(0.1)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return len(alive)


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` read-only for the block (root ignores permission bits: the immutable attribute instead)."""
    root = os.geteuid() == 0
    if root:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
    try:
        yield
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        else:
            folder.chmod(0o755)


def _wait(
    proc: subprocess.Popen[str], out: Path, seen: dict[int, psutil.Process], until: Callable[[], bool]
) -> list[str]:
    """Poll until `until()` or the run ends; the case ids in the file at that moment."""
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and not until():
        _descendants(proc, seen)
        time.sleep(0.02)
    return _case_ids(out) or []


def _inject(fault: str, proc: subprocess.Popen[str], out: Path, seen: dict[int, psutil.Process]) -> None:
    """Deliver `fault` to the running sweep (file-system faults are set up before it starts)."""
    if fault.startswith("sigint"):
        for press in range({"sigint": 1, "sigint2": 2, "sigint3": 3}[fault]):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.05 if press < 2 else 0)
    elif fault == "hang":  # Ctrl-C while a worker hangs: the parent must still stop it
        proc.send_signal(signal.SIGINT)
    elif fault == "sigterm":
        proc.send_signal(signal.SIGTERM)
    elif fault in ("sigkill", "corrupt"):
        proc.send_signal(signal.SIGKILL)
    elif fault == "kill_worker":  # the next worker alive (between two cases there may be none for a moment)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            _descendants(proc, seen)
            workers = [p for p in seen.values() if _running(p) and "spawn_main" in " ".join(_cmdline(p))]
            if workers:
                with contextlib.suppress(psutil.Error):
                    workers[-1].kill()
                return
            time.sleep(0.02)


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def run_trial(folder: Path, fault: str, point_s: float, sweep: SweepSpec, min_done: int = 0) -> Outcome:
    """One fault, `point_s` seconds after `min_done` cases are in the file; then a bare `--resume`."""
    out = folder / "r.json"
    outcome = Outcome(fault, ",".join(sweep.backends))
    spec = sweep
    if fault == "hang":  # every case hangs mid-run and is killed by --case-timeout; the sweep goes on
        spec = SweepSpec(sweep.backends, sweep.batches[:2], ("fp32",), (*sweep.options, "null.hang=run"))
        spec = SweepSpec(spec.backends, spec.batches, spec.precisions, spec.options, ("--case-timeout", "1"))
    args = [*spec.args(), *spec.extra, "-o", str(out)]
    seen: dict[int, psutil.Process] = {}
    limit = None
    if fault == "disk_full":  # files may grow to a random size: a later write fails (EFBIG, like ENOSPC)
        limit = 12000 + int(point_s * 20000)
    with contextlib.ExitStack() as stack:
        proc = _cli(args, preexec_fn=_fsize_limit(limit)) if limit else _cli(args)
        # The point is counted from the first write (the plan, before any case), so that there is a file.
        before = _wait(proc, out, seen, lambda: out.exists() and len(_case_ids(out) or []) >= min_done)
        time.sleep(point_s)
        _descendants(proc, seen)
        before = _case_ids(out) or before
        if fault == "readonly":
            stack.enter_context(read_only(folder))
        _inject(fault, proc, out, seen)
        _wait(proc, out, seen, lambda: False)
        proc.communicate(timeout=120)
    outcome.leftover += _leftovers(seen)
    return _check_and_resume(outcome, out, before, spec, args)


def _fsize_limit(limit: int | None) -> Callable[[], None] | None:
    if limit is None:
        return None

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _check_and_resume(outcome: Outcome, out: Path, before: list[str], spec: SweepSpec, args: list[str]) -> Outcome:
    after = _case_ids(out)
    if after is None and out.exists():
        outcome.invalid += 1
        outcome.notes.append("not valid JSON after the fault")
        return outcome
    after = after or []
    outcome.lost += sum(1 for i in before if i not in after)
    outcome.duplicates += sum(n - 1 for n in Counter(after).values())
    if fault_corrupts(outcome.fault) and out.exists():
        return _check_corrupt_refused(outcome, out)
    seen: dict[int, psutil.Process] = {}
    proc = _cli(["bench", "--resume", str(out), "--no-history", "--no-roofline"])
    _wait(proc, out, seen, lambda: False)
    _, stderr = proc.communicate(timeout=300)
    outcome.leftover += _leftovers(seen)
    final = _case_ids(out)
    if final is None:
        outcome.invalid += 1
        return outcome
    outcome.lost += sum(1 for i in after if i not in final)
    outcome.duplicates += sum(n - 1 for n in Counter(final).values())
    data = json.loads(out.read_text())
    if proc.returncode != 0 or Counter(final) != Counter(spec.expected_ids()) or data["command"][1:] != args:
        outcome.wrong_resume += 1
        outcome.notes.append(f"resume rc {proc.returncode}: {stderr.strip()[-300:]}")
    return outcome


def fault_corrupts(fault: str) -> bool:
    """Faults after which the file is broken by hand before `--resume`."""
    return fault == "corrupt"


def _check_corrupt_refused(outcome: Outcome, out: Path) -> Outcome:
    """A file cut short (a hand edit gone wrong): `--resume` must refuse it in one line and leave it untouched."""
    text = out.read_text()
    out.write_text(text[: max(1, len(text) // 2)])
    broken = out.read_bytes()
    proc = _cli(["bench", "--resume", str(out), "--no-history"])
    _, stderr = proc.communicate(timeout=120)
    lines = [line for line in stderr.splitlines() if line.strip()]
    refused = proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:")
    if not refused or out.read_bytes() != broken:
        outcome.wrong_resume += 1
        outcome.notes.append(f"corrupt file: rc {proc.returncode}, {stderr.strip()[-300:]}")
    return outcome
