"""A model's CI in one command (`infermeter check`, the pytest plugin): export to ONNX with its dynamic axes, parity
on the engines the team deploys to, and a latency gate against a baseline measured in the same interleaved rounds.

`config` (settings and the `[tool.infermeter.check]` table), `baseline` (`git:REV` worktrees), `steps` (each check,
calling the command that owns it), `run` (the whole check) and `summary` (markdown and JUnit XML).
"""

from infermeter.modelci.config import CheckConfig
from infermeter.modelci.run import CheckReport, run_check

__all__ = ["CheckConfig", "CheckReport", "run_check"]
