"""Step 7 of optimize (`--serve`): tune-batching's search (`serve.tune`) on the pick, served from the optimize
folder exactly as `infermeter serve DIR` serves it. The measured policy goes into deploy.json, so that `serve DIR`
and `deploy --target triton` take their batching and instances from it without another command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infermeter.core.errors import InfermeterError
from infermeter.core.extras import SERVE_MODULES, install_line, missing_modules
from infermeter.models.spec import ModelSpec
from infermeter.optimize.pipeline import OptimizeEvent, Run
from infermeter.optimize.request import ServingRequest
from infermeter.optimize.serving import SERVING_FILE, MeasuredPolicy
from infermeter.optimize.steps.fp32 import begin, finish, note, skip
from infermeter.results.records import TunePoint, read_record
from infermeter.results.schema import CaseResult

if TYPE_CHECKING:
    from infermeter.load.tune import BatchPolicy, PolicyResult
    from infermeter.load.tune_race import PickRace

WHY = (
    "a server's throughput and tail latency depend on how its requests are batched and how many model instances "
    "run: each policy is served and loaded at rising concurrency, and the one with the highest throughput whose "
    "P99 (queueing included) meets the SLO is kept"
)


def static_batch_reason(spec: ModelSpec) -> str | None:
    """Why the model's requests cannot be batched by a server (an input with a fixed first dim), else None."""
    fixed = [i for i in spec.inputs if not i.shape or not isinstance(i.shape[0], str)]
    if not fixed:
        return None
    first = fixed[0]
    size = first.shape[0] if first.shape else 1
    return (
        f"the model has a static batch of {size} (input {first.name}: {list(first.shape)}): a server cannot put "
        "requests together, so there is no batching policy to measure and it serves one request at a time; "
        "export the model with a dynamic batch axis to batch it"
    )


def serving_skip_reason(run: Run, pick: CaseResult | None) -> str | None:
    """Why the serving step cannot run on `pick` (None when it can)."""
    if pick is None:
        return "no configuration met the constraints: there is nothing to serve"
    static = static_batch_reason(run.spec)
    if static:
        return static
    if missing_modules(SERVE_MODULES):
        return f"serving needs the serve extra: {install_line('serve')}"
    return None


def step_serving(run: Run, pick: CaseResult | None) -> MeasuredPolicy | None:
    """7. The batching policy for a server, measured on the pick (only with `--serve` / `--slo-p99-ms`)."""
    serving = run.request.serving
    if serving is None:
        return None
    begin(run, "serving", WHY)
    reason = serving_skip_reason(run, pick)
    if reason or pick is None:
        skip(run, "serving", "batching for serving", reason or "no pick")
        finish(run, "serving", "skipped")
        return None
    details = run.journal.details("serving")
    same_search = details.get("request") == serving.to_dict()
    policy = _earlier(run, pick, serving, details.get("policy")) if same_search else None
    if policy is not None:
        note(run, "serving", "resumed: this policy was measured earlier on the same pick and SLO")
    else:
        policy = _search(run, pick, serving)
    if policy is None:
        finish(run, "serving", "failed")
        return None
    details["policy"] = policy.to_dict()
    details["request"] = serving.to_dict()
    note(run, "serving", f"kept {policy.summary()}")
    if policy.check_valid is False:
        text = (
            "the kept policy missed the SLO under Poisson arrivals at 90% of its closed-loop throughput: plan for "
            "less load than that figure, or relax --slo-p99-ms (every point is in serving.json)"
        )
        note(run, "serving", text)
        run.emit(OptimizeEvent("warning", "serving", text))
    finish(run, "serving")
    return policy


def _earlier(run: Run, pick: CaseResult, serving: ServingRequest, data: object) -> MeasuredPolicy | None:
    if not isinstance(data, dict) or not run.path(SERVING_FILE).is_file():
        return None
    try:
        policy = MeasuredPolicy.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None
    return policy if policy.case_id == pick.id and policy.slo_p99_ms == serving.slo_p99_ms else None


def _raced(
    run: Run, results: list[PolicyResult], chosen: PolicyResult | None, model_args: list[str], serving: ServingRequest
) -> PickRace | None:
    """The curves' pick decided against its runner-up on paired rounds (`load.tune_race`), not on curves measured
    minutes apart; None when there is no pick or no runner-up."""
    from infermeter.load.tune_race import race_pick

    if chosen is None:
        return None
    race = race_pick(results, chosen, model_args, serving.slo_p99_ms, max(serving.duration_s / 2, 0.5))
    if race is not None:
        note(run, "serving", race.line())
    return race


def _measured(run: Run, policy: BatchPolicy, model_args: list[str], serving: ServingRequest) -> PolicyResult:
    """One policy's curve (`load.tune.measure_policy`); a server that fails is a result with its error."""
    from infermeter.load.tune import PolicyResult, measure_policy

    run.emit(OptimizeEvent("case", "serving", "load", policy.label()))
    try:
        result = measure_policy(policy, model_args, serving.slo_p99_ms, serving.duration_s, serving.concurrency)
    except InfermeterError as exc:
        result = PolicyResult(policy, error=str(exc))
    note(run, "serving", _point_text(result))
    return result


def _search(run: Run, pick: CaseResult, serving: ServingRequest) -> MeasuredPolicy | None:
    """tune-batching's search and its Poisson check; every point written to serving.json."""
    from infermeter.load.tune import CHECK_MIN_DURATION_S, check_pick, policies, recommend, tuning_results
    from infermeter.results.io import write_results
    from infermeter.results.schema import now_iso

    grid = policies(list(serving.max_batches), list(serving.max_delays_ms), list(serving.workers))
    model_args = [str(run.folder)]  # served as `infermeter serve DIR` serves the pick
    note(run, "serving", f"{len(grid)} policies, each served from {run.folder} with closed-loop load at rising "
         f"concurrency (up to {serving.concurrency}), {serving.duration_s:g} s per point")  # fmt: skip
    estimate_s = _estimate_s(grid, serving, pick)
    over = run.budget.work_reason("the serving step", estimate_s, "points x duration, plus a server start per policy")
    if over:  # asked for by name: run anyway, but say that it overruns
        note(run, "serving", f"runs past the budget: {over}")
        run.emit(OptimizeEvent("warning", "serving", f"runs past the budget: {over}"))
    started = now_iso()
    results = [_measured(run, policy, model_args, serving) for policy in grid]
    chosen = recommend(results)
    race = _raced(run, results, chosen, model_args, serving)
    chosen = race.pick if race is not None else chosen
    tuned = tuning_results(results, chosen, pick.model, pick.backend, pick.precision, started, race)
    write_results(run.path(SERVING_FILE), tuned)
    if chosen is None or chosen.best is None or chosen.best.stats is None:
        skip(run, "serving", "batching policy", f"no policy met the SLO P99 <= {serving.slo_p99_ms:g} ms even at "
             "concurrency 1: relax --slo-p99-ms (every point is in serving.json)")  # fmt: skip
        return None
    check = check_pick(chosen, model_args, serving.slo_p99_ms, max(serving.duration_s, CHECK_MIN_DURATION_S))
    best, stats = chosen.best, chosen.best.stats
    marked = next(c.id for c in tuned.cases if (point := read_record(c, TunePoint)) is not None and point.pick)
    return MeasuredPolicy(
        case_id=pick.id,
        max_batch=chosen.policy.max_batch,
        preferred_batch_sizes=(chosen.policy.max_batch,),
        max_delay_ms=chosen.policy.max_delay_ms,
        workers=chosen.policy.workers,
        throughput_per_s=best.throughput,
        p50_ms=stats.p50,
        p99_ms=stats.p99,
        concurrency=best.run.concurrency or 1,
        slo_p99_ms=serving.slo_p99_ms,
        policies_tried=len(grid),
        load_file=SERVING_FILE,
        load_case_id=marked,
        check_valid=check.valid,
        check_reasons=tuple(check.reasons),
    )


def _estimate_s(grid: list[BatchPolicy], serving: ServingRequest, pick: CaseResult) -> float:
    """Seconds the search should take: each policy's points (and their 0.2 s warm-up) and its server's start,
    taken as the pick's load time plus a second for the interpreter."""
    from infermeter.load.tune import CHECK_MIN_DURATION_S, concurrency_levels

    points = sum(len(concurrency_levels(policy, serving.concurrency)) for policy in grid)
    starts = (len(grid) + 1) * ((pick.loading.load_s or 0.0) + 1.0)
    return points * (serving.duration_s + 0.2) + starts + max(serving.duration_s, CHECK_MIN_DURATION_S)


def _point_text(result: PolicyResult) -> str:
    label = result.policy.label()
    if result.error:
        return f"{label}: failed ({result.error})"
    best = result.best
    if best is None or best.stats is None:
        return f"{label}: no point within the SLO"
    return (
        f"{label}: best {best.throughput:,.1f} inferences/s at {best.run.concurrency} in flight, "
        f"P99 {best.stats.p99:.3g} ms"
    )
