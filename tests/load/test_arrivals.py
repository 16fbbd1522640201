"""The one arrivals schedule: Poisson or constant, seeded, by duration or count; bad rates are usage errors."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.core.errors import UsageError
from infermeter.load.arrivals import Arrivals
from infermeter.load.timing import Issue, LagStats


def test_constant_arrivals_are_evenly_spaced_and_poisson_ones_seeded() -> None:
    constant = Arrivals(50.0, "constant").offsets_s(count=10)
    np.testing.assert_allclose(np.diff(constant), 0.02)
    assert constant[0] == pytest.approx(0.02)
    poisson = Arrivals(50.0, "poisson", seed=7).offsets_s(duration_s=2.0)
    assert poisson[-1] < 2.0 and np.all(np.diff(poisson) > 0)
    np.testing.assert_array_equal(poisson, Arrivals(50.0, "poisson", seed=7).offsets_s(duration_s=2.0))
    assert not np.array_equal(poisson[:10], Arrivals(50.0, "poisson", seed=8).offsets_s(count=10))
    assert len(Arrivals(5.0, seed=1).offsets_s(count=16)) == 16


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan")])
def test_a_rate_that_is_not_positive_is_a_usage_error(rate: float) -> None:
    with pytest.raises(UsageError, match="must be positive"):
        Arrivals(rate)
    with pytest.raises(UsageError, match="not one of"):
        Arrivals(1.0, "bursty")


def test_latency_counts_from_the_scheduled_time() -> None:
    issue = Issue(3, scheduled_ns=1_000_000, sent_ns=4_000_000)
    assert issue.lag_ns == 3_000_000
    assert issue.latency_ms(11_000_000) == pytest.approx(10.0)  # not 7 ms, which the send time would give
    lag = LagStats.of([0.0, 1.0, 3.0])
    assert lag is not None and lag.max_ms == 3.0 and lag.p50_ms == 1.0
    assert LagStats.of([]) is None


def test_sweep_levels_are_one_definition_for_both_protocols() -> None:
    from infermeter.load.driver import sweep_steps
    from infermeter.load.levels import doubling_levels, rate_steps

    assert doubling_levels(6) == (1, 2, 4, 6)
    assert sweep_steps(None, 6, 5) == [("offline", 1.0), ("offline", 2.0), ("offline", 4.0), ("offline", 6.0)]
    assert rate_steps(100.0, 4) == (25.0, 50.0, 75.0, 100.0)
    assert sweep_steps(100.0, 16, 4) == [("server", r) for r in (25.0, 50.0, 75.0, 100.0)]
    with pytest.raises(UsageError):
        rate_steps(0.0, 3)
