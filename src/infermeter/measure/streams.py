"""Concurrent streams: N inference requests in flight at once, for throughput-oriented settings.

Each stream is a thread with its own runner (`Session.stream_runner`: a separate infer request where the
engine needs one) looping over its own rotation of the prepared inputs. Frameworks release the GIL while
they compute, so the streams really overlap. Per-request latency is timed around run+sync as in the
single-stream loop; aggregate throughput is completed requests × batch / wall time of the timed window.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infermeter.backends.base import Session
from infermeter.core.case import MeasureSettings


@dataclass(frozen=True)
class StreamSamples:
    """Per-request latencies (ns) of every stream, and the wall time of the timed window (ns)."""

    per_stream_ns: list[list[int]]
    wall_ns: int
    stopped_by: str

    @property
    def samples_ns(self) -> list[int]:
        """All requests' latencies, stream after stream."""
        return [s for stream in self.per_stream_ns for s in stream]


def run_streams(
    session: Session, prepared_sets: Sequence[Any], settings: MeasureSettings, streams: int
) -> StreamSamples:
    """Run `streams` concurrent request loops until the stop rule (counted over all streams) is met."""
    runners = [session.stream_runner(i) for i in range(streams)]
    sync = session.sync
    sets = list(prepared_sets)
    for index, runner in enumerate(runners):  # each stream's own request warmed once
        runner(sets[index % len(sets)])
        sync()
    per_stream: list[list[int]] = [[] for _ in range(streams)]
    stop = threading.Event()
    barrier = threading.Barrier(streams + 1)
    errors: list[BaseException] = []

    def loop(index: int) -> None:
        run, out = runners[index], per_stream[index]
        clock = time.perf_counter_ns
        i = index
        barrier.wait()
        try:
            while not stop.is_set():
                feeds = sets[i % len(sets)]
                t0 = clock()
                run(feeds)
                sync()
                out.append(clock() - t0)
                i += 1
        except BaseException as exc:  # surfaced to the caller after the join
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(streams)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter_ns()
    stopped_by = "rule"
    while not stop.is_set():
        time.sleep(0.005)
        elapsed_s = (time.perf_counter_ns() - start) / 1e9
        done = sum(len(s) for s in per_stream)
        if elapsed_s >= settings.max_time_s:
            stopped_by = "rule" if done >= settings.min_iterations and elapsed_s >= settings.min_time_s else "max_time"
            break
        if done >= settings.min_iterations and elapsed_s >= settings.min_time_s:
            break
    stop.set()
    for thread in threads:
        thread.join()
    wall_ns = time.perf_counter_ns() - start
    if errors:
        raise errors[0]
    return StreamSamples(per_stream, wall_ns, stopped_by)
