"""`serve --recycle-after N`: a worker reloads its session after N batches, releasing what it held (the third
remedy for memory growth under varying shapes), and serving goes on."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

from infermeter.serve.model import ServeConfig, ServedModel
from infermeter.serve.protocol import encode_json_request

TINY = np.zeros((1, 3, 32, 32), dtype=np.float32)


def test_a_worker_reloads_its_session_after_n_batches_and_drops_what_the_old_one_held() -> None:
    config = ServeConfig(model="tiny_cnn", backend="null", threads=1, recycle_after=3,
                         options=(("null.leak_kb", "256"),))  # fmt: skip
    model = ServedModel(config)
    model.load(1)
    first = model.sessions[0]
    recycled = []
    for _ in range(7):
        model.run(model.sessions[0], {"input": TINY})
        recycled.append(model.count_and_recycle(0, 1))
    assert recycled == [False, False, True, False, False, True, False]
    assert model.recycles == 2 and model.sessions[0] is not first
    # The fresh session holds only its warm-up's leak plus one request's, not the old session's six.
    held = len(model.sessions[0]._held)  # type: ignore[attr-defined]
    assert held < len(first._held)  # type: ignore[attr-defined]
    model.close()


def test_serving_goes_on_across_recycles(serve: Any) -> None:
    url = serve(recycle_after=2, options=[("null.latency_ms", "0.5")])
    for _ in range(5):
        response = httpx.post(f"{url}/v2/models/tiny_cnn/infer", content=encode_json_request({"input": TINY}))
        assert response.status_code == 200, response.text
