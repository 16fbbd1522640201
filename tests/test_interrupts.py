"""Ctrl-C is held while native code runs in this process, then delivered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from infermeter.cli import app as cli_app
from infermeter.core.interrupts import deferred_interrupts


@pytest.fixture(autouse=True)
def _python_default_handler() -> object:
    """Each test starts from Python's own SIGINT handler, as a program does, whatever an earlier test in this
    process left installed (a full run once left SIG_IGN behind; which test did is not known yet)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_interrupt_inside_the_block_is_raised_when_it_ends() -> None:
    reached_end_of_block = False
    with pytest.raises(KeyboardInterrupt), deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        reached_end_of_block = True  # no KeyboardInterrupt in the middle of the "native" work
    assert reached_end_of_block
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the previous handler is back


def test_no_interrupt_no_exception() -> None:
    with deferred_interrupts():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _swallowed_interrupt() -> None:
    """What Python does with a Ctrl-C landing in one of its own callbacks: "Exception ignored", and on."""

    class Target:
        pass

    def callback(_: object) -> None:
        raise KeyboardInterrupt

    target = Target()
    reference = weakref.ref(target, callback)
    del target  # the callback runs now; its KeyboardInterrupt goes to sys.unraisablehook, not to us
    assert reference() is None


def test_a_command_whose_interrupt_was_swallowed_still_ends_as_interrupted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def command_that_runs_on(**_: object) -> int:
        os.kill(os.getpid(), signal.SIGINT)  # raises KeyboardInterrupt through the CLI's handler ...
        return 0

    def swallowing_command(**kwargs: object) -> int:
        try:
            command_that_runs_on(**kwargs)
        except KeyboardInterrupt:
            _swallowed_interrupt()  # ... which here Python swallows
        return 0

    monkeypatch.setattr(cli_app.app, "main", swallowing_command)
    monkeypatch.setattr(sys, "unraisablehook", lambda _: None)
    with pytest.raises(SystemExit) as exit_info:
        cli_app.main(["env"])
    assert exit_info.value.code == 130
    assert "interrupted" in capsys.readouterr().err


def test_a_swallowed_interrupt_rearms_the_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "unraisablehook", lambda _: None)
    interrupts = cli_app._Interrupts()
    interrupts.install()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    _swallowed_interrupt()
    assert interrupts.pressed and interrupts.presses == 0
    with pytest.raises(KeyboardInterrupt):  # the next Ctrl-C stops the command, not just says "saving"
        os.kill(os.getpid(), signal.SIGINT)


def test_a_command_without_ctrl_c_keeps_its_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_app.app, "main", lambda **_: 0)
    with pytest.raises(SystemExit) as exit_info:
        cli_app.main(["env"])
    assert exit_info.value.code == 0


# A command whose Ctrl-C lands in code a native library runs through PyRun_String (torch's import does, seen as
# `<string>` in the traceback); the command catches the interrupt, as the CLI does.
_PY_RUN_STRING_COMMAND = """
import ctypes, sys
from infermeter.cli import app

def command(**_):
    ctypes.pythonapi.PyRun_SimpleString(b"import os, signal; os.kill(os.getpid(), signal.SIGINT)")
    return 0

app.app.main = command
app.main(["env"])
"""


def test_python_m_exits_130_when_the_interrupt_left_native_run_code(tmp_path: Path) -> None:
    """CPython notes a KeyboardInterrupt leaving PyRun_String as unhandled for good, and `python -m` then ends
    killed by SIGINT (-2) instead of with the command's 130: check ended so 1 time in 3 (its export imports
    torch)."""
    module = tmp_path / "interrupted_in_run_string.py"
    module.write_text(_PY_RUN_STRING_COMMAND)
    done = subprocess.run(
        [sys.executable, "-m", module.stem], cwd=module.parent, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert "interrupted" in done.stderr
