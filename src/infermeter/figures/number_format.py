"""One formatter for the figures every table shows: a missing or undefined figure is an em dash, an infinite one
the infinity sign, the rest by a format spec."""

from __future__ import annotations

import math

MISSING = "—"


def format_number(value: float | None, spec: str = ",.2f") -> str:
    """`value` by `spec` (e.g. ",.1f", ".3g"); None and NaN as "—", ±inf as "∞"/"-∞"."""
    if value is None or math.isnan(value):
        return MISSING
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return format(value, spec)
