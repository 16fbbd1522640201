"""Figures from measurements, pure: latency statistics and their warnings, replicates, the metric registry, number
formatting.
"""
