"""`infermeter llm bench|quantize|load`: LLM generation's own command group (`bench --task generate`,
`quantize --format gguf` and `load --api openai` are gone: tests/test_removed_spellings.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAIServer
from llm_marks import needs_llama_cpp, needs_transformers

from cli_helpers import load_json, run_cli

FAKE_BENCH = ["tiny-llama", "-b", "fake", "--prompt-len", "8", "--gen-len", "4", "--requests", "2", "--no-isolation"]


def test_llm_bench_runs_the_generation_sweep(tmp_path: Path) -> None:
    out = tmp_path / "gen.json"
    proc = run_cli("llm", "bench", *FAKE_BENCH, "-O", "fake.decode_ms=2", "--batch", "1,2", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data = load_json(out)
    assert data["plan"]["task"] == "generate"
    assert [(c["backend"], c["batch"], c["status"]) for c in data["cases"]] == [("fake", 1, "ok"), ("fake", 2, "ok")]
    assert data["cases"][1]["generate"]["output_tokens"] == 2 * 2 * 4
    assert "TTFT" in proc.stdout
    again = run_cli("llm", "bench", "--resume", str(out))
    assert again.returncode == 0 and "0 of 2 planned case(s) remain" in again.stderr


def test_llm_bench_refuses_an_inference_file_and_bad_flags(tmp_path: Path) -> None:
    bad = run_cli("llm", "bench", "-b", "fake", "--gen-len", "0", "-o", str(tmp_path / "r.json"))
    assert bad.returncode == 2 and "--gen-len 0 must be positive" in bad.stderr
    unknown = run_cli("llm", "bench", "-b", "nope")
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    from infermeter.results.io import write_results
    from infermeter.results.schema import ResultsFile

    infer = tmp_path / "infer.json"
    write_results(infer, ResultsFile(created="2026-01-01T00:00:00", environment={}))
    refused = run_cli("llm", "bench", "--resume", str(infer))
    assert refused.returncode == 2 and "infermeter bench --resume" in refused.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [([], "needs -o FOLDER"), (["-o", "out", "--results", "r.json"], "--results needs --compare")],
)
def test_llm_quantize_checks_its_flags(args: list[str], named: str, tmp_path: Path) -> None:
    proc = run_cli("llm", "quantize", "tiny-llama", *(str(tmp_path / a) if a in ("out", "r.json") else a for a in args))
    assert proc.returncode == 2 and named in proc.stderr
    assert not (tmp_path / "out").exists()


@needs_llama_cpp
@needs_transformers
def test_llm_quantize_writes_the_levels(tmp_path: Path) -> None:
    from infermeter.llm.gguf_file import gguf_file_type

    new = tmp_path / "new"
    proc = run_cli("llm", "quantize", "tiny-llama", "--levels", "q8_0", "-o", str(new))
    assert proc.returncode == 0, proc.stderr
    assert [gguf_file_type(f) for f in new.glob("*.gguf")] == ["q8_0"]


def test_llm_load_chat_sends_the_chosen_fields(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with FakeOpenAIServer(["ok"], tokens=3) as server:
        proc = run_cli(
            "llm", "load", server.url, "--chat", "--model-name", "m1", "--concurrency", "1,2", "--requests", "2",
            "--gen-len", "3", "--prompt-len", "5", "--ignore-eos", "--api-key", "k", "-o", str(out),
        )  # fmt: skip
        bodies = list(server.bodies)
    assert proc.returncode == 0, proc.stderr
    assert [c["concurrency"] for c in load_json(out)["cases"]] == [1, 2]
    assert len(bodies) == 2 * 2
    for body in bodies:
        assert body["model"] == "m1" and body["max_tokens"] == 3 and body["ignore_eos"] is True
        assert len(body["messages"][0]["content"].split()) == 5 and "prompt" not in body


def test_llm_load_sweep_doubles_to_the_top_and_checks_its_flags() -> None:
    with FakeOpenAIServer(["ok"], tokens=2) as server:
        proc = run_cli("llm", "load", server.url, "--scenario", "sweep", "--concurrency", "4", "--requests", "2")
    assert proc.returncode == 0, proc.stderr
    assert all(f"concurrency {level}" in proc.stderr for level in (1, 2, 4))
    both = run_cli("llm", "load", "http://127.0.0.1:1", "--rates", "1", "--concurrency", "2")
    assert both.returncode == 2 and "--rates is a Poisson rate sweep" in both.stderr
