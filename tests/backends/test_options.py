"""Typed backend options: every option of every registered backend refuses a typo'd key and a bad value with a
usage error (exit 2) before any case runs, and a case carries only its own backend's options, normalized."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cli_helpers import run_cli
from infermeter.backends.options import Choice, Integer, Number, Option, Switch, Text, check_options, options_for
from infermeter.backends.registry import backend_class, registered
from infermeter.core.case import Case
from infermeter.core.errors import UsageError
from infermeter.measure.plan import Matrix, build_plan
from infermeter.models.resolve import resolve_model

DECLARED = [(entry.name, option) for entry in registered() for option in backend_class(entry.name).options]


def _typo(key: str) -> str:
    """The key with two neighbouring letters of its last word swapped (the usual slip of the fingers), or one of
    them dropped where they are the same letter."""
    head, _, word = key.rpartition(".")
    index = max(len(word) // 2, 1)
    pair = word[index] + word[index - 1] if word[index] != word[index - 1] else word[index]
    slipped = word[: index - 1] + pair + word[index + 1 :]
    return f"{head}.{slipped}" if head else slipped


def _bad_value(option: Option) -> str:
    """A value the option's declaration must refuse."""
    if isinstance(option, Choice):
        return "definitely-not-one"
    if isinstance(option, Switch):
        return "maybe"
    if isinstance(option, Integer):
        return str(option.minimum - 1)
    if isinstance(option, Number):
        return "fast"
    assert isinstance(option, Text)
    return "" if option.check is None else "::not valid::"


def _good_value(option: Option) -> str:
    """A valid value that differs from the default."""
    if isinstance(option, Choice):
        return next(c for c in option.choices if c != option.default)
    if isinstance(option, Switch):
        return "off" if option.default else "on"
    if isinstance(option, Integer | Number):
        return str(int(option.default) + 1) if isinstance(option, Integer) else str(option.default / 2 or 0.5)
    assert isinstance(option, Text)
    for candidate in ("input:1x3x32x32", "int8", "0.5", "some-value"):  # a shape list, a precision, seconds, text
        try:
            option.parse(candidate)
        except UsageError:
            continue
        return candidate
    raise AssertionError(f"no valid example value for {option.key}")


def test_every_backend_of_every_task_declares_its_options_once() -> None:
    assert DECLARED, "no backend declares an option"
    by_key: dict[str, Option] = {}
    for _, option in DECLARED:
        # A key shared by several backends (cache, onnxruntime.*) is one declaration, not copies that could drift.
        assert by_key.setdefault(option.key, option) is option, option.key
        assert option.help, f"{option.key} has no help"
    assert {entry.task for entry in registered() if backend_class(entry.name).options} == {"infer", "generate"}


@pytest.mark.parametrize(("backend", "option"), DECLARED, ids=[f"{b}:{o.key}" for b, o in DECLARED])
def test_a_typo_in_the_key_is_refused_with_a_suggestion(backend: str, option: Option) -> None:
    typo = _typo(option.key)
    assert typo != option.key
    with pytest.raises(UsageError, match=rf"unknown option; did you mean {option.key}\?"):
        options_for(backend, ((typo, _good_value(option)),))


@pytest.mark.parametrize(("backend", "option"), DECLARED, ids=[f"{b}:{o.key}" for b, o in DECLARED])
def test_a_bad_value_is_refused_and_a_good_one_kept_normalized(backend: str, option: Option) -> None:
    with pytest.raises(UsageError, match=option.key.replace(".", r"\.")):
        options_for(backend, ((option.key, _bad_value(option)),))
    good = _good_value(option)
    assert options_for(backend, ((option.key, good),)) == ((option.key, option.parse(good)),)
    if option.default_text() is not None:
        # A value equal to the default changes nothing measured: it is not part of the case.
        assert options_for(backend, ((option.key, option.default_text() or ""),)) == ()


def test_values_are_normalized_and_a_choice_suggests_the_closest() -> None:
    assert options_for("onnxruntime", (("cache", "FALSE"), ("onnxruntime.opt_level", "Basic"))) == (
        ("cache", "off"),
        ("onnxruntime.opt_level", "basic"),
    )
    assert options_for("openvino", (("openvino.streams", "0004"),)) == (("openvino.streams", "4"),)
    assert options_for("null", (("null.latency_ms", "2.50"),)) == (("null.latency_ms", "2.5"),)
    with pytest.raises(UsageError, match=r"onnxruntime\.opt_level='bsic': use one of .*; did you mean basic\?"):
        check_options((("onnxruntime.opt_level", "bsic"),))
    with pytest.raises(UsageError, match=r"unknown option; known options: .*cache"):
        check_options((("zzzz", "1"),))


def test_a_case_carries_only_its_own_backends_options_in_its_id() -> None:
    spec = resolve_model("tiny_cnn")
    plain = build_plan(Matrix(models=(spec,), backends=(("torch",), ("onnxruntime",))))
    given = (("cache", "off"), ("onnxruntime.opt_level", "basic"), ("torch-compile.mode", "max-autotune"))
    tuned = build_plan(Matrix(models=(spec,), backends=(("torch",), ("onnxruntime",)), options=given))
    torch_case, ort_case = (item.case for item in tuned)
    assert torch_case.options == () and torch_case.id == plain[0].case.id
    assert ort_case.options == (("cache", "off"), ("onnxruntime.opt_level", "basic"))
    assert ort_case.id != plain[1].case.id
    default = build_plan(
        Matrix(models=(spec,), backends=(("onnxruntime",),), options=(("onnxruntime.opt_level", "ALL"),))
    )
    assert default[0].case.id == plain[1].case.id


def test_the_plan_refuses_a_bad_option_for_a_backend_not_in_it() -> None:
    # The value is wrong whatever runs: refusing it only when its backend runs would hide the typo.
    matrix = Matrix(models=(resolve_model("tiny_cnn"),), backends=(("null",),), options=(("openvino.hint", "fast"),))
    with pytest.raises(UsageError, match=r"openvino\.hint='fast'"):
        build_plan(matrix)


def test_a_backend_reads_its_options_typed() -> None:
    from infermeter.backends.null import AFTER, DIST, LATENCY_MS, WAIT

    case = Case("tiny_cnn", "null", options=(("null.after", "3"), ("null.latency_ms", "0.5"), ("null.wait", "sleep")))
    assert (AFTER.value(case), LATENCY_MS.value(case), WAIT.value(case), DIST.value(case)) == (
        3,
        0.5,
        "sleep",
        "constant",
    )
    with pytest.raises(UsageError, match=r"null\.after"):
        AFTER.value(Case("tiny_cnn", "null", options=(("null.after", "x"),)))


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("onnxruntime.opt_levl=basic", "did you mean onnxruntime.opt_level?"),
        ("onnxruntime.opt_level=bsic", "did you mean basic?"),
        ("null.latency_ms=fast", "null.latency_ms='fast'"),
    ],
)
def test_a_bad_option_exits_2_before_any_worker_starts(tmp_path: Path, option: str, message: str) -> None:
    out = tmp_path / "r.json"
    started = time.monotonic()
    proc = run_cli("bench", "tiny_cnn", "-b", "null", "--batch", "1", "-O", option, "-o", str(out), timeout=60)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: ") and message in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists(), "a results file was written: the plan ran"
    assert time.monotonic() - started < 30


def test_a_bad_generation_option_exits_2(tmp_path: Path) -> None:
    proc = run_cli("llm", "bench", "-b", "fake", "-O", "fake.decode_mss=3", "--no-isolation",
                   "-o", str(tmp_path / "g.json"), timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "did you mean fake.decode_ms?" in proc.stderr, proc.stderr


def test_backends_options_lists_every_declared_option() -> None:
    proc = run_cli("backends", "--options", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {row["key"]: row for row in json.loads(proc.stdout)}
    assert set(rows) == {option.key for _, option in DECLARED}
    level = rows["onnxruntime.opt_level"]
    assert level["default"] == "all" and "basic" in level["accepts"] and "onnxruntime" in level["backends"]
    assert set(rows["cache"]["backends"]) >= {"onnxruntime", "openvino", "torch-compile", "tensorrt"}
    text = run_cli("backends", "--options", timeout=60)
    assert text.returncode == 0 and "onnxruntime.opt_level" in text.stdout and "llama-cpp.n_batch" in text.stdout
