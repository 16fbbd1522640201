"""A result keeps at most MAX_STORED_SAMPLES of its samples, evenly thinned in time order; its statistics use all."""

from __future__ import annotations

from infermeter.measure.case_figures import MAX_STORED_SAMPLES, stored_samples


def test_samples_are_thinned_evenly_beyond_the_cap() -> None:
    few = [float(i) for i in range(100)]
    assert stored_samples(few) is few
    many = [float(i) for i in range(MAX_STORED_SAMPLES * 5 + 3)]
    kept = stored_samples(many)
    assert MAX_STORED_SAMPLES // 2 < len(kept) <= MAX_STORED_SAMPLES
    assert kept[0] == 0.0 and kept[1] - kept[0] == 6.0 and kept == sorted(kept)  # every 6th, in time order
