"""Measurement: the timed loop, isolated worker processes and the sweep over a benchmark matrix."""
