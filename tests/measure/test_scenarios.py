"""A case's scenario, chosen once from its settings (measure.scenarios): what it runs and how it may be grouped."""

from __future__ import annotations

from infermeter.core.case import MeasureSettings
from infermeter.measure.scenarios import LATENCY, SOAK, scenario_of
from infermeter.measure.shapes import EVERY_SIZE


def test_a_soak_by_requests_or_minutes_is_the_soak_scenario_and_the_rest_latency() -> None:
    assert scenario_of(MeasureSettings()) is LATENCY
    assert scenario_of(MeasureSettings(soak_requests=500)) is SOAK
    assert scenario_of(MeasureSettings(soak_minutes=0.5)) is SOAK


def test_only_latency_cases_interleave_and_a_soak_draws_every_size() -> None:
    assert LATENCY.interleaved and not SOAK.interleaved
    assert (LATENCY.dynamic_points, SOAK.dynamic_points) == (8, EVERY_SIZE)
    assert LATENCY.run_isolated is not SOAK.run_isolated and LATENCY.run_in_process is not SOAK.run_in_process
