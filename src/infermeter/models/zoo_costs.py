"""Size and cost of the zoo models: parameter count and FLOPs, measured on the built torch module and cached.

FLOPs are counted by `torch.utils.flop_counter.FlopCounterMode` over one forward pass at batch 1 (and the default
sequence length for text models): it counts matrix multiplies and convolutions at 2 FLOPs per multiply-add and
ignores element-wise ops, which is the usual convention for quoting model cost. Building the models takes seconds
(minilm imports transformers), so the figures are cached by model content hash and torch version.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib.metadata import version

from infermeter.core.extras import install_line, missing_modules
from infermeter.core.files import write_text_atomically
from infermeter.models.convert import cache_root
from infermeter.models.zoo import ZOO

FLOP_METHOD = "torch FlopCounterMode, batch 1, matmul/conv only, 2 FLOPs per multiply-add"


@dataclass(frozen=True)
class ModelCost:
    """Parameters and FLOPs of one zoo model at `shapes` (batch 1); `error` when it could not be built here."""

    name: str
    parameters: int | None
    flops: int | None
    shapes: dict[str, list[int]]
    method: str = FLOP_METHOD
    error: str | None = None


def measure_cost(name: str) -> ModelCost:
    """Build zoo model `name` and count its parameters and the FLOPs of one batch-1 forward pass."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from infermeter.models import zoo_torch

    entry = ZOO[name]
    from infermeter.models.inputs import resolve_shapes

    shapes = resolve_shapes(entry.inputs, 1)
    module = zoo_torch.build(name, entry.seed)
    feeds = entry.make_feeds(shapes, 1, 0)[0]
    args = tuple(torch.from_numpy(feeds[i.name]) for i in entry.inputs)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        module(*args)
    return ModelCost(
        name,
        sum(p.numel() for p in module.parameters()),
        int(counter.get_total_flops()),
        {k: list(v) for k, v in shapes.items()},
    )


def model_costs(names: list[str] | None = None) -> list[ModelCost]:
    """Costs of the zoo models (all by default), from the cache when it holds them for this model and torch."""
    path = cache_root() / "model-costs.json"
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    names = names or list(ZOO)
    if missing_modules(["torch"]):
        # Every zoo model is built in PyTorch to be counted; without it the listing still shows the rest.
        reason = f"counting needs torch: {install_line('torch')}"
        return [ModelCost(name, None, None, {}, error=reason) for name in names]
    torch_version = version("torch")
    results: list[ModelCost] = []
    changed = False
    for name in names:
        key = f"{name}:{ZOO[name].content_hash}:torch{torch_version}"
        if key in cached:
            results.append(ModelCost(**cached[key]))
            continue
        try:
            cost = measure_cost(name)
        except Exception as exc:  # a missing optional package (transformers, the minilm weights) or a build error
            results.append(ModelCost(name, None, None, {}, error=f"{type(exc).__name__}: {exc}"))
            continue
        cached[key] = asdict(cost)
        changed = True
        results.append(cost)
    if changed:
        write_text_atomically(path, json.dumps(cached, indent=1))
    return results
