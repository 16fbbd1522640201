"""Kept for code that imports `infermeter.report.int8`: the module is `report.int8_explanation` (why an INT8 row
won or lost against its FP32 twin)."""

from infermeter.report.int8_explanation import fp32_twin, int8_explanation, int8_speedup

__all__ = ["fp32_twin", "int8_explanation", "int8_speedup"]
