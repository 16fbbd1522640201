"""What every typed case record shares: where it sits in a case, how it turns into JSON and back, and the two
functions that read and write one (`read_record`, `write_record`).

A record is stored in `CaseResult.extra` in the on-disk form it always had, so files written before records
existed load unchanged and a reader that does not know a record keeps its data. A block record (`KEY`) is one
JSON object under its key (`"parity": {...}`); a flat record (`FLAT`) spreads its fields over the case's top
level (`"flops": ..., "achieved_gflops": ...`), present when its `MARKER` field is.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Self, TypeVar

from infermeter.core.errors import ResultsError
from infermeter.results.schema import CaseResult


class Record:
    """Base of the typed records a case carries beside its core fields (subclasses are dataclasses).

    `to_dict` gives the JSON-ready on-disk form; `from_dict` is its inverse and raises KeyError, TypeError or
    ValueError on data that is not such a record. The defaults suit records of plain fields; records with nested
    records or special values (infinities) override both.
    """

    KEY: ClassVar[str]  # the case field a block record is stored under; a flat record's name in messages
    FLAT: ClassVar[bool] = False
    MARKER: ClassVar[str] = ""  # flat records: the field whose presence means the record is there

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready on-disk form."""
        assert dataclasses.is_dataclass(self)
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of `to_dict`: known fields only (a later version's additions are ignored here, and kept in the
        case's `extra` by the reader)."""
        return cls(**known_fields(cls, data))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The record's field names (for a flat record: the case keys it owns)."""
        assert dataclasses.is_dataclass(cls)
        return tuple(f.name for f in dataclasses.fields(cls))


R = TypeVar("R", bound=Record)


def known_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The entries of `data` that are fields of the dataclass `cls` (what a later version added is left out);
    TypeError when `data` is not a JSON object."""
    if not isinstance(data, dict):
        raise TypeError(f"expected an object, found {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def read_record(case: CaseResult, kind: type[R]) -> R | None:
    """The case's record of this kind, or None when the case does not carry one. ResultsError names the case and
    the field when the stored data is not such a record (a hand-edited or foreign file)."""
    if kind.FLAT:
        data: Any = {k: case.extra[k] for k in kind.field_names() if k in case.extra}
        if kind.MARKER not in data:
            return None
    else:
        data = case.extra.get(kind.KEY)
        if data is None:
            return None
    try:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, found {type(data).__name__}")
        return kind.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultsError(
            f"case {case.id}: its {kind.KEY!r} data is not a valid {kind.__name__} ({type(exc).__name__}: {exc})"
        ) from exc


def write_record(case: CaseResult, record: Record) -> None:
    """Store `record` on the case in its on-disk form, replacing any earlier record of the same kind."""
    if record.FLAT:
        for key in record.field_names():
            case.extra.pop(key, None)
        case.extra.update(record.to_dict())
    else:
        case.extra[record.KEY] = record.to_dict()


def copy_record(source: CaseResult, target: CaseResult, kind: type[Record]) -> bool:
    """Copy the record of this kind from `source` to `target` (the same evidence applies to both); False when
    `source` carries none."""
    record = read_record(source, kind)
    if record is not None:
        write_record(target, record)
    return record is not None


def json_float(value: float | None) -> float | str | None:
    """A float as strict JSON stores it (results files are written with allow_nan=False): infinities and NaN as
    the strings "inf", "-inf", "nan"."""
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def float_from_json(value: Any) -> float | None:
    """Inverse of `json_float`."""
    return None if value is None else float(value)
