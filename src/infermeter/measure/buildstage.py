"""The build stage of a sweep: every artifact its cases need, each artifact key built once, before any case runs.

A build runs in its own worker process (`measure.worker.build_isolated`) with its own timeout, so a compiler's
crash or hang fails the cases that needed that artifact and nothing else; an artifact already in the cache is
taken without starting anything. Cases with `cache=off` (a cold start's first pass) build in their own worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from infermeter.backends.options import CACHE
from infermeter.build.case_build import (
    BuildFailure,
    BuildOutcome,
    build_artifact,
    build_key,
    cached_artifact,
    key_digest,
)
from infermeter.core.case import Case
from infermeter.core.errors import describe_exception, failure_status
from infermeter.measure.plan import PlanItem
from infermeter.measure.worker import build_isolated, unavailable_reason
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, CacheState

BuildPhase = Callable[[PlanItem, Case, str], None]


def _build_one(spec: ModelSpec, case: Case, isolate: bool, on_phase: Callable[[str], None]) -> BuildOutcome:
    if not isolate:
        on_phase("building")
        try:
            artifact = build_artifact(spec, case)
        except Exception as exc:
            return BuildFailure(failure_status(exc), describe_exception(exc))
        assert artifact is not None  # build_key said there is something to build
        return artifact
    return build_isolated(spec, case, on_phase)


def _first_runnable(item: PlanItem) -> Case | None:
    """The case of a fallback chain that will run first: the first one available here (later ones build in
    their own worker if they ever run)."""
    return next((case for case in item.chain if unavailable_reason(item.spec, case) is None), None)


def run_builds(items: Sequence[PlanItem], isolate: bool, on_phase: BuildPhase) -> dict[str, BuildOutcome]:
    """The artifact (or the build's failure) of every case of `items` that has something to build, by case id.

    Cases sharing an artifact key share one build; the first to use a fresh build records it as `built` with its
    seconds, the others as a `hit` (they reused it)."""
    outcomes: dict[str, BuildOutcome] = {}
    by_key: dict[str, BuildOutcome] = {}
    for item in items:
        case = _first_runnable(item)
        if case is None or not CACHE.value(case):
            continue
        try:
            key = build_key(item.spec, case)
        except Exception as exc:  # the model's ONNX export failed: the case reports it as its own failure
            outcomes[case.id] = BuildFailure("failed", describe_exception(exc))
            continue
        if key is None:
            continue
        digest = key_digest(key)
        if digest in by_key:
            earlier = by_key[digest]
            outcomes[case.id] = (
                dataclasses.replace(earlier, cache=CacheState.HIT.value, built_here_s=0.0)
                if isinstance(earlier, Artifact)
                else earlier
            )
            continue

        def phase(name: str, it: PlanItem = item, c: Case = case) -> None:
            on_phase(it, c, name)

        by_key[digest] = cached_artifact(case, key) or _build_one(item.spec, case, isolate, phase)
        outcomes[case.id] = by_key[digest]
    return outcomes
