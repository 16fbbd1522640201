"""Reduced precision (FP16/BF16) with chosen layers kept in FP32, per engine: the study, the search, and each engine's
own way.
"""
