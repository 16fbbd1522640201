"""The baseline of `infermeter check`: a model reference as it is, or `git:REV`, the model's own source at a git
revision, checked out into a temporary worktree (`git worktree add`) that is removed afterwards, on an error or a
Ctrl-C too.

`git:REV` maps the model reference into the worktree: `path/file.py:factory` and a Hugging Face folder keep their
path inside the repository; `package.module:factory` becomes the module's file at that revision
(`WORKTREE/path/module.py:factory`), so the baseline never imports the working tree's package of the same name.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from infermeter.core.errors import UsageError
from infermeter.core.interrupts import deferred_interrupts

GIT_PREFIX = "git:"


def _git(folder: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise UsageError("--baseline git:REV needs git, which is not on PATH") from None
    if done.returncode != 0:
        raise UsageError(f"git {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def model_source(model: str) -> tuple[Path, str]:
    """(the file or folder that defines `model`, the suffix that follows the path in its reference: `:factory`
    or empty). UsageError for a model that has no source file (a zoo name)."""
    from infermeter.models.sources import parse_python_ref

    path = Path(model)
    if path.is_dir() or path.is_file():
        return path.resolve(), ""
    parsed = parse_python_ref(model)
    if parsed is None:
        raise UsageError(f"--baseline git:REV: {model!r} has no source file in a repository to take the revision of")
    kind, target, factory = parsed
    if kind == "file":
        return Path(target).resolve(), f":{factory}"
    found = importlib.util.find_spec(target)
    if found is None or not found.origin:
        raise UsageError(f"--baseline git:REV: cannot find the file of module {target!r} (is it on PYTHONPATH?)")
    return Path(found.origin).resolve(), f":{factory}"


@dataclass(frozen=True)
class Baseline:
    """The baseline as a model reference (None when the model does not exist at the revision) and what it is."""

    ref: str | None
    description: str


@contextmanager
def git_baseline(model: str, revision: str) -> Iterator[Baseline]:
    """The baseline of `model` at git `revision`, valid inside the block (a temporary worktree)."""
    source, suffix = model_source(model)
    folder = source if source.is_dir() else source.parent
    root = Path(_git(folder, "rev-parse", "--show-toplevel"))
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except UsageError:
        raise UsageError(f"--baseline {GIT_PREFIX}{revision}: no such revision in {root}") from None
    relative = source.relative_to(root.resolve())
    holder = Path(tempfile.mkdtemp(prefix="infermeter-baseline-"))
    tree = holder / "tree"
    try:
        with deferred_interrupts():  # a Ctrl-C here would leave a registered worktree behind
            _git(root, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        target = tree / relative
        if not target.exists():
            # A pull request that adds the model: nothing to compare with, which is not an error.
            yield Baseline(None, f"{relative} does not exist at {revision} ({commit[:12]}): a new model")
        else:
            yield Baseline(f"{target}{suffix}", f"{revision} ({commit[:12]})")
    finally:
        with deferred_interrupts():
            if tree.exists():
                subprocess.run(
                    ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                    timeout=300,
                )
            shutil.rmtree(holder, ignore_errors=True)
            subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True, timeout=300)


@contextmanager
def baseline_ref(model: str, baseline: str) -> Iterator[Baseline]:
    """The baseline usable inside the block: `git:REV` checked out, anything else as given."""
    if baseline.startswith(GIT_PREFIX):
        revision = baseline.removeprefix(GIT_PREFIX).strip()
        if not revision:
            raise UsageError("--baseline git:REV needs a revision, e.g. git:HEAD or git:origin/main")
        with git_baseline(model, revision) as found:
            yield found
    else:
        yield Baseline(baseline, baseline)
