"""Scenarios (measure.scenarios): a case's chosen once from its settings, a plan's once from the command
(`--cold-start`) and stored in the plan; what each runs and how it may be grouped; and no other module asking
which scenario runs."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import infermeter
from cli_helpers import load_json, run_cli
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import ResultsError
from infermeter.machine.environment import new_results_file
from infermeter.measure.coldstart import PASSES
from infermeter.measure.plan import Matrix
from infermeter.measure.planfile import PLAN_KEY, StoredPlan, plan_from_dict, plan_to_dict
from infermeter.measure.scenarios import COLD_START, LATENCY, SOAK, Scenario, scenario_of
from infermeter.measure.shapes import EVERY_SIZE
from infermeter.models.resolve import resolve_model
from infermeter.results.io import write_results

PACKAGE = Path(infermeter.__file__).parent
# The modules that may ask which scenario runs (`settings.soaking`, a `cold_start` flag): the scenarios and the
# scenario's own modules. Everything else asks the scenario what it needs.
SCENARIO_MODULES = ("measure/scenarios.py", "measure/coldstart.py", "measure/soak_*.py")
QUESTIONS = ("cold_start", "soaking")


def test_a_soak_by_requests_or_minutes_is_the_soak_scenario_and_the_rest_latency() -> None:
    assert scenario_of(MeasureSettings()) is LATENCY
    assert scenario_of(MeasureSettings(soak_requests=500)) is SOAK
    assert scenario_of(MeasureSettings(soak_minutes=0.5)) is SOAK


def test_only_latency_cases_interleave_and_a_soak_draws_every_size() -> None:
    assert LATENCY.interleaved and not SOAK.interleaved
    assert (LATENCY.dynamic_points, SOAK.dynamic_points) == (8, EVERY_SIZE)
    assert LATENCY.run_isolated is not SOAK.run_isolated and LATENCY.run_in_process is not SOAK.run_in_process


def test_a_cold_start_builds_nothing_first_and_has_no_roofline_nor_repeat() -> None:
    assert (LATENCY.prepare_first, LATENCY.roofline, LATENCY.no_repeat) == (True, True, "")
    assert (COLD_START.prepare_first, COLD_START.roofline) == (False, False) and COLD_START.no_repeat
    assert COLD_START.isolated_only and not LATENCY.isolated_only
    assert COLD_START.table != LATENCY.table


def scenario_questions(source: str) -> list[int]:
    """The lines of `source` that ask which scenario runs (`.cold_start`, `.soaking`)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in QUESTIONS
    ]


def test_no_module_outside_the_scenario_modules_asks_which_scenario_runs() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not any(path.relative_to(PACKAGE).match(pattern) for pattern in SCENARIO_MODULES)
        for line in scenario_questions(path.read_text())
    ]
    assert not found, "ask the scenario what it needs (measure.scenarios) instead:\n" + "\n".join(found)


def test_the_scenario_check_sees_a_question() -> None:
    source = "if settings.soaking:\n    pass\nrun(build_first=not plan.cold_start)\nx = plan.scenario\n"
    assert scenario_questions(source) == [1, 3]


def _stored(scenario: Scenario = LATENCY) -> StoredPlan:
    settings = MeasureSettings(warmup_iterations=0, min_iterations=3, min_time_s=0.0, target_ci=0.0)
    matrix = Matrix(
        (resolve_model("tiny_cnn"),), (("null",),), batches=(1, 2), threads=1, settings=settings, options=()
    )
    return StoredPlan((matrix,), ("infermeter", "bench"), scenario)


def _version_1(plan: StoredPlan, cold_start: bool | None) -> dict[str, object]:
    """`plan`'s block as an infermeter of plan version 1 wrote it: a `cold_start` flag, no scenario."""
    block = plan_to_dict(plan)
    del block["scenario"]
    block["version"] = 1
    if cold_start is not None:
        block["cold_start"] = cold_start
    return block


def test_the_plan_stores_its_scenario_by_name_and_reads_the_old_cold_start_flag(tmp_path: Path) -> None:
    cold = _stored(COLD_START)
    block = json.loads(json.dumps(plan_to_dict(cold)))
    assert block["scenario"] == "cold_start" and "cold_start" not in block
    assert plan_from_dict(block, tmp_path, resolve_model) == cold
    old = plan_from_dict(_version_1(_stored(), cold_start=True), tmp_path, resolve_model)
    assert old.scenario is COLD_START and old == cold
    assert [dict(i.case.options)["cache"] for i in old.items()] == [cache for cache, _ in PASSES]
    for flag in (False, None):
        assert plan_from_dict(_version_1(_stored(), flag), tmp_path, resolve_model).scenario is LATENCY
    with pytest.raises(ResultsError, match="cannot be read"):
        plan_from_dict({**block, "scenario": "warp"}, tmp_path, resolve_model)


def test_an_old_plan_file_with_cold_start_true_resumes_as_a_cold_start(tmp_path: Path) -> None:
    out = tmp_path / "old.json"
    results = new_results_file(["infermeter", "bench", "tiny_cnn", "-b", "null", "--cold-start"], {})
    results.extra[PLAN_KEY] = _version_1(_stored(), cold_start=True)
    write_results(out, results)
    proc = run_cli("bench", "--resume", str(out), "--no-history", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "3 of 3 planned case(s) remain" in proc.stderr
    cases = load_json(out)["cases"]
    assert [(c["options"]["cache"], c["options"]["cold.pass"]) for c in cases] == list(PASSES)
    assert all(c["status"] == "ok" and c["loading"]["process_start_s"] > 0 for c in cases)
    assert "cold start: fresh process to first result" in proc.stdout and "P99 ms" not in proc.stdout
    plan = load_json(out)["plan"]  # written back in today's form
    assert (plan["scenario"], plan["version"]) == ("cold_start", 2) and "cold_start" not in plan


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--cold-start", "--no-isolation"], "--cold-start needs a fresh process per run; drop --no-isolation"),
        (["--soak", "20", "--dynamic", "batch=1..2", "--repeat", "2"], "a soak is one long run per case"),
    ],
)
def test_what_a_scenario_cannot_run_with_is_refused(flags: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli("bench", "tiny_cnn", "-b", "null", *flags, "-o", str(out))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not out.exists()
