"""The build stage (issue 15 item 3): an artifact built once per key in a worker of its own, before the cases; cached,
recorded apart from load; a failed, crashed or hung build fails only the cases that needed it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from infermeter.build.case_build import build_artifact
from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.plan import PlanItem
from infermeter.measure.sweep import run_sweep
from infermeter.models.resolve import resolve_model
from infermeter.results.artifact import Artifact
from infermeter.results.schema import CaseResult, ResultsFile, case_from_dict, case_to_dict

FAST = MeasureSettings(warmup_iterations=1, min_iterations=5, min_time_s=0.05, max_time_s=1.0, target_ci=0.0)


def _case(batch: int = 1, settings: MeasureSettings = FAST, **options: str) -> Case:
    pairs = tuple(sorted({"null.build_s": "0.3", **options}.items()))
    return Case("tiny_cnn", "null", batch=batch, options=pairs, settings=settings)


def _sweep(*cases: Case, build_first: bool = True) -> list[CaseResult]:
    spec = resolve_model("tiny_cnn")
    plan = [PlanItem(spec, (case,)) for case in cases]
    results = run_sweep(plan, ResultsFile("now", {}), None, build_first=build_first)
    return sorted(results.cases, key=lambda r: [c.id for c in cases].index(r.id))


def test_cases_sharing_a_key_share_one_build_recorded_apart_from_load(cache_dir: Path) -> None:
    # Latency is not part of the null build's key: both cases load the same artifact.
    first, second = _sweep(_case(**{"null.latency_ms": "1"}), _case(**{"null.latency_ms": "2"}))
    assert first.status == second.status == "ok"
    assert first.loading.build is not None and second.loading.build is not None
    assert first.loading.build.cache == "built" and first.loading.build.built_here_s >= 0.3
    assert second.loading.build.cache == "hit" and second.loading.build.built_here_s == 0.0
    assert first.loading.build.path == second.loading.build.path and first.loading.build.build_phases_s == {
        "compile_s": 0.3
    }
    assert first.loading.load_s is not None and first.loading.load_s < 0.3  # the build is not part of the load
    # A later sweep finds the artifact in the cache and starts no build.
    (again,) = _sweep(_case(**{"null.latency_ms": "1"}))
    assert again.loading.build is not None and again.loading.build.cache == "hit" and again.loading.build.build_s == 0.3


def test_a_crashed_or_failed_build_fails_its_case_and_the_sweep_goes_on(cache_dir: Path) -> None:
    crashed, failed, fine = _sweep(_case(2, **{"null.crash": "build"}), _case(3, **{"null.fail": "build"}), _case(4))
    assert crashed.status == "crashed" and (crashed.error or "").startswith("build: the worker process was killed")
    assert failed.status == "failed" and "failure requested with null.fail" in (failed.error or "")
    assert fine.status == "ok" and fine.loading.build is not None


def test_a_hung_build_is_stopped_by_its_own_timeout(cache_dir: Path) -> None:
    settings = replace(FAST, build_timeout_s=3.0)
    (hung,) = _sweep(_case(5, settings, **{"null.hang": "build"}))
    assert hung.status == "timeout" and "--build-timeout 3 s" in (hung.error or "")


def test_cache_off_builds_in_the_case_worker_and_leaves_nothing(cache_dir: Path, tmp_path: Path) -> None:
    before = set(Path(cache_dir).glob("build-null/*"))
    (result,) = _sweep(_case(6, cache="off"))
    assert result.status == "ok" and result.loading.build is not None and result.loading.build.cache == "off"
    assert not Path(result.loading.build.path).exists()  # the private folder went with the case
    assert set(Path(cache_dir).glob("build-null/*")) == before  # nothing written to the cache


def test_cold_start_sweeps_build_in_each_worker(cache_dir: Path) -> None:
    first, second = _sweep(_case(7), _case(7, **{"null.latency_ms": "2"}), build_first=False)
    assert first.loading.build is not None and first.loading.build.cache == "built"
    assert second.loading.build is not None and second.loading.build.cache == "hit"


def test_a_corrupt_cache_entry_is_rebuilt(cache_dir: Path) -> None:
    spec, case = resolve_model("tiny_cnn"), _case(8)
    built = build_artifact(spec, case)
    assert built is not None
    Path(built.path).write_text("truncated")
    rebuilt = build_artifact(spec, case)
    assert rebuilt is not None and rebuilt.cache == "rebuilt"
    assert Path(rebuilt.path).read_text().startswith("null artifact")


def test_the_build_record_round_trips_through_the_results_file(cache_dir: Path) -> None:
    (result,) = _sweep(_case(9))
    again = case_from_dict(json.loads(json.dumps(case_to_dict(result))))
    assert isinstance(again.loading.build, Artifact) and again.loading.build == result.loading.build
    unbuilt = case_to_dict(result)
    del unbuilt["loading"]["build"]
    assert case_from_dict(unbuilt).loading.build is None
