"""The LLM flows: `llm bench`'s defaults, the flags of one command refused by the other (`bench` / `llm bench`,
`quantize` / `llm quantize`) with exit 2 before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import load_json, run_cli


def test_llm_bench_defaults_to_batch_1_and_runs_the_backend(tmp_path: Path) -> None:
    out = tmp_path / "gen.json"
    proc = run_cli(
        "llm", "bench", "tiny-llama", "-b", "fake", "--prompt-len", "8", "--gen-len", "4",
        "--requests", "3", "--slo-ttft-ms", "1000", "-O", "fake.decode_ms=3", "--no-isolation", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [(c["backend"], c["batch"], c["status"]) for c in cases] == [("fake", 1, "ok")]
    gen = cases[0]["generate"]
    assert gen["succeeded"] == 3 and gen["output_tokens"] == 3 * 4
    assert gen["tpot_ms"]["p50"] == pytest.approx(3.0)
    assert gen["slo"]["ttft_ms"] == 1000
    assert "TTFT" in proc.stdout


def test_llm_bench_takes_a_batch_list(tmp_path: Path) -> None:
    out = tmp_path / "gen.json"
    proc = run_cli(
        "llm", "bench", "-b", "fake", "--batch", "1,2", "--gen-len", "2", "--requests", "1",
        "--warmup", "0", "--no-isolation", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [c["batch"] for c in cases] == [1, 2]
    assert cases[1]["generate"]["output_tokens"] == 2 * 2


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["llm", "bench", "--precision", "fp16"], "No such option '--precision'"),
        (["llm", "bench", "--cold-start"], "No such option '--cold-start'"),
    ],
)  # fmt: skip
def test_llm_bench_refuses_the_flags_of_inference(args: list[str], named: str, tmp_path: Path) -> None:
    """(bench refusing llm bench's flags: tests/test_removed_spellings.py; llm bench's own checks: test_llm_group.)"""
    out = tmp_path / "r.json"
    proc = run_cli(*args, "-o", str(out))
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr and proc.stderr.startswith("error:")
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["llm", "quantize", "-o", "out", "--calib", "x.npz"], "No such option '--calib'"),
        (["llm", "quantize", "-o", "out", "--sensitivity"], "No such option '--sensitivity'"),
        (["quantize"], "missing -o/--output"),
    ],
)
def test_llm_quantize_refuses_the_int8_flags(args: list[str], named: str, tmp_path: Path) -> None:
    """(quantize refusing the GGUF flags: tests/test_removed_spellings.py; llm quantize's own: test_llm_group.)"""
    split = 2 if args[0] == "llm" else 1  # the command's words, then MODEL, then its flags
    flags = (str(tmp_path / a) if a in ("out", "r.json") else a for a in args[split:])
    proc = run_cli(*args[:split], "tiny-llama", *flags)
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr
    assert not (tmp_path / "out").exists()
