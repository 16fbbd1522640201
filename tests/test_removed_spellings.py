"""The deprecated spellings are gone (issue 45 item 8; the project never released them): `bench --task generate`
and bench's generation flags (`infermeter llm bench` has them), `quantize --format gguf` and its GGUF flags
(`infermeter llm quantize`), `load --api openai` and load's serving-sweep flags (`infermeter llm load`),
`optimize --backends` (`-b/--backend`). Each is click's usage error, exit 2, naming the option (`load --api`'s names
`infermeter llm load` too); a bare `bench --resume` of a generation results file says in one line to use
`llm bench --resume FILE`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_helpers import run_cli
from infermeter.cli.app import app
from infermeter.core.case import MeasureSettings
from infermeter.llm.generation_metrics import SLO
from infermeter.llm.plan import GenerationMatrix
from infermeter.llm.sweep import GenerationPlan, store_generation_plan
from infermeter.results.io import write_results
from infermeter.results.schema import ResultsFile

URL = "http://127.0.0.1:9"  # nothing listens: a removed flag is refused before anything is sent
REMOVED = [
    ("bench", "--task", "generate"),
    ("bench", "--task", "infer"),  # the option is gone, not only its `generate` value
    *(("bench", "tiny_cnn", flag, "8") for flag in ("--prompt-len", "--gen-len", "--requests")),
    *(("bench", "tiny_cnn", flag, "50") for flag in ("--slo-ttft-ms", "--slo-tpot-ms")),
    ("quantize", "tiny-llama", "--format", "gguf"),
    ("quantize", "tiny_cnn", "--format", "onnx"),
    ("quantize", "tiny-llama", "--levels", "q8_0"),
    ("quantize", "tiny-llama", "--compare"),
    *(("quantize", "tiny-llama", flag, "8") for flag in ("--prompt-len", "--gen-len", "--requests")),
    ("optimize", "tiny_cnn", "--backends", "onnxruntime"),
    *(("load", URL, "--api", api) for api in ("openai", "openai-chat", "kserve")),  # the option is gone
    *(("load", URL, flag, "8") for flag in ("--prompt-len", "--gen-len", "--requests", "--slo-ttft-ms")),
    *(("load", URL, flag, "1") for flag in ("--slo-tpot-ms", "--rates", "--metrics-interval", "--slo-attainment")),
    *(("load", URL, flag) for flag in ("--ignore-eos", "--server-metrics")),
    ("load", URL, "--series", "s"),
]


@pytest.mark.parametrize("args", REMOVED, ids=" ".join)
def test_a_removed_spelling_is_a_usage_error_naming_the_option(args: tuple[str, ...], tmp_path: Path) -> None:
    option = next(word for word in args if word.startswith("--"))
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    error = result.output.strip().splitlines()[-1]  # click's wording: "Error: No such option '--task'."
    assert error.startswith("Error: No such option") and f"'{option}'" in error, result.output
    assert not (tmp_path / "out").exists()


def test_the_current_spellings_are_listed_where_the_old_ones_were() -> None:
    """The LLM commands keep the flags that bench and quantize lost, and optimize keeps -b/--backend."""

    def longs(*path: str) -> set[str]:
        command = app
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        return {max(p.opts, key=len) for p in command.params if p.opts[0].startswith("-")}

    generation = {"--prompt-len", "--gen-len", "--requests", "--slo-ttft-ms", "--slo-tpot-ms"}
    assert generation <= longs("llm", "bench") and not generation & longs("bench") and "--task" not in longs("bench")
    gguf = {"--levels", "--compare", "--prompt-len", "--gen-len", "--requests"}
    assert gguf <= longs("llm", "quantize") and not (gguf | {"--format"}) & longs("quantize")
    sweep = {"--prompt-len", "--gen-len", "--requests", "--rates", "--ignore-eos", "--server-metrics", "--series"}
    assert sweep | {"--chat"} <= longs("llm", "load") and not (sweep | {"--api"}) & longs("load")
    assert "--backend" in longs("optimize") and "--backends" not in longs("optimize")


@pytest.mark.parametrize("api", [["--api", "openai"], ["--api=openai-chat"]], ids=" ".join)
def test_load_api_openai_names_llm_load(api: list[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli("load", URL, *api, "--concurrency", "1", "-o", str(out))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "error: No such option '--api': `load` speaks KServe v2 alone; an OpenAI-compatible server is loaded with "
        "`infermeter llm load URL [--chat]` (see `infermeter load --help`)"
    ]
    assert proc.stdout == "" and not out.exists()


def _generation_file(path: Path) -> None:
    """A results file holding a generation plan (as `llm bench -o path` writes before its first case)."""
    matrix = GenerationMatrix(
        models=("tiny-llama",), backends=("fake",), batches=(1,), prompt_len=8, gen_len=4, requests=2, warmup=0,
        threads=1, options=(), measure=MeasureSettings(min_time_s=0.0), slo=SLO(None, None),
    )  # fmt: skip
    results = ResultsFile(created="2026-01-01T00:00:00", environment={})
    store_generation_plan(results, GenerationPlan(matrix, ("infermeter", "llm", "bench"), isolate=False))
    write_results(path, results)


@pytest.mark.parametrize("extra", [(), ("-b", "onnxruntime", "--resume-extend")], ids=["bare", "extend"])
def test_bench_resume_of_a_generation_file_names_llm_bench_and_leaves_it(
    extra: tuple[str, ...], tmp_path: Path
) -> None:
    gen = tmp_path / "gen.json"
    _generation_file(gen)
    before = gen.read_bytes()
    proc = run_cli("bench", "--resume", str(gen), *extra, timeout=120)
    assert proc.returncode == 2, proc.stderr
    expected = f"error: {gen} holds a generation plan: resume it with `infermeter llm bench --resume {gen}`"
    assert proc.stderr.splitlines() == [expected] and proc.stdout == ""
    assert gen.read_bytes() == before
