"""torch.compile backend: compiled in load (compile_s), agrees with eager, Inductor cache hit on a second load."""

from __future__ import annotations

import numpy as np
import pytest
from backend_helpers import feeds_for, torch_reference

from infermeter.backends.torch_compile import TorchCompileBackend
from infermeter.errors import UsageError

pytest.importorskip("torch")


def test_bad_mode_is_a_usage_error(tiny_cnn, make_case):
    with pytest.raises(UsageError, match=r"torch-compile\.mode"):
        TorchCompileBackend().load(tiny_cnn, make_case("torch-compile", options={"torch-compile.mode": "fastest"}))


@pytest.mark.slow
def test_compiles_in_load_matches_torch_and_hits_cache(tiny_cnn, make_case):
    if TorchCompileBackend.available():
        pytest.skip(TorchCompileBackend.available() or "")
    case = make_case("torch-compile")
    feeds = feeds_for(tiny_cnn, case)
    first = TorchCompileBackend().load(tiny_cnn, case)
    assert first.load_phases_s["compile_s"] > 0
    assert first.effective_precision() == "fp32"
    output = first.outputs_to_numpy(first.run(first.prepare(feeds)))[0]
    np.testing.assert_allclose(output, torch_reference(tiny_cnn, case, feeds)[0], rtol=1e-4, atol=1e-5)
    first.close()
    # A fresh torch.compile of a fresh module: Dynamo traces again, Inductor's FX-graph cache serves the code.
    second = TorchCompileBackend().load(tiny_cnn, case)
    assert second.cache_hit is True, second.notes
    second.close()
