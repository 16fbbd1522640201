"""Real LLM backends on the tiny offline Llama: transformers generate, GGUF conversion/quantization with
llama.cpp, and the endpoint benchmark against llama-cpp-python's real OpenAI-compatible server."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from llm_marks import needs_llama_cpp, needs_transformers

from cli_helpers import load_json, run_cli
from infermeter.core.errors import ModelError
from infermeter.llm.backends.base import GenerateCase
from infermeter.llm.models import resolve_gguf

pytestmark = pytest.mark.slow


def test_user_gguf_paths_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        resolve_gguf(str(tmp_path / "missing.gguf"))
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a gguf file")
    with pytest.raises(ModelError, match="not a GGUF file"):
        resolve_gguf(str(fake))


@needs_transformers
def test_tiny_llama_folder_round_trips_the_shipped_text(tiny_folder: Path) -> None:
    from transformers import AutoTokenizer

    from infermeter.llm.tinyllama import corpus_text

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_folder))
    text = corpus_text()[:500]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) < len(text) / 2  # BPE merges learned from the text
    assert tokenizer.decode(ids) == text


@needs_transformers
def test_transformers_backend_times_every_step(tiny_folder: Path) -> None:
    from infermeter.llm.runner import execute_generate_case

    case = GenerateCase("tiny-llama", "transformers", prompt_len=16, gen_len=6, batch=2, requests=2, warmup=1)
    result = execute_generate_case(case)
    assert result.status == "ok", result.error
    gen = result.extra["generate"]
    assert gen["requests"] == 4 and gen["output_tokens"] == 24
    assert gen["itl_ms"]["count"] == 4 * 5
    assert gen["ttft_ms"]["p50"] > 0 and gen["tpot_ms"]["p50"] > 0
    assert result.precision_effective == "fp32"
    assert result.loading.load_s and result.loading.load_s > 0 and result.extra["model_size_mb"] > 0


@needs_llama_cpp
@needs_transformers
def test_gguf_conversion_gives_the_same_logits_as_transformers(tiny_folder: Path) -> None:
    import torch
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM

    from infermeter.llm.models import gguf_from_hf

    ids = list(range(2, 40))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_folder), dtype=torch.float32).eval()
    with torch.inference_mode():
        expected = model(input_ids=torch.tensor([ids])).logits[0].numpy()
    llm = Llama(model_path=str(gguf_from_hf(tiny_folder, "f32")), n_ctx=64, logits_all=True, verbose=False)
    llm.eval(ids)
    got = np.asarray(llm.scores[: len(ids)])
    llm.close()
    # The Q/K permutation and every tensor name must be right for this to hold at every position.
    assert np.abs(got - expected).max() < 1e-2 * np.abs(expected).max()
    assert (got.argmax(axis=1) == expected.argmax(axis=1)).mean() > 0.95


@needs_llama_cpp
@needs_transformers
def test_quantization_levels_are_built_loaded_and_compared(tmp_path: Path) -> None:
    from infermeter.llm.gguf_compare import compare_levels, make_variants
    from infermeter.llm.gguf_file import gguf_file_type

    levels = ["q4_k_m", "q5_k_m", "q8_0", "f16"]
    variants = make_variants("tiny-llama", levels, tmp_path / "out")
    sizes = [v.size_mb for v in variants]
    assert sizes == sorted(sizes) and len(set(sizes)) == 4
    assert [gguf_file_type(v.path) for v in variants] == levels
    template = GenerateCase("tiny-llama", "llama-cpp", prompt_len=16, gen_len=8, requests=2, warmup=1)
    results = compare_levels(variants, template)
    by_level = {r.extra["gguf_level"]: r for r in results}
    for level, result in by_level.items():
        assert result.status == "ok", result.error
        assert result.precision_effective == level
        assert result.memory.peak_rss_mb and result.loading.load_s is not None
        assert math.isfinite(result.extra["perplexity"]) and result.extra["perplexity"] > 1
        assert result.extra["generate"]["output_tokens"] == 16
    assert by_level["f16"].extra["top1_agreement"] == 1.0
    assert by_level["q8_0"].extra["top1_agreement"] >= 0.9
    assert by_level["q8_0"].extra["perplexity"] == pytest.approx(by_level["f16"].extra["perplexity"], rel=0.05)


@needs_llama_cpp
@needs_transformers
def test_llm_quantize_cli_writes_and_compares_the_levels(tmp_path: Path) -> None:
    from infermeter.llm.gguf_file import gguf_file_type

    out_dir, results = tmp_path / "variants", tmp_path / "levels.json"
    proc = run_cli("llm", "quantize", "tiny-llama", "--levels", "q8_0,f16", "-o", str(out_dir))
    assert proc.returncode == 0, proc.stderr
    files = sorted(out_dir.glob("*.gguf"))
    assert [gguf_file_type(f) for f in files] == ["f16", "q8_0"] and "q8_0" in proc.stdout
    proc = run_cli(
        "llm", "quantize", "tiny-llama", "--levels", "q8_0,f16", "--compare", "--prompt-len", "8",
        "--gen-len", "4", "--requests", "1", "--threads", "1", "--results", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(results)["cases"]
    assert [c["gguf_level"] for c in cases] == ["q8_0", "f16"]
    assert all(c["status"] == "ok" and c["perplexity"] > 1 for c in cases)
    assert cases[1]["top1_agreement"] == 1.0 and "top-1 agree" in proc.stdout


@needs_llama_cpp
@needs_transformers
def test_llm_bench_cli_on_llama_cpp(tmp_path: Path) -> None:
    out = tmp_path / "gen.json"
    proc = run_cli(
        "llm", "bench", "tiny-llama", "-b", "llama-cpp,vllm", "--prompt-len", "16", "--gen-len", "8",
        "--requests", "3", "--threads", "1", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [c["backend"] for c in cases] == ["llama-cpp", "vllm"]
    assert cases[0]["status"] == "ok" and cases[0]["generate"]["succeeded"] == 3
    assert cases[0]["precision_effective"] == "f16" and cases[0]["memory"]["peak_rss_mb"] > 0
    assert cases[1]["status"] == "unavailable" and cases[1]["error"]


@pytest.fixture
def llama_server() -> Iterator[str]:
    import importlib.util

    from infermeter.llm.openai_server import free_port, llama_cpp_server_command, llama_cpp_server_flags, started_server

    if importlib.util.find_spec("sse_starlette") is None or importlib.util.find_spec("uvicorn") is None:
        pytest.skip("llama-cpp-python's server extra is not installed (`make test-llm` installs it)")
    port = free_port()
    command = llama_cpp_server_command(resolve_gguf("tiny-llama"), port, llama_cpp_server_flags("tiny", threads=1))
    with started_server(command, f"http://127.0.0.1:{port}", timeout_s=120) as server:
        yield server.url


@needs_llama_cpp
@needs_transformers
def test_endpoint_benchmark_against_llama_cpp_server(llama_server: str, tmp_path: Path) -> None:
    out = tmp_path / "endpoint.json"
    proc = run_cli(
        "llm", "load", llama_server, "--model-name", "tiny", "--concurrency", "1,4", "--requests", "4",
        "--prompt-len", "16", "--gen-len", "8", "--slo-ttft-ms", "60000", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [c["concurrency"] for c in cases] == [1, 4]
    for case in cases:
        gen = case["generate"]
        assert case["status"] == "ok" and gen["succeeded"] == 4, gen["errors_by_kind"]
        assert 0 < gen["output_tokens"] <= 4 * 8
        # A short answer is one that stopped before its 8 tokens: none when all 32 came back, at least one otherwise.
        assert 0 <= case["short_outputs"] <= 4
        assert (case["short_outputs"] == 0) == (gen["output_tokens"] == 4 * 8)
        assert gen["ttft_ms"]["p50"] > 0 and gen["e2e_ms"]["p50"] >= gen["ttft_ms"]["p50"]
        assert gen["slo_met"] == 4 and gen["goodput_rps"] > 0
