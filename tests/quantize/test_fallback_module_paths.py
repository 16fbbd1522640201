"""torch's FP32 fallback keeps any module path: a parent whose own forward computes between its children is a
candidate of the search and runs in FP32 when kept; a path the model lacks is refused by name."""

from __future__ import annotations

import pytest

from infermeter.core.errors import BackendError

torch = pytest.importorskip("torch")


class Block(torch.nn.Module):
    """A block with a child and functional arithmetic of its own (the Gram matrix of the child's output)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: object) -> object:
        h = self.fc(x)
        return torch.matmul(h, h.transpose(0, 1))


def _net() -> object:
    return torch.nn.Sequential(Block(), torch.nn.ReLU()).eval()


def test_search_candidates_include_computing_parents_not_containers() -> None:
    from infermeter.quantize.fallback.torch_autocast import fallback_modules

    names = [layer.name for layer in fallback_modules(_net())]
    assert names == ["0", "0.fc", "1"]  # the block itself, its child and the ReLU; the root Sequential is not one


def test_a_kept_parent_runs_its_own_arithmetic_in_fp32_under_autocast() -> None:
    from infermeter.backends.torch_eager import exclude_from_autocast

    net, x = _net(), torch.ones(2, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert net[0](x).dtype == torch.bfloat16
        restore = exclude_from_autocast(net, {"0"})
        assert net[0](x).dtype == torch.float32  # the block's matmul, not only a leaf, ran in fp32
    for sub, forward in restore:
        sub.forward = forward
    with pytest.raises(BackendError, match=r"no module 'encoder\.layer'"):
        exclude_from_autocast(net, {"encoder.layer"})
