"""optimize's step 4b through the real CLI: a BF16 case that misses the budget gets its FP32-fallback variant."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import load_json, run_cli

FACTORY = """
import torch
from torch import nn

class Centre(nn.Module):
    def forward(self, x):
        return x - 1000.0

def build():
    generator = torch.Generator().manual_seed(0)
    fc1, fc2 = nn.Linear(16, 32), nn.Linear(32, 4)
    with torch.no_grad():
        for layer in (fc1, fc2):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) * 0.25)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=generator) * 0.1)
        fc1.bias.add_(1000.0)  # BF16 rounds the small values away before `centre` subtracts the offset
    model = nn.Sequential()
    model.add_module("fc1", fc1)
    model.add_module("centre", Centre())
    model.add_module("fc2", fc2)
    return model, {"x": ("float32", ("batch", 16))}
"""
# Short measurements; no finalists' group (this test is about one step; tests/optimize/test_optimize_cli.py runs it).
QUICK = ["--iterations", "10", "--min-time", "0.05", "--warmup", "1", "--max-time", "1", "--rounds", "2",
         "--threads", "1", "--target-ci", "0", "--finalists", "0"]  # fmt: skip


@pytest.mark.slow
def test_bf16_missing_the_budget_gets_its_fp32_fallback_candidate(tmp_path: Path) -> None:
    from infermeter.backends._common import cpu_precision_reason

    if cpu_precision_reason("bf16", "torch"):
        pytest.skip("this CPU has no bf16 arithmetic: optimize skips bf16")
    factory = tmp_path / "offset.py"
    factory.write_text(FACTORY)
    out = tmp_path / "opt"
    # --no-prune: on a model this small BF16 is slower than FP32, so its repair could not win and would be skipped
    proc = run_cli("optimize", f"{factory}:build", "-b", "torch", "--max-accuracy-drop", "1", "--no-prune",
                   "-o", str(out), *QUICK, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "FP32-fallback variant with 1 layer(s) in FP32 (fc1)" in proc.stdout + proc.stderr
    results = load_json(out / "results.json")
    options = [dict(c.get("options") or {}) for c in results["cases"]]
    fallback = [c for c, o in zip(results["cases"], options, strict=True) if o.get("torch.autocast") == "on"]
    fallback = [c for c in fallback if "optimize.round" not in c["options"]]  # not its finalist's copy
    assert len(fallback) == 1 and fallback[0]["status"] == "ok"
    assert fallback[0]["accuracy"]["drop_pct"] <= 1.0
