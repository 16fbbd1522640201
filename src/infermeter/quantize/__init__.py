"""INT8 done right: calibration on real data, accuracy against FP32, per-layer sensitivity, mixed precision under
an accuracy budget, quantization-aware fine-tuning. Frameworks are imported inside the functions that need them.

Entry points: `pipeline.quantize_model` (what `infermeter quantize` runs) and `onthefly.quantize_on_the_fly`
(what `bench --precision int8` uses on a float model).
"""
