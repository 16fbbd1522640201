"""Every command of the app is walked: a flag several commands take (the same long name) has the same spellings,
default and help in each, unless a table below says why not. A stale entry in a table (its copies agree now) fails
too, so the tables only shrink. Also: one measurement group builds `MeasureSettings` by keyword."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import click
import pytest

from infermeter.cli.app import app
from infermeter.core.case import MeasureSettings

# Flags whose name is shared but whose meaning is each command's own: not compared.
OWN_MEANING = {
    "--output": "each command writes its own kind of file (results file, model, folder, report)",
    "--batch": "bench and optimize sweep a list; inspect, parity and check take one size; load: rows per request",
    "--threshold": "a gate's smallest slowdown (compare, check), history's flag vs previous runs, quantize's "
    "decision threshold on a probability",
    "--samples": "how many input sets each command's own check judges",
    "--name": "serve: the protocol's model name; deploy: the repository's",
    "--dynamic": "bench: the sizes a dim takes; export: which axes the exported graph declares dynamic",
    "--data": "what the data is for: measured inputs (bench), calibration (quantize), parity's .npz, warm-up (serving)",
    "--precision": "bench sweeps a list; parity sets the tolerance; serving runs one precision",
    "--shape-mode": "bench sweeps a list; parity checks one mode",
    "--atol": "export: plain units; parity: units of each output's max |reference|",
    "--rtol": "export: of the output check; parity: of |reference| per element",
    "--min-cosine": "quantize: the budget of its search; parity: a pass/fail limit per output",
    "--max-accuracy-drop": "advise filters measured results (no limit by default); optimize's budget steers its search",
    "--allocator": "bench sweeps a list of mallocs; serve runs on one",
    "--api-key": "serve: the key it requires; llm load: the key it sends",
}

# Copies that differ from the main one, with the reason. Copies with the same reason form a variant of their own
# and must agree with each other.
CHECK = "check: its defaults come from [tool.infermeter.check] in pyproject.toml (None: the file's or the help's)"
SERVING = "serving (cli-serving's item: one serving group for serve, load and tune-batching)"
QUANTIZE = "quantize (int8-study's file): to take the shared declaration"
LLM_QUANTIZE = "llm quantize: llama.cpp levels"
LLM_BENCH = "llm bench: a generation case times requests (seconds each), not iterations: its own defaults"
LLM_BENCH_FLAGS = (
    "--backend",
    "--option",
    "--threads",
    "--seed",
    "--resume",
    "--warmup",
    "--min-time",
    "--max-time",
    "--target-ci",
    "--rounds",
    "--case-timeout",
    "--prompt-len",
    "--gen-len",
    "--requests",
    "--slo-ttft-ms",
    "--slo-tpot-ms",
)
LLM_LOAD = "llm load: an OpenAI-protocol client (prompts in words, requests per level)"
LLM_LOAD_FLAGS = (
    "--prompt-len",
    "--gen-len",
    "--requests",
    "--seed",
    "--slo-ttft-ms",
    "--slo-tpot-ms",
    "--scenario",  # levels or a doubling sweep, not load's KServe scenarios
    "--concurrency",  # a list of levels, not load's one
    "--model-name",  # sent in each request, not looked up on a KServe server
    "--timeout",  # seconds per request, not load's wait for stragglers
)
VARIANTS: dict[tuple[str, str], str] = {
    **{
        (flag, "check"): CHECK
        for flag in ("--alpha", "--min-time", "--max-time", "--rounds", "--threads", "--beta", "--same-within")
    },
    ("--budget-rounds", "check"): CHECK,
    ("--backend", "check"): CHECK,
    ("--backend", "history"): "history: a filter of the recorded runs, one backend",
    ("--threads", "peak"): "peak: threads of the CPU probes (default one per core)",
    ("--json", "inspect"): "inspect: the whole report as JSON, every node included",
    ("--json", "load"): "load: send requests as JSON tensors (not machine-readable output)",
    ("--seed", "load"): "load: seeds the arrivals as well as the inputs",
    ("--max-accuracy-drop", "advise"): "advise: a filter of measured results",
    **{(flag, "quantize"): QUANTIZE for flag in ("--threads", "--seed", "--input")},
    **{(flag, "llm quantize"): LLM_QUANTIZE for flag in ("--prompt-len", "--gen-len", "--requests")},
    ("--results", "llm quantize"): LLM_QUANTIZE + ": the levels, not the INT8 variants",
    ("--threads", "llm quantize"): LLM_QUANTIZE + ": threads of --compare",
    **{(flag, "llm bench"): LLM_BENCH for flag in LLM_BENCH_FLAGS},
    **{(flag, "llm load"): LLM_LOAD for flag in LLM_LOAD_FLAGS},
    **{
        (flag, cmd): SERVING
        for flag in ("--threads", "--option", "--input", "--buckets")
        for cmd in ("serve", "load", "tune-batching")
    },
    ("--backend", "serve"): SERVING + ": serve's one backend",
    ("--backend", "load"): SERVING + ": load's one backend",
    ("--backend", "tune-batching"): SERVING + ": tune-batching's one backend",
    ("--api-key", "load"): SERVING + ": load's key of the target",
    ("--concurrency", "tune-batching"): SERVING + ": tune-batching's largest concurrency",
    ("--duration", "tune-batching"): SERVING + ": tune-batching's seconds per point",
    **{
        (flag, "tune-batching"): SERVING + ": tune-batching's grid"
        for flag in ("--max-batch", "--max-delay-ms", "--workers")
    },
    ("--slo-p99-ms", "load"): SERVING + ": load's validity check",
    ("--slo-p99-ms", "tune-batching"): SERVING + ": tune-batching's recommendation",
}

# Short flags that stand for another long flag in one command: (short, command) -> reason.
SHORT_VARIANTS = {("-b", "quantize"): QUANTIZE + ": -b is --backends there, -b/--backend everywhere else"}

SHORT_LONG = {"-b": "--backend", "-O": "--option", "-o": "--output"}

# Defaults a command sets on purpose (names and help still agree).
OWN_DEFAULTS = {
    ("--iterations", "optimize"): "optimize measures many candidates within --budget-minutes: shorter cases",
    ("--max-time", "optimize"): "optimize measures many candidates within --budget-minutes: shorter cases",
    ("--min-time", "compare"): "--rerun judges per-round ratios: 2 s per case keeps each round's burst long enough",
    ("--rounds", "compare"): "--rerun's rounds are the sequential decision's: its fewest rounds before a stop",
}


def commands(group: click.Group = app, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    """Every command of the app (sub-groups walked), with its path."""
    for name, command in sorted(group.commands.items()):
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from commands(command, path + " ")
        else:
            yield path, command


def shared_flags() -> dict[str, dict[str, click.Option]]:
    """Long flag -> command -> its option, for every flag (not hidden: a deprecated alias) of 2+ commands."""
    found: dict[str, dict[str, click.Option]] = defaultdict(dict)
    for path, command in commands():
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                found[max(param.opts, key=len)][path] = param
    return {flag: copies for flag, copies in found.items() if len(copies) > 1}


def _form(option: click.Option) -> tuple[object, ...]:
    """What must agree between copies of a flag, but its default: spellings, one value or many, help."""
    return tuple(sorted(option.opts + option.secondary_opts)), option.multiple, option.help


def disagreements() -> dict[tuple[str, str], list[str]]:
    """(flag, variant) -> the commands whose copies of the flag differ, for every flag and variant."""
    out: dict[tuple[str, str], list[str]] = {}
    for flag, copies in shared_flags().items():
        if flag in OWN_MEANING:
            continue
        variants: dict[str, dict[str, click.Option]] = defaultdict(dict)
        for command, option in copies.items():
            variants[VARIANTS.get((flag, command), "")][command] = option
        for variant, options in variants.items():
            defaults = {repr(o.default) for c, o in options.items() if (flag, c) not in OWN_DEFAULTS}
            if len({_form(o) for o in options.values()}) > 1 or len(defaults) > 1:
                out[(flag, variant)] = sorted(options)
    return out


def test_shared_flags_agree_in_name_default_and_help() -> None:
    assert disagreements() == {}


def test_short_flags_mean_one_long_flag() -> None:
    longs: dict[str, set[str]] = defaultdict(set)
    for path, command in commands():
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            long = max(param.opts, key=len)
            for short in (o for o in param.opts if not o.startswith("--")):
                if (short, path) not in SHORT_VARIANTS:
                    longs[short].add(long)
                else:
                    assert long != SHORT_LONG[short], f"{short} of {path} agrees now: drop it from SHORT_VARIANTS"
    assert {short: sorted(names) for short, names in longs.items() if len(names) > 1} == {}


def test_exception_tables_are_not_stale() -> None:
    """An entry whose copy now agrees with the main one (or whose flag is gone) must be removed."""
    flags = shared_flags()
    for flag in OWN_MEANING:
        assert flag in flags, f"{flag}: no longer shared, drop it from OWN_MEANING"
    for (flag, command), reason in VARIANTS.items():
        copies = flags.get(flag, {})
        assert command in copies, f"{flag} of {command}: gone, drop it from VARIANTS"
        main = {(_form(o), repr(o.default)) for c, o in copies.items() if VARIANTS.get((flag, c), "") == ""}
        own = (_form(copies[command]), repr(copies[command].default))
        assert own not in main, f"{flag} of {command} agrees now: drop {reason!r}"
    for flag, command in OWN_DEFAULTS:
        copies = flags[flag]
        others = {repr(o.default) for c, o in copies.items() if (flag, c) not in OWN_DEFAULTS}
        assert repr(copies[command].default) not in others, f"{flag} of {command}: same default now"


@pytest.mark.parametrize("command", ["bench", "optimize", "compare"])
def test_one_measurement_group(command: str) -> None:
    """bench, optimize and compare (--rerun) take the same measurement flags, and the group builds the settings
    by keyword: every flag lands in its own field."""
    from infermeter.cli.options import MeasureFlags

    group = ["--warmup", "--iterations", "--min-time", "--max-time", "--target-ci", "--rounds", "--case-timeout"]
    names = {max(p.opts, key=len) for p in app.commands[command].params if isinstance(p, click.Option)}
    assert set(group) | {"--seed"} <= names
    flags = MeasureFlags(
        warmup=1, iterations=2, min_time=3.0, max_time=4.0, target_ci="5%", rounds=6, case_timeout=7.0, seed=8
    )
    assert flags.settings(input_sets=9) == MeasureSettings(
        warmup_iterations=1,
        min_iterations=2,
        min_time_s=3.0,
        max_time_s=4.0,
        target_ci=0.05,
        rounds=6,
        case_timeout_s=7.0,
        seed=8,
        input_sets=9,
    )


def test_measure_settings_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        MeasureSettings(10, 10)  # type: ignore[misc]


def test_bench_takes_at_most_15_parameters() -> None:
    import inspect

    callback = app.commands["bench"].callback
    assert callback is not None
    assert len(inspect.signature(inspect.unwrap(callback)).parameters) <= 15
