"""Ctrl-C is held while native code runs in this process, then delivered."""

from __future__ import annotations

import os
import signal

import pytest

from infermeter.interrupts import deferred_interrupts


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
