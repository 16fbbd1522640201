"""Kept for code that imports `infermeter.results.records.int8`: the module is `results.records.int8_run` (the
`Int8Run` record of a case at `--precision int8`)."""

from infermeter.results.records.int8_run import (
    GIVEN,
    Int8Run,
    LayerMix,
    LayerProfile,
    LayerTime,
    NodeGroup,
    why_int8,
)

__all__ = ["GIVEN", "Int8Run", "LayerMix", "LayerProfile", "LayerTime", "NodeGroup", "why_int8"]
