"""The story of an optimize run, kept in the results file (`extra["optimize"]`) so that it is saved with every
case, read back by a resumed run, and told by the report: each step with what it did and why, what it skipped
and why, the cases it measured, the artifacts it wrote and the final advice."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from infermeter.results.schema import CaseResult, ResultsFile

JOURNAL_KEY = "optimize"
JOURNAL_VERSION = 1
STEP_STATUSES = ("running", "done", "skipped", "failed")


@dataclass
class Journal:
    """A view over `results.extra["optimize"]` (plain JSON data, mutated in place)."""

    results: ResultsFile

    @property
    def data(self) -> dict[str, Any]:
        """The raw journal dict."""
        data: dict[str, Any] = self.results.extra.setdefault(JOURNAL_KEY, {"version": JOURNAL_VERSION})
        data.setdefault("steps", [])
        data.setdefault("artifacts", {})
        return data

    def step(self, key: str) -> dict[str, Any] | None:
        """The record of step `key`, or None when it never started."""
        return next((s for s in self.data["steps"] if s["key"] == key), None)

    def begin(self, key: str, title: str, why: str) -> dict[str, Any]:
        """Start (or restart, on resume) step `key`: its notes and skips are rewritten, its cases kept."""
        record = self.step(key)
        if record is None:
            record = {"key": key, "title": title, "case_ids": [], "details": {}}
            self.data["steps"].append(record)
        previous = record.get("status")
        record.update(
            {"title": title, "why": why, "status": "running", "notes": [], "skipped": [], "started": time.time()}
        )
        record["resumed"] = previous is not None
        return record

    def finish(self, key: str, status: str = "done") -> None:
        """Close step `key` with `status` (done, skipped, failed) and its duration."""
        record = self._require(key)
        record["status"] = status
        record["seconds"] = round(time.time() - float(record.get("started", time.time())), 3)

    def note(self, key: str, text: str) -> None:
        """A fact about step `key` a reader needs (what was done, a decision and its reason)."""
        self._require(key)["notes"].append(text)

    def skip(self, key: str, what: str, reason: str) -> None:
        """Something step `key` did not try, and why."""
        self._require(key)["skipped"].append({"what": what, "reason": reason})

    def add_case(self, key: str, case_id: str) -> None:
        """Case `case_id` belongs to step `key` (once)."""
        ids = self._require(key)["case_ids"]
        if case_id not in ids:
            ids.append(case_id)

    def details(self, key: str) -> dict[str, Any]:
        """Free-form JSON details of step `key` (export checks, quantization accuracy, the advice...)."""
        details: dict[str, Any] = self._require(key).setdefault("details", {})
        return details

    def case(self, case_id: str) -> CaseResult | None:
        """The measured case `case_id` of the results file, or None."""
        return next((c for c in self.results.cases if c.id == case_id), None)

    def step_cases(self, key: str) -> list[CaseResult]:
        """The cases of step `key`, in the order they were added."""
        record = self.step(key)
        if record is None:
            return []
        found = (self.case(case_id) for case_id in record["case_ids"])
        return [c for c in found if c is not None]

    def all_cases(self) -> list[CaseResult]:
        """Every case any step measured (each once)."""
        ids = {case_id for step in self.data["steps"] for case_id in step["case_ids"]}
        return [c for c in self.results.cases if c.id in ids]

    def _require(self, key: str) -> dict[str, Any]:
        record = self.step(key)
        if record is None:
            raise KeyError(f"step {key!r} has not begun")
        return record
