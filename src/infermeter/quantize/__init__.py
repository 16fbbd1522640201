"""INT8 done right: calibration on real data, accuracy against FP32, per-layer sensitivity, mixed precision under
an accuracy budget, quantization-aware fine-tuning. Frameworks are imported inside the functions that need them.

Entry points: `pipeline.quantize_model` (what `infermeter quantize` runs) and `onthefly.quantize_on_the_fly`
(what `bench --precision int8` uses on a float model). The INT8 study `quantize` and `optimize` share:
`study_data.choose_study_data` (calibration and evaluation data, one policy) and `study` (FP32 reference, plain
graph, sensitivity → greedy → budget, the writing of the chosen model).
"""
