"""What the engines said while a case loaded and ran its first inferences (`engine_log` field): each distinct
warning once, with how often it came, every distinct full text (capped) and the remedy where one is known. Written
by the measurement core (`backends.engine_log`), shown under the bench table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from infermeter.results.records.base import Record, known_fields, read_record
from infermeter.results.schema import CaseResult


@dataclass(frozen=True)
class EngineWarning:
    """One distinct warning: the engine that gave it, its text with names and numbers stood for by `…` (`message`),
    how many times it came, its distinct full texts, the remedy where known, and whether it says the engine could
    not optimize part of the model (`unoptimized`)."""

    engine: str
    message: str
    count: int
    texts: list[str] = field(default_factory=list)
    remedy: str = ""
    unoptimized: bool = False

    def line(self) -> str:
        """`onnxruntime ×312: Removing initializer '…'. It is not used by any node … → remedy`."""
        remedy = f" → {self.remedy}" if self.remedy else ""
        return f"{self.engine} ×{self.count}: {self.texts[0] if len(self.texts) == 1 else self.message}{remedy}"


@dataclass(frozen=True)
class EngineLog(Record):
    """The distinct engine warnings of a case, in the order they first came, and the log lines that were not
    warnings of a known engine's format (kept, capped, for a reader)."""

    KEY: ClassVar[str] = "engine_log"

    warnings: list[EngineWarning] = field(default_factory=list)
    other_lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "warnings": [dict(vars(w)) for w in self.warnings],
            "other_lines": list(self.other_lines),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        fields = known_fields(cls, data)
        warnings = [EngineWarning(**known_fields(EngineWarning, w)) for w in fields.get("warnings", [])]
        return cls(warnings, [str(line) for line in fields.get("other_lines", [])])


def merge_warnings(logs: Sequence[EngineLog]) -> list[EngineWarning]:
    """The warnings of `logs` merged: one per engine and message shape, counts added, full texts joined."""
    merged: dict[tuple[str, str], EngineWarning] = {}
    for log in logs:
        for warning in log.warnings:
            key = (warning.engine, warning.message)
            seen = merged.get(key)
            if seen is None:
                merged[key] = warning
                continue
            texts = list(dict.fromkeys([*seen.texts, *warning.texts]))
            merged[key] = EngineWarning(seen.engine, seen.message, seen.count + warning.count, texts, seen.remedy,
                                        seen.unoptimized)  # fmt: skip
    return list(merged.values())


def engine_log_footnotes(cases: Sequence[CaseResult]) -> list[str]:
    """One line per distinct engine warning over `cases` (counts added up), for under the bench table."""
    logs = [log for case in cases if (log := read_record(case, EngineLog)) is not None]
    return [f"engine warning: {warning.line()}" for warning in merge_warnings(logs)]
