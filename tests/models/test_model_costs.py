"""Parameter and FLOP counts of zoo models (checked by hand on tiny_cnn), their cache, and `infermeter models`."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import run_cli
from infermeter.models.zoo_costs import measure_cost, model_costs


def test_tiny_cnn_cost_by_hand() -> None:
    cost = measure_cost("tiny_cnn")
    # conv 3->16 3x3 (+bias), BN 16, conv 16->32 3x3 (+bias), BN 32, linear 32->10 (+bias)
    assert cost.parameters == (3 * 9 * 16 + 16) + 2 * 16 + (16 * 9 * 32 + 32) + 2 * 32 + (32 * 10 + 10)
    # 2 FLOPs per multiply-add: conv1 at 32x32, conv2 at 16x16 (after the 2x2 max-pool), the linear head.
    macs = 16 * 32 * 32 * 27 + 32 * 16 * 16 * 144 + 32 * 10
    assert cost.flops == 2 * macs
    assert cost.shapes == {"input": [1, 3, 32, 32]}


def test_costs_are_cached(cache_dir: Path) -> None:
    first = model_costs(["tiny_cnn", "bert_tiny"])
    cached = json.loads((cache_dir / "model-costs.json").read_text())
    assert any(key.startswith("bert_tiny:") for key in cached)
    assert model_costs(["tiny_cnn", "bert_tiny"]) == first
    bert = first[1]
    assert bert.shapes == {"input_ids": [1, 128], "attention_mask": [1, 128]}
    assert bert.parameters is not None and 4e6 < bert.parameters < 5e6  # the 30522x128 embedding dominates


def test_models_command_lists_the_zoo() -> None:
    done = run_cli("models", "--json", "--no-cost")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert {"mobilenet_v2", "resnet18", "tiny_cnn", "bert_tiny", "minilm"} <= set(rows)
    assert rows["minilm"]["inputs"][0] == "input_ids int64[batch, seq]"
    assert rows["bert_tiny"]["default_dims"] == {"seq": 128}
