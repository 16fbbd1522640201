"""A tiny model as a user's source file, and changed copies of it that `infermeter check` must fail: one slower,
one calling an operator the ONNX exporters cannot translate, one whose exported graph computes something else.
(Not in conftest.py: see cli_helpers.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

HEADER = """
import torch
from torch import nn
"""

BLOCK = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x):
        return torch.relu(self.fc(x))
"""

TINY = """
class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(Block(), Block())
        self.head = nn.Linear(32, 8)

    def forward(self, x):
        return self.head(self.body(x))


def build():
    torch.manual_seed(0)
    return Tiny().eval(), (torch.randn(2, 32),)
"""

# Ten wide matmul pairs after the body: tens of times the unchanged model's work, an unmistakable slowdown.
SLOWER_TINY = """
class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(Block(), Block())
        self.head = nn.Linear(32, 8)
        self.up = nn.Parameter(torch.randn(32, 4096) * 0.02)
        self.down = nn.Parameter(torch.randn(4096, 32) * 0.02)

    def forward(self, x):
        h = self.body(x)
        for _ in range(10):
            h = torch.tanh(h + torch.tanh(h @ self.up) @ self.down)
        return self.head(h)


def build():
    torch.manual_seed(0)
    return Tiny().eval(), (torch.randn(2, 32),)
"""

UNSUPPORTED_BLOCK = """
@torch.library.custom_op("infermeter_ci_test::wobble", mutates_args=())
def wobble(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


@wobble.register_fake
def _(x):
    return torch.empty_like(x)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x):
        return wobble(torch.relu(self.fc(x)))
"""

# An export-only path that computes something else: eager PyTorch and the exported graph disagree.
WRONG_BLOCK = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x):
        y = torch.relu(self.fc(x))
        if torch.compiler.is_exporting():
            return y * 1.5
        return y
"""

VARIANTS = {
    "unchanged": HEADER + BLOCK + TINY,
    "slower": HEADER + BLOCK + SLOWER_TINY,
    "unsupported": HEADER + UNSUPPORTED_BLOCK + TINY,
    "wrong": HEADER + WRONG_BLOCK + TINY,
}


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` (identity set, no user config) and return its stdout."""
    env_args = ["-c", "user.name=ci", "-c", "user.email=ci@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", *env_args, "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout


def model_repo(root: Path, variant: str = "unchanged", path: str = "model.py") -> Path:
    """A git repository in `root` whose HEAD holds the unchanged model at `path`; the working tree then holds
    `variant` of it (uncommitted, as in a pull request's checkout before the commit is compared)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "--quiet", "-b", "main")
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(VARIANTS["unchanged"])
    git(root, "add", path)
    git(root, "commit", "--quiet", "-m", "the model")
    target.write_text(VARIANTS[variant])
    return target


def worktrees(repo: Path) -> list[str]:
    """The worktrees git knows of in `repo` (the main one first)."""
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]
