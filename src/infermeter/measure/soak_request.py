"""What a soak (`bench --soak`) asks of the run's request: --dynamic sizes to draw from, lengths it knows, one
stream, one long run per case; its cases then run in dynamic mode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from infermeter.core.errors import UsageError
from infermeter.measure.soak_stream import LENGTHS

if TYPE_CHECKING:
    from infermeter.measure.request import BenchRequest


def soak_request(request: BenchRequest, name: Callable[[str], str]) -> BenchRequest:
    """`request` as a soak runs it (dynamic mode, batch 1 unless given), checked: UsageError naming a value as
    `name` spells it. A request that does not soak is returned as it is."""
    settings = request.settings
    if not settings.soaking:
        return request
    if not request.dynamic:
        raise UsageError(f"a soak needs {name('dynamic')}: the sizes its requests draw from, e.g. seq=8..512")
    if settings.soak_lengths not in LENGTHS:
        raise UsageError(f"soak lengths {settings.soak_lengths!r}: use one of {', '.join(LENGTHS)}")
    if settings.soak_lengths == "data" and request.data is None:
        raise UsageError(f"soak lengths `data` draws the lengths found in {name('data')}: give it")
    if request.streams != (1,):
        raise UsageError(f"a soak feeds one request at a time: drop {name('streams')}")
    if settings.repeat > 1:
        raise UsageError(f"a soak is one long run per case: drop {name('repeat')} or {name('soak_requests')}")
    return replace(request, shape_mode=("dynamic",), batch=request.batch or (1,))
