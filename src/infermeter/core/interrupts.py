"""Ctrl-C held back while native code runs in this process.

A KeyboardInterrupt raised in the middle of torch's exporter, ONNX Runtime's quantizer or a framework's session
set-up unwinds through their native frames and can crash the interpreter (SIGSEGV) before the command saves its
results or exits with 130. Inside `deferred_interrupts()` a Ctrl-C is only noted; it is raised when the block
ends, at a point where unwinding is safe. Isolated workers need none of this: they ignore SIGINT.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT for the duration of the block, then deliver it to the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals
        return
    pending: list[tuple[int, FrameType | None]] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        pending.append((signum, frame))

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            if callable(previous):
                previous(*pending[0])
            else:
                raise KeyboardInterrupt


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like a Ctrl-C so that the same clean-up runs: workers stopped, finished cases kept."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside the block, the first SIGTERM raises Terminated; later ones are ignored while the clean-up it starts
    runs (a second raise there would leave worker processes behind). SIGKILL still stops the process at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = 0

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        if received == 1:
            raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
