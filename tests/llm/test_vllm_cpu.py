"""The `vllm-cpu` backend without vLLM: where it looks for vLLM's venv, what it says when it is missing, and its
engine-process protocol driven end to end by a fake engine (the real one runs in docs/llm-serving-vllm.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from infermeter.llm.backends import vllm_cpu
from infermeter.llm.backends.base import GenerateCase
from infermeter.llm.runner import execute_generate_case
from infermeter.results.records import GenerationSummary, read_record

FAKE_ENGINE = """
import json, os, sys
protocol = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
settings = json.loads(sys.stdin.readline())
print("engine log line on stdout must not reach the protocol")
if settings["model"].endswith("broken"):
    sys.stderr.write("INFO starting\\nRuntimeError: Engine core initialization failed. See root cause above.\\n")
    sys.exit(1)
protocol.write(json.dumps({"ready": "0.0-fake", "dtype": settings["dtype"]}) + "\\n")
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "tokenize":
        protocol.write(json.dumps({"ids": list(range(len(request["text"].split())))}) + "\\n")
    elif request["op"] == "generate":
        for step in range(request["gen_len"]):
            protocol.write(json.dumps({"step": step + 1}) + "\\n")
        protocol.write(json.dumps({"outputs": [[7] * request["gen_len"]] * request["batch"]}) + "\\n")
    else:
        break
"""


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """vLLM's python is this interpreter, running a fake engine that speaks the protocol."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_ENGINE)
    monkeypatch.setattr(vllm_cpu, "WORKER", script)
    monkeypatch.setattr(vllm_cpu, "_has_vllm", lambda python: True)
    monkeypatch.setenv(vllm_cpu.PYTHON_ENV, sys.executable)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model


def test_a_missing_venv_names_the_make_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(vllm_cpu.PYTHON_ENV, str(tmp_path / "nowhere" / "python"))
    reason = vllm_cpu.VllmCpuBackend.available()
    assert reason is not None and "make install-vllm" in reason and vllm_cpu.PYTHON_ENV in reason
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    monkeypatch.setenv(vllm_cpu.PYTHON_ENV, str(python))
    reason = vllm_cpu.VllmCpuBackend.available()
    assert reason is not None and "has no vllm package" in reason


def test_the_error_line_is_the_last_one_naming_an_error() -> None:
    log = "INFO a\nValueError: first\nINFO b\nRuntimeError: Engine core initialization failed.\nINFO shutdown\n"
    assert vllm_cpu.error_line(log) == "RuntimeError: Engine core initialization failed."
    assert vllm_cpu.error_line("just\nlines\n") == "lines"
    assert vllm_cpu.error_line("") == "(no output)"


@pytest.mark.slow
def test_a_case_runs_through_the_engine_process(fake_engine: Path) -> None:
    case = GenerateCase(str(fake_engine), "vllm-cpu", prompt_len=8, gen_len=5, requests=3, warmup=1)
    result = execute_generate_case(case)
    assert result.status == "ok", result.error
    assert result.device == "cpu" and result.precision_effective == "float32"
    assert any("0.0-fake" in note for note in result.notes)
    summary = read_record(result, GenerationSummary)
    assert summary is not None and summary.succeeded == 3 and summary.output_tokens == 15


@pytest.mark.slow
def test_an_engine_that_dies_at_start_gives_its_error_line(fake_engine: Path) -> None:
    broken = fake_engine.with_name("broken")
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    result = execute_generate_case(GenerateCase(str(broken), "vllm-cpu", gen_len=2, requests=1))
    assert result.status == "failed"
    assert result.error is not None and "Engine core initialization failed" in result.error
