"""torch.compile backend: compiled in load (compile_s), agrees with eager, Inductor cache hit on a second load."""

from __future__ import annotations

import numpy as np
import pytest

from backend_helpers import feeds_for, torch_reference
from cli_helpers import load_json, run_cli
from infermeter.backends.torch_compile import TorchCompileBackend
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError
from infermeter.measure.worker import run_isolated

pytest.importorskip("torch")

# The worker run's settings, as the bench CLI run's flags: only what the load compiles matters, not its timing.
QUICK = MeasureSettings(warmup_iterations=1, min_iterations=3, min_time_s=0.0, target_ci=0.0)


def test_bad_mode_is_a_usage_error(tiny_cnn, make_case):
    with pytest.raises(UsageError, match=r"torch-compile\.mode"):
        TorchCompileBackend().load(tiny_cnn, make_case("torch-compile", options={"torch-compile.mode": "fastest"}))


@pytest.mark.slow
def test_compiles_in_load_and_matches_torch(tiny_cnn, make_case):
    if TorchCompileBackend.available():
        pytest.skip(TorchCompileBackend.available() or "")
    case = make_case("torch-compile")
    feeds = feeds_for(tiny_cnn, case)
    session = TorchCompileBackend().load(tiny_cnn, case)
    assert session.load_phases_s["compile_s"] > 0
    assert session.effective_precision() == "fp32"
    output = session.outputs_to_numpy(session.run(session.prepare(feeds)))[0]
    np.testing.assert_allclose(output, torch_reference(tiny_cnn, case, feeds)[0], rtol=1e-4, atol=1e-5)
    session.close()


@pytest.mark.slow
def test_second_process_hits_the_inductor_cache(tmp_path, tiny_cnn, make_case, own_compile_cache):
    """Across processes (the default isolation) the on-disk FX-graph cache serves the second compile. In one
    process Dynamo would reuse its in-memory code instead, which tests nothing about the disk cache. The test's
    own cache makes the first run a miss whatever other tests compiled. The first process is the case's worker
    started from here (what bench starts for it), the second the bench CLI's, end to end."""
    first = run_isolated(tiny_cnn, make_case("torch-compile", settings=QUICK))
    assert first.status == "ok", first.error
    out = tmp_path / "r.json"
    done = run_cli(
        "bench", "tiny_cnn", "-b", "torch-compile", "--batch", "2", "--threads", "2", "--warmup", "1",
        "--iterations", "3", "--min-time", "0", "--target-ci", "0", "--no-roofline", "--no-history", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    case = load_json(out)["cases"][0]
    assert case["status"] == "ok", case.get("error")
    assert [first.loading.cache_hit, case["loading"]["cache_hit"]] == [False, True]
