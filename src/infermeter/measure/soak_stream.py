"""The soak's request stream: seeded, the same for every case of a run, drawn from a distribution of sizes.

A stream is the sizes of the `--dynamic` dims for each request, in three phases: warm-up, exploration (a seeded
draw, completed so that every size, or every bucket when `--buckets` pads them, is fed at least once), and a
replay of the exploration's sequence (repeated until the request or time budget ends). Growth in the replay is
judged as growth: every shape it feeds has been seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infermeter.core.errors import UsageError

LENGTHS = ("uniform", "zipf", "lognormal", "data")
WARMUP_REQUESTS = 50
# With only --soak-minutes: how long the exploration's draw is before it is completed to cover every size.
DEFAULT_EXPLORATION = 2000

Sizes = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class SoakStream:
    """The dims' names and each request's sizes: `warmup` then `exploration` (replayed cyclically after it)."""

    names: tuple[str, ...]
    warmup: tuple[tuple[int, ...], ...]
    exploration: tuple[tuple[int, ...], ...]

    def request(self, index: int) -> tuple[int, ...]:
        """The sizes of request `index` (0-based), whatever its phase."""
        if index < len(self.warmup):
            return self.warmup[index]
        return self.exploration[(index - len(self.warmup)) % len(self.exploration)]

    def phase(self, index: int) -> str:
        """`warmup`, `exploration` or `replay`."""
        if index < len(self.warmup):
            return "warmup"
        return "exploration" if index < len(self.warmup) + len(self.exploration) else "replay"

    def distinct(self) -> set[tuple[int, ...]]:
        """Every combination of sizes the stream asks for."""
        return set(self.warmup) | set(self.exploration)

    def padded(self, buckets: Sizes) -> set[tuple[int, ...]]:
        """Every combination of sizes the engine runs once `buckets` pad the requested ones."""
        by_name = dict(buckets)
        return {
            tuple(bucket_of(size, by_name.get(name, ())) for name, size in zip(self.names, sizes, strict=True))
            for sizes in self.distinct()
        }


def bucket_of(size: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds `size` (the size itself when there are no buckets)."""
    if not buckets:
        return size
    fitting = [b for b in sorted(buckets) if b >= size]
    if not fitting:
        raise UsageError(f"--buckets: size {size} exceeds the largest bucket {max(buckets)}")
    return fitting[0]


def _weights(sizes: Sequence[int], lengths: str, data_lengths: Sequence[int]) -> np.ndarray:
    count = len(sizes)
    if lengths == "uniform":
        weights = np.ones(count)
    elif lengths == "zipf":  # short requests common, long ones rare: p ∝ 1/rank
        weights = 1.0 / np.arange(1, count + 1)
    elif lengths == "lognormal":  # around the range's geometric middle, a chat-like spread
        logs = np.log(np.asarray(sizes, float))
        middle, spread = logs.mean(), max(logs.std(), 1e-9)
        weights = np.exp(-0.5 * ((logs - middle) / spread) ** 2)
    elif lengths == "data":
        if not data_lengths:
            raise UsageError("--soak-lengths data needs --data whose samples have lengths in the --dynamic range")
        ordered = np.asarray(sizes)
        # Each length found in the data, at the nearest size of the range.
        found = ordered[np.abs(ordered[None, :] - np.asarray(data_lengths)[:, None]).argmin(axis=1)]
        weights = np.asarray([np.count_nonzero(found == s) for s in sizes], float)
    else:
        raise UsageError(f"--soak-lengths {lengths!r}: use one of {', '.join(LENGTHS)}")
    return weights / weights.sum()


def soak_stream(
    dynamic: Sizes,
    buckets: Sizes,
    requests: int,
    lengths: str = "uniform",
    seed: int = 0,
    data_lengths: Sequence[int] = (),
    warmup: int = WARMUP_REQUESTS,
) -> SoakStream:
    """The stream for `requests` requests (0: sized for a time-bounded soak): a seeded warm-up, then an exploration
    of about half what is left, completed with one request per size or bucket not drawn yet (shuffled in)."""
    if not dynamic:
        raise UsageError("--soak needs --dynamic: the sizes a symbolic dim takes, e.g. --dynamic seq=8..512")
    names = tuple(name for name, _ in dynamic)
    rng = np.random.default_rng(seed)
    probabilities = [_weights(sizes, lengths, data_lengths) for _, sizes in dynamic]

    def draw(count: int) -> list[tuple[int, ...]]:
        columns = [
            rng.choice(np.asarray(sizes), count, p=p) for (_, sizes), p in zip(dynamic, probabilities, strict=True)
        ]
        return [tuple(int(c[i]) for c in columns) for i in range(count)]

    warm = draw(min(warmup, max(requests // 10, 1)) if requests else warmup)
    target = max((requests - len(warm)) // 2, 1) if requests else DEFAULT_EXPLORATION
    explore = draw(target)
    bucket_map = dict(buckets)
    # Complete the exploration: every fed size of every dim (its bucket, when padded) at least once.
    for axis, (name, sizes) in enumerate(dynamic):
        fed = {bucket_of(row[axis], bucket_map.get(name, ())) for row in explore}
        for size in sizes:
            key = bucket_of(size, bucket_map.get(name, ()))
            if key not in fed:
                fed.add(key)
                row = list(explore[int(rng.integers(len(explore)))])
                row[axis] = size
                explore.insert(int(rng.integers(len(explore) + 1)), tuple(row))
    return SoakStream(names, tuple(warm), tuple(explore))
