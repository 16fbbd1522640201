"""The docs stay true on any machine: no absolute path of the machine they were written on (a checkout under /work,
a home folder, a temporary folder) in docs/ or docs/data/. A path is written relative to the repository, or with
a placeholder (`~/`, `<workdir>/`, `<tmp>/`)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
MACHINE_PATH = re.compile(r"(?<![\w.<>~-])/(?:work|root|home|tmp)/[\w.-]+")


def machine_paths(text: str) -> list[str]:
    """The absolute machine paths in `text`."""
    return MACHINE_PATH.findall(text)


def test_no_absolute_machine_path_in_the_docs_or_their_data() -> None:
    found = {}
    for path in sorted(DOCS.rglob("*")):
        if path.is_file() and path.suffix in {".md", ".json", ".txt", ".csv", ".jsonl"}:
            hits = machine_paths(path.read_text(errors="replace"))
            if hits:
                found[str(path.relative_to(DOCS))] = hits[:3]
    assert not found, f"absolute machine paths (write them relative, or as ~/, <workdir>/, <tmp>/): {found}"


def test_the_check_sees_a_machine_path_and_passes_placeholders() -> None:
    assert machine_paths("results in /work/main/docs/x.json and /tmp/corpus/a.onnx") == ["/work/main", "/tmp/corpus"]
    assert machine_paths("~/.cache/infermeter, <workdir>/ove, <tmp>/corpus, docs/data/x.json, http://h/tmp/x") == []
