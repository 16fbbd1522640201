"""The pieces of `infermeter check` in this process: settings and the pyproject table, where an operator is called,
the same-outputs check, the markdown summary and JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from infermeter.compare.verdict import CaseChange
from infermeter.core.errors import ModelError, UsageError
from infermeter.modelci.baseline import Baseline, baseline_ref
from infermeter.modelci.config import CheckConfig, apply_settings, config_from_pyproject
from infermeter.modelci.run import CheckReport, run_check
from infermeter.modelci.steps import Outcome, same_outputs_step
from infermeter.modelci.summary import render_junit, render_markdown
from infermeter.models.resolve import resolve_model
from infermeter.results.schema import CaseResult
from modelci_sources import VARIANTS, git, model_repo, worktrees


def test_pyproject_table_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\n\n[tool.infermeter.check]\nmodel = "m.py:build"\nbaseline = "git:origin/main"\n'
        'backends = ["onnxruntime", "openvino"]\nthreshold = "10%"\nmin-time = 0.5\nsame_outputs = true\n'
    )
    config = config_from_pyproject(pyproject)
    assert config == CheckConfig(
        f"{tmp_path.resolve() / 'm.py'}:build",  # a path in the table is relative to the file's folder
        "git:origin/main",
        backends=("onnxruntime", "openvino"),
        threshold=0.1,
        min_time_s=0.5,
        same_outputs=True,
    )
    assert config.gate_backend == "onnxruntime"
    monkeypatch.chdir(tmp_path)  # run where the file is: the path as written
    assert config_from_pyproject(pyproject).model == "m.py:build"
    flags = apply_settings(config, {"backends": ("openvino",), "threshold": "3%", "rounds": None}, "flags")
    assert flags.backends == ("openvino",) and flags.threshold == pytest.approx(0.03) and flags.rounds == 6
    assert config_from_pyproject(None) == CheckConfig(model="")


def test_bad_settings_are_usage_errors(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.infermeter.check]\nmodel = "m.py:build"\nthreshhold = "5%"\n')
    with pytest.raises(UsageError, match="unknown setting 'threshhold'"):
        config_from_pyproject(pyproject)
    for values, message in (
        ({"batch": "two"}, "is not a number"),
        ({"same-outputs": "yes"}, "must be true or false"),
        ({"threshold": "150%"}, "must lie in"),
    ):
        with pytest.raises(UsageError, match=message):
            apply_settings(CheckConfig("m.py:build"), values, "here")
    with pytest.raises(UsageError, match="no model to check"):
        CheckConfig("").check()
    with pytest.raises(UsageError, match="unknown backend 'nope'"):
        CheckConfig("m.py:build", latency_backend="nope").check()


def test_operator_origins_name_module_and_line() -> None:
    import torch

    from infermeter.models.op_origin import operator_origins

    class Leaf(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(x)

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(Leaf()))
    found = operator_origins(model, (torch.randn(2, 4),), "aten::sigmoid")
    assert len(found) == 1 and found[0].startswith("1.0 (Leaf, test_check_lib.py:")
    assert operator_origins(model, (torch.randn(2, 4),), "aten::nonexistent") == []
    assert operator_origins(model, (torch.randn(2, 5),), "aten::sigmoid") == []  # the model fails: nothing found


def test_same_outputs_against_the_baseline(tmp_path: Path) -> None:
    for name in ("unchanged", "slower"):
        (tmp_path / f"{name}.py").write_text(VARIANTS[name])
    base = resolve_model(f"{tmp_path / 'unchanged.py'}:build")
    config = CheckConfig(base.ref, samples=2)
    same = same_outputs_step(resolve_model(f"{tmp_path / 'unchanged.py'}:build"), base, config)
    assert same.status == "pass", same.reason
    changed = same_outputs_step(resolve_model(f"{tmp_path / 'slower.py'}:build"), base, config)
    assert changed.status == "fail" and "against the baseline: output output: max abs err" in changed.reason


def _report() -> CheckReport:
    base = CaseResult(
        "a",
        "old.onnx",
        backend="onnxruntime",
        backend_version="1.0",
        device="cpu",
        batch=1,
        shape_mode="static",
        precision="fp32",
        precision_effective="fp32",
        threads=1,
        status="ok",
    )
    base.timing.rounds_p50_ms = [1.0, 1.1]
    change = CaseChange("m", base, new=base, paired_by="rerun", metric="p50", base_value=1.0, new_value=2.0, ratio=2.0)
    outcomes = (
        Outcome("export", "pass", "exported", ("onnx checker: pass: full check passed",), 1.5),
        Outcome("parity onnxruntime", "fail", "output a|b differs", ("line 1",), 0.2),
        Outcome("latency onnxruntime", "skip", "no --baseline", (), 0.0, change),
    )
    config = CheckConfig("m.py:build", "git:HEAD~1")
    return CheckReport(config, outcomes, "2026-01-01T00:00:00+00:00", 3.25, "test CPU", "0.0")


def test_markdown_summary() -> None:
    text = render_markdown(_report())
    assert text.startswith("## infermeter check: ❌ failed (1 of 3 checks)\n")
    assert "`m.py:build` against baseline `git:HEAD~1`" in text
    assert "| parity onnxruntime | ❌ FAIL | output a\\|b differs |" in text  # a pipe would split the cell
    assert "| export | ✅ pass | exported |" in text and "| latency onnxruntime | ⏭️ skip |" in text
    assert "| baseline | `git:HEAD~1` | 1 | 2 |" in text and "| new | `m.py:build` | 2 | 2 |" in text
    assert "<details><summary>export</summary>" in text and "- onnx checker: pass: full check passed" in text


def test_junit_xml() -> None:
    root = ET.fromstring(render_junit(_report()))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped"), suite.get("time")) == (
        "3",
        "1",
        "1",
        "3.250",
    )
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    failure = cases["parity onnxruntime"].find("failure")
    assert (
        failure is not None
        and failure.get("message") == "output a|b differs"
        and failure.text == "output a|b differs\nline 1"
    )
    skipped = cases["latency onnxruntime"].find("skipped")
    assert skipped is not None and skipped.get("message") == "no --baseline"
    assert cases["export"].get("time") == "1.500" and len(cases["export"]) == 1  # system-out only


def test_git_baseline_checks_out_and_always_removes_its_worktree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    model = model_repo(repo, "slower", "pkg/model.py")
    with pytest.raises(KeyboardInterrupt), baseline_ref(f"{model}:build", "git:HEAD") as baseline:
        assert baseline.ref is not None and baseline.ref.endswith("/pkg/model.py:build")
        checkout = Path(baseline.ref.removesuffix(":build"))
        assert checkout.read_text() == VARIANTS["unchanged"]  # HEAD's model, not the working tree's
        assert len(worktrees(repo)) == 2
        raise KeyboardInterrupt
    assert len(worktrees(repo)) == 1 and not checkout.exists()
    added = repo / "pkg" / "added.py"
    added.write_text(VARIANTS["unchanged"])
    with baseline_ref(f"{added}:build", "git:HEAD") as baseline:
        assert baseline.ref is None and "pkg/added.py does not exist at HEAD" in baseline.description
    with pytest.raises(UsageError, match="no such revision"), baseline_ref(f"{model}:build", "git:nope"):
        pass
    assert len(worktrees(repo)) == 1
    with baseline_ref("model.py:build", "other.onnx") as given:
        assert given == Baseline("other.onnx", "other.onnx")  # a model reference as it is, no git involved


def test_a_model_that_no_longer_loads_is_a_failed_check(tmp_path: Path) -> None:
    source = tmp_path / "model.py"
    source.write_text(VARIANTS["unchanged"] + "\nraise RuntimeError('broken in this change')\n")
    report = run_check(CheckConfig(f"{source}:build"))
    assert not report.ok and [o.name for o in report.outcomes] == ["load"]
    assert "broken in this change" in report.outcomes[0].reason
    with pytest.raises(ModelError, match="does not exist"):
        run_check(CheckConfig(f"{tmp_path / 'absent.py'}:build"))


def test_a_module_factory_baseline_is_its_file_at_the_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    model_repo(repo, "slower", "ci_sample_pkg/tiny_model.py")
    (repo / "ci_sample_pkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(repo))
    with baseline_ref("ci_sample_pkg.tiny_model:build", "git:HEAD") as baseline:
        assert baseline.ref is not None and baseline.ref.endswith("/ci_sample_pkg/tiny_model.py:build")
        assert Path(baseline.ref.removesuffix(":build")).read_text() == VARIANTS["unchanged"]
    with pytest.raises(UsageError, match="has no source file"), baseline_ref("tiny_cnn", "git:HEAD"):
        pass


@pytest.mark.slow
def test_a_hugging_face_folder_against_its_git_revision(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    repo = tmp_path / "repo"
    model_repo(repo)  # a repository with a commit; the folder is added to it
    config = ViTConfig(image_size=16, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=64, num_labels=3)  # fmt: skip
    torch.manual_seed(0)
    ViTForImageClassification(config).save_pretrained(repo / "vit")
    git(repo, "add", "vit")
    git(repo, "commit", "--quiet", "-m", "vit")
    settings = CheckConfig(str(repo / "vit"), "git:HEAD", threshold=0.5, min_time_s=0.2, max_time_s=2.0, rounds=4,
                           threads=1, samples=2, same_outputs=True)  # fmt: skip
    report = run_check(settings)
    assert report.ok, [o.reason for o in report.outcomes]
    names = [o.name for o in report.outcomes]
    assert names == ["export", "parity onnxruntime", "same outputs", "latency onnxruntime"]
    assert "pixel_values:0=batch" in report.outcomes[0].reason
    assert len(worktrees(repo)) == 1


@pytest.mark.slow
def test_a_change_that_fixes_an_unexportable_baseline_is_not_blocked(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text(VARIANTS["unsupported"])
    (tmp_path / "new.py").write_text(VARIANTS["unchanged"])
    report = run_check(CheckConfig(f"{tmp_path / 'new.py'}:build", f"{tmp_path / 'old.py'}:build", samples=2))
    assert report.ok, [o.reason for o in report.outcomes]
    latency = report.outcomes[-1]
    assert latency.status == "skip" and "the base model cannot be measured on onnxruntime" in latency.reason
    assert "infermeter_ci_test::wobble" in latency.reason
