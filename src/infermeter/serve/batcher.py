"""The dynamic batcher: requests queue; a worker thread takes a batch as soon as `max_batch` rows wait or the
oldest request has waited `max_delay_ms`, runs it as one inference and splits the outputs back.

Workers pull batches when they are free (Triton's dynamic batcher forms a batch when a model instance is
available), so one slow batch never blocks another worker. Requests only batch with requests of the same
signature (same non-batch shapes and dtypes), oldest first. Inference runs in the worker threads, never on the
event loop, so the HTTP server stays responsive while a batch computes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import KW_ONLY, dataclass, field

import numpy as np

# Runs one batch on worker `index`: concatenated feeds in, outputs (batch rows first) out.
BatchRunner = Callable[[int, dict[str, np.ndarray]], list[np.ndarray]]


class QueueFull(Exception):
    """The queue holds `max_queue` requests already: the caller answers 503 at once."""


class ShuttingDown(Exception):
    """The batcher no longer accepts requests (graceful shutdown in progress)."""


class BatchFailed(Exception):
    """The backend raised while running the batch this request was part of."""


@dataclass
class BatchStats:
    """What one batch did, handed to the metrics observer."""

    rows: int
    requests: int
    _: KW_ONLY  # the rest by keyword
    queue_s: list[float]
    compute_s: float
    failed: bool
    # The parts of compute_s (Triton's compute_input / compute_infer / compute_output): concatenating the
    # requests' feeds, the backend run, splitting the outputs back.
    input_s: float = 0.0
    infer_s: float = 0.0
    output_s: float = 0.0


@dataclass
class _Pending:
    feeds: dict[str, np.ndarray]
    rows: int
    signature: Hashable
    enqueued: float
    finish: Callable[[list[np.ndarray] | None, BaseException | None], None]
    taken: bool = field(default=False)


class DynamicBatcher:
    """A queue plus `workers` threads that each run batches through `runner(worker_index, feeds)`."""

    def __init__(
        self,
        runner: BatchRunner,
        max_batch: int,
        max_delay_ms: float,
        max_queue: int,
        workers: int = 1,
        observer: Callable[[BatchStats], None] | None = None,
        unbatched: frozenset[str] = frozenset(),
    ) -> None:
        if max_batch < 1 or workers < 1 or max_queue < 1 or max_delay_ms < 0:
            raise ValueError("max_batch, workers and max_queue must be positive and max_delay_ms non-negative")
        self.max_batch = max_batch
        self.max_delay_s = max_delay_ms / 1e3
        self.max_queue = max_queue
        self._runner = runner
        self._observer = observer
        # Inputs without a batch axis (a control vector, a scalar): one value per batch, which requests batched
        # together share (their signatures hold the value), so they are passed as they are, not concatenated.
        self._unbatched = unbatched
        self._queue: deque[_Pending] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"infermeter-batch-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def queued(self) -> int:
        """Requests waiting (not yet taken by a worker)."""
        return len(self._queue)

    def submit(
        self,
        feeds: dict[str, np.ndarray],
        rows: int,
        signature: Hashable,
        finish: Callable[[list[np.ndarray] | None, BaseException | None], None],
    ) -> None:
        """Queue a request of `rows` batch rows; `finish(outputs, error)` is called once, from a worker thread.

        Raises QueueFull or ShuttingDown at once (the request was not accepted)."""
        if rows > self.max_batch:
            raise ValueError(f"a request of {rows} rows exceeds max_batch {self.max_batch}")
        with self._cond:
            if self._stopping:
                raise ShuttingDown("the server is shutting down")
            if len(self._queue) >= self.max_queue:
                raise QueueFull(f"queue full ({self.max_queue} requests waiting); retry later")
            self._queue.append(_Pending(feeds, rows, signature, time.perf_counter(), finish))
            self._cond.notify_all()

    async def infer(self, feeds: dict[str, np.ndarray], rows: int, signature: Hashable) -> list[np.ndarray]:
        """Queue a request and wait for its outputs (from the event loop)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[np.ndarray]] = loop.create_future()

        def finish(outputs: list[np.ndarray] | None, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(_settle, future, outputs, error)

        self.submit(feeds, rows, signature, finish)
        return await future

    def _compatible_rows(self, head: _Pending) -> int:
        rows = 0
        for item in self._queue:
            if item.signature == head.signature:
                rows += item.rows
                if rows >= self.max_batch:
                    break
        return rows

    def _take_batch(self) -> list[_Pending] | None:
        """Wait (holding the condition) until a batch is due, then remove and return it; None: stop."""
        while True:
            while not self._queue:
                if self._stopping:
                    return None
                self._cond.wait()
            head = self._queue[0]
            due = head.enqueued + self.max_delay_s
            while not self._stopping and self._queue and self._queue[0] is head:
                if self._compatible_rows(head) >= self.max_batch:
                    break
                remaining = due - time.perf_counter()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            if not self._queue or self._queue[0] is not head:
                continue  # another worker took the head while we waited: look again
            batch: list[_Pending] = []
            rows = 0
            for item in self._queue:
                if item.signature == head.signature and rows + item.rows <= self.max_batch:
                    batch.append(item)
                    rows += item.rows
                    item.taken = True
                    if rows == self.max_batch:
                        break
            self._queue = deque(item for item in self._queue if not item.taken)
            return batch

    def _work(self, index: int) -> None:
        while True:
            with self._cond:
                batch = self._take_batch()
            if batch is None:
                return
            self._run(index, batch)

    def _run(self, index: int, batch: list[_Pending]) -> None:
        started = time.perf_counter()
        queue_s = [started - item.enqueued for item in batch]
        rows = sum(item.rows for item in batch)
        marks = [started]
        try:
            if len(batch) == 1:
                feeds = batch[0].feeds
            else:
                feeds = {
                    name: value if name in self._unbatched else np.concatenate([item.feeds[name] for item in batch])
                    for name, value in batch[0].feeds.items()
                }
            marks.append(time.perf_counter())
            outputs = self._runner(index, feeds)
            marks.append(time.perf_counter())
            pieces = split_outputs(outputs, [item.rows for item in batch])
        except Exception as exc:  # any backend failure fails this batch only; the worker lives on
            error = BatchFailed(f"{type(exc).__name__}: {str(exc).strip() or 'no message'}")
            compute_s = time.perf_counter() - started
            for item in batch:
                item.finish(None, error)
            self._observe(BatchStats(rows, len(batch), queue_s=queue_s, compute_s=compute_s, failed=True))
            return
        ended = time.perf_counter()
        for item, piece in zip(batch, pieces, strict=True):
            item.finish(piece, None)
        input_s, infer_s, output_s = marks[1] - marks[0], marks[2] - marks[1], ended - marks[2]
        self._observe(
            BatchStats(
                rows,
                len(batch),
                queue_s=queue_s,
                compute_s=ended - started,
                failed=False,
                input_s=input_s,
                infer_s=infer_s,
                output_s=output_s,
            )
        )

    def _observe(self, stats: BatchStats) -> None:
        if self._observer is not None:
            self._observer(stats)

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop accepting requests, finish every queued one, and join the workers."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        deadline = time.perf_counter() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.perf_counter()))


def split_outputs(outputs: list[np.ndarray], rows: list[int]) -> list[list[np.ndarray]]:
    """Split batched outputs back per request: outputs whose first axis is the batch are sliced, others
    (no batch axis) are given whole to every request."""
    total = sum(rows)
    pieces: list[list[np.ndarray]] = [[] for _ in rows]
    for output in outputs:
        batched = output.ndim > 0 and output.shape[0] == total
        offset = 0
        for i, count in enumerate(rows):
            pieces[i].append(output[offset : offset + count] if batched else output)
            offset += count
    return pieces


def _settle(
    future: asyncio.Future[list[np.ndarray]], outputs: list[np.ndarray] | None, error: BaseException | None
) -> None:
    if future.done():  # the client went away and the handler was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        assert outputs is not None
        future.set_result(outputs)
