"""Backend variants: one backend measured under several configurations in one run (`-b tvm -b tvm:tune_trials=64`,
`-b onnxruntime -b onnxruntime:opt_level=basic`). Each variant is a case of its own (its options are in its id), in
the same comparison group as the plain backend, so the two are timed in interleaved rounds and their speedup is
paired: the honest way to ask "what does this setting buy".

A variant is `NAME:KEY=VALUE[:KEY=VALUE...]`; KEY is one of the backend's declared options, written in full
(`tvm.tune_trials`, `cache`) or without the backend's prefix (`tune_trials`).
"""

from __future__ import annotations

from infermeter.core.errors import UsageError

SEPARATOR = ":"

Pairs = tuple[tuple[str, str], ...]


def base_name(entry: str) -> str:
    """The backend of a variant (`tvm:tune_trials=64` -> `tvm`)."""
    return entry.split(SEPARATOR, 1)[0]


def variant_options(entry: str) -> Pairs:
    """The options a variant sets, with full keys; a UsageError (exit 2) for a key the backend does not declare or
    a setting without `=`. A plain backend name sets none."""
    from infermeter.backends.options import _did_you_mean
    from infermeter.backends.registry import backend_class

    name, *settings = entry.split(SEPARATOR)
    if not settings:
        return ()
    declared = [option.key for option in backend_class(name).options]
    out = []
    for setting in settings:
        key, equals, value = setting.partition("=")
        if not equals or not key:
            raise UsageError(f"-b {entry}: {setting!r} is not KEY=VALUE (a variant is NAME:KEY=VALUE[:KEY=VALUE...])")
        matches = [full for full in declared if full == key or full.endswith("." + key)]
        if len(matches) != 1:
            short = [full.rsplit(".", 1)[-1] for full in declared]
            hint = _did_you_mean(key, short) or f"; its options: {', '.join(declared) or 'none'}"
            raise UsageError(f"-b {entry}: {name} has no option {key!r}{hint} (see `infermeter backends --options`)")
        out.append((matches[0], value))
    return tuple(out)


def variant_label(backend: str, options: dict[str, str], shown: set[str]) -> str:
    """`tvm tune_trials=64`: the backend and those of its options named in `shown` (the ones that tell its
    variants apart), each without the backend's prefix."""
    parts = [f"{key.rsplit('.', 1)[-1]}={options[key]}" for key in sorted(shown) if key in options]
    return " ".join([backend, *parts])
