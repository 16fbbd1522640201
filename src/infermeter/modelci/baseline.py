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
from pathlib import Path

from infermeter.errors import ModelError, UsageError
from infermeter.interrupts import deferred_interrupts

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


@contextmanager
def git_baseline(model: str, revision: str) -> Iterator[str]:
    """The model reference of `model` at git `revision`, valid inside the block (a temporary worktree)."""
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
            raise ModelError(f"--baseline {GIT_PREFIX}{revision}: {relative} does not exist at {commit[:12]}")
        yield f"{target}{suffix}"
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
def baseline_ref(model: str, baseline: str) -> Iterator[str]:
    """The baseline as a model reference usable inside the block: `git:REV` checked out, anything else as given."""
    if baseline.startswith(GIT_PREFIX):
        revision = baseline.removeprefix(GIT_PREFIX).strip()
        if not revision:
            raise UsageError("--baseline git:REV needs a revision, e.g. git:HEAD or git:origin/main")
        with git_baseline(model, revision) as ref:
            yield ref
    else:
        yield baseline
