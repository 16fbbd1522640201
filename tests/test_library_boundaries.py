"""What the library never does, checked on the source: read the command line (`sys.argv`: the CLI hands the command
in), or start a results file any other way than `machine.environment.new_results_file`."""

from __future__ import annotations

import ast
from pathlib import Path

import infermeter

PACKAGE = Path(infermeter.__file__).parent


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    relative = path.relative_to(PACKAGE).as_posix()
    found = []
    for node in ast.walk(tree):
        in_cli = relative.startswith("cli/")
        if isinstance(node, ast.Attribute) and ast.unparse(node) == "sys.argv" and not in_cli:
            found.append(f"{relative}:{node.lineno}: sys.argv in the library")
        allowed = {"results/schema.py", "machine/environment.py"}
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).split(".")[-1] == "ResultsFile"
            and relative not in allowed
        ):
            found.append(f"{relative}:{node.lineno}: a results file started by hand")
    return found


def test_the_library_never_reads_sys_argv_and_starts_results_files_one_way() -> None:
    found = [offence for path in sorted(PACKAGE.rglob("*.py")) for offence in _offences(path)]
    assert not found, "\n".join(found)
