"""What `infermeter check` checks, from its flags or from the `[tool.infermeter.check]` table of pyproject.toml.

The table holds the same settings as the flags, spelled like them with dashes or underscores:

    [tool.infermeter.check]
    model = "src/mymodel/model.py:build"
    baseline = "git:origin/main"
    backends = ["onnxruntime", "openvino"]
    threshold = "5%"
    min-time = 2.0

Flags given on the command line win over the table; the pytest plugin's keywords win over it too.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, fields, replace
from pathlib import Path
from typing import Any

from infermeter.compare.decision import (
    DEFAULT_BETA,
    DEFAULT_BUDGET_ROUNDS,
    DEFAULT_MIN_ROUNDS,
    DecisionParams,
)
from infermeter.core.errors import UsageError
from infermeter.core.validation import parse_fraction, require_positive, split_values

TABLE = "tool.infermeter.check"


@dataclass(frozen=True)
class CheckConfig:
    """One model's CI check. `baseline` is a model (file, factory, folder) or `git:REV` (the model's own source at
    that revision); None skips the latency gate. `latency_backend` defaults to the first of `backends`.
    `threads` 0 means one per physical core. The latency gate fails when the new model is slower than the baseline
    by `threshold` (a fraction), as decided by the sequential rule (`infermeter.compare.decision`: false alarm `alpha`,
    miss `beta` at the threshold, `same_within` δ₀, at least `rounds` and at most `budget_rounds` rounds), or when
    it cannot decide within the budget."""

    model: str
    baseline: str | None = None
    _: KW_ONLY  # the rest by keyword
    backends: tuple[str, ...] = ("onnxruntime",)
    latency_backend: str | None = None
    threshold: float = 0.05
    alpha: float = 0.01
    beta: float = DEFAULT_BETA
    same_within: float | None = None  # None: a fifth of the threshold
    budget_rounds: int = DEFAULT_BUDGET_ROUNDS
    batch: int = 1
    threads: int = 0
    min_time_s: float = 2.0
    max_time_s: float = 30.0
    rounds: int = DEFAULT_MIN_ROUNDS
    samples: int = 3
    same_outputs: bool = False

    @property
    def gate_backend(self) -> str:
        """The engine the latency is compared on."""
        return self.latency_backend or self.backends[0]

    def check(self) -> CheckConfig:
        """Self, after every value is checked (UsageError naming the setting otherwise)."""
        if not self.model:
            raise UsageError("no model to check: give MODEL, or `model` in [tool.infermeter.check] of pyproject.toml")
        if not self.backends:
            raise UsageError("no engine to check: give -b/--backend, e.g. -b onnxruntime")
        from infermeter.backends.registry import require_known_backends

        require_known_backends((*self.backends, self.gate_backend))
        for value, name in ((self.batch, "batch"), (self.rounds, "rounds"), (self.samples, "samples")):
            require_positive(value, f"--{name}")
        require_positive(self.threads, "--threads", allow_zero=True)
        require_positive(self.min_time_s, "--min-time", allow_zero=True)
        require_positive(self.max_time_s, "--max-time")
        self.decision_params()
        return self

    def decision_params(self) -> DecisionParams:
        """The latency gate's sequential decision, checked (UsageError naming the flag and its accepted range)."""
        params = DecisionParams(
            self.alpha, self.beta, self.threshold, self.same_within, self.rounds, self.budget_rounds
        )
        return params.checked()


# Setting name (as in the table and the flags, dashes as underscores) -> (field, parser).
def _fraction(value: Any, name: str) -> float:
    return parse_fraction(str(value), f"--{name}") if isinstance(value, str) else float(value)


def _backends(value: Any, name: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value)
    return tuple(split_values(str(item) for item in items))


def _number(kind: type) -> Any:
    def parse(value: Any, name: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise UsageError(f"{name} = {value!r} is not a number")
        try:
            return kind(value)
        except ValueError:
            raise UsageError(f"{name} = {value!r} is not a number") from None

    return parse


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{name} = {value!r} must be true or false")
    return value


def _text(value: Any, name: str) -> str:
    return str(value)


_SETTINGS: dict[str, tuple[str, Any]] = {
    "model": ("model", _text),
    "baseline": ("baseline", _text),
    "backends": ("backends", _backends),
    "backend": ("backends", _backends),
    "latency_backend": ("latency_backend", _text),
    "threshold": ("threshold", _fraction),
    "alpha": ("alpha", _number(float)),
    "beta": ("beta", _number(float)),
    "same_within": ("same_within", _fraction),
    "budget_rounds": ("budget_rounds", _number(int)),
    "batch": ("batch", _number(int)),
    "threads": ("threads", _number(int)),
    "min_time": ("min_time_s", _number(float)),
    "max_time": ("max_time_s", _number(float)),
    "rounds": ("rounds", _number(int)),
    "samples": ("samples", _number(int)),
    "same_outputs": ("same_outputs", _flag),
}
_FIELDS = {f.name for f in fields(CheckConfig)}


def read_table(pyproject: Path) -> dict[str, Any]:
    """The `[tool.infermeter.check]` table of `pyproject` ({} when the file or the table is absent)."""
    if not pyproject.is_file():
        return {}
    try:
        data = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{pyproject} is not readable TOML: {exc}") from exc
    table = data.get("tool", {}).get("infermeter", {}).get("check", {})
    if not isinstance(table, dict):
        raise UsageError(f"{pyproject}: [{TABLE}] must be a table")
    return table


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml in `start` or a folder above it."""
    for folder in (start.resolve(), *start.resolve().parents):
        if (folder / "pyproject.toml").is_file():
            return folder / "pyproject.toml"
    return None


def apply_settings(config: CheckConfig, values: Mapping[str, Any], where: str) -> CheckConfig:
    """`config` with `values` (setting name -> value; None values ignored) applied; an unknown setting is a
    UsageError naming `where` it came from."""
    changes: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        name = key.replace("-", "_")
        if name not in _SETTINGS:
            known = ", ".join(sorted(k.replace("_", "-") for k in _SETTINGS))
            raise UsageError(f"{where}: unknown setting {key!r}; the settings are {known}")
        field_name, parse = _SETTINGS[name]
        changes[field_name] = parse(value, key)
    assert set(changes) <= _FIELDS
    return replace(config, **changes)


def anchor_ref(ref: str | None, folder: Path) -> str | None:
    """`ref` with a relative file or folder path taken from `folder` (a module:factory, zoo name or git:REV as
    it is): a path written in pyproject.toml is relative to it, wherever the command runs."""
    if not ref:
        return ref
    target, colon, factory = ref.rpartition(":")
    path, suffix = (target, f":{factory}") if colon and target.lower().endswith(".py") else (ref, "")
    if Path(path).is_absolute():
        return ref
    candidate = folder / path
    if not (suffix or candidate.exists()):
        return ref
    # Shown as written when the command runs in that folder (the usual case), so summaries name `models/m.py`.
    try:
        candidate = candidate.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        candidate = candidate.resolve()
    return f"{candidate}{suffix}"


def config_from_pyproject(pyproject: Path | None, base: CheckConfig | None = None) -> CheckConfig:
    """The table of `pyproject` applied over `base` (default settings with no model); its model and baseline
    paths are taken from the file's folder."""
    config = base or CheckConfig(model="")
    if pyproject is None:
        return config
    table = dict(read_table(pyproject))
    for key in ("model", "baseline"):
        if isinstance(table.get(key), str):
            table[key] = anchor_ref(table[key], pyproject.parent)
    return apply_settings(config, table, f"[{TABLE}] in {pyproject}")
