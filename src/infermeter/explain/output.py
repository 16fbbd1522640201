"""Writing an explain record (`-o explain.json`) and the verdict on how many engines profiled: explain needs two,
and says which engines can when fewer did (after the record is written, so nothing measured is lost)."""

from __future__ import annotations

import json
from pathlib import Path

from infermeter.core.errors import UsageError
from infermeter.core.files import write_text_atomically
from infermeter.explain.engines import PROFILERS
from infermeter.results.explain import ExplainRecord


def write_record(record: ExplainRecord, path: Path) -> None:
    """The record at `path` (folders made as needed): a page of the HTML report for `.html`, else JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in (".html", ".htm"):
        from infermeter.report.explain_section import render_explain_page

        write_text_atomically(path, render_explain_page(record))
        return
    write_text_atomically(path, json.dumps(record.to_dict(), indent=2, ensure_ascii=False))


def profilers_here() -> list[str]:
    """The engines with a per-unit profiler that can run here."""
    from infermeter.backends.registry import backend_names, get_backend

    return [
        name
        for name in backend_names()
        if get_backend(name).unit_profiler in PROFILERS and get_backend(name).available() is None
    ]


def check_profiled(record: ExplainRecord) -> None:
    """UsageError (exit 2) when fewer than two engines gave a per-unit profile, naming the engines that can."""
    profiled = record.profiled_engines()
    if len(profiled) >= 2:
        return
    have = ", ".join(profiled) or "none"
    raise UsageError(
        f"explain needs per-unit profiles of two engines; profiled: {have}. Engines that profile here: "
        f"{', '.join(profilers_here())} (torch and torchscript need a model with a PyTorch form)"
    )
