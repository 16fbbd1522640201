"""Cold start: how long a fresh process takes from nothing to its first result, with and without caches.

For each backend, three fresh worker processes run in order:
  1. `cache=off`: no compiled-artifact cache read or written: the whole conversion/compile path;
  2. `cache=on`, first pass: fills the cache (a miss when the cache was empty);
  3. `cache=on`, second pass: what a restart with a warm cache costs.
Each records process start-up, framework import, conversion, compilation / engine build, session creation and
the first inference apart (`load_phases_s`), then a short steady-state loop so the first inference can be set
against the median. A backend whose artifacts are not cached reports `cache_hit` None.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from infermeter.core.case import MeasureSettings

if TYPE_CHECKING:  # the plan's items are only copied here: the plan's module runs cases, whose scenario is this
    from infermeter.measure.plan import PlanItem

# Fresh processes one after another: never interleaved, and ten samples are enough to set the first against.
COLD_SETTINGS = MeasureSettings(
    warmup_iterations=0, min_iterations=10, min_time_s=0.0, max_time_s=10.0, target_ci=0.0, interleave=False
)
PASSES = (("off", "1"), ("on", "1"), ("on", "2"))


def cold_start_plan(plan: list[PlanItem]) -> list[PlanItem]:
    """The cold-start runs for every (model, backend and its options, precision) of `plan`, at the first batch each
    has: a variant (`-b tvm:tune_trials=16` beside `-b tvm`) gets runs of its own."""
    seen = set()
    out = []
    for item in plan:
        base = item.case
        key = (base.model, base.backend, base.options, base.precision, base.shape_mode)
        if key in seen or len(item.chain) > 1:
            continue
        seen.add(key)
        settings = replace(COLD_SETTINGS, case_timeout_s=base.settings.case_timeout_s, seed=base.settings.seed)
        for cache, run in PASSES:
            options = tuple(sorted({**dict(base.options), "cache": cache, "cold.pass": run}.items()))
            out.append(replace(item, chain=(replace(base, options=options, settings=settings, streams=1),)))
    return out
