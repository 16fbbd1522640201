"""INT8 done right: calibration on real data, accuracy against FP32, per-layer sensitivity, mixed precision under
an accuracy budget, quantization-aware fine-tuning. Frameworks are imported inside the functions that need them.

Entry point: `pipeline.quantize_model` (what `infermeter quantize` runs). The engines' quantizers it studies
(ONNX Runtime's, NNCF's) and the on-the-fly INT8 of `bench --precision int8` are in `infermeter.build.int8`, a
layer below `measure`: this package runs its latency and accuracy-control steps in measure's workers, so it sits
above `measure`. The INT8 study `quantize` and `optimize` share:
`study_data.choose_study_data` (calibration and evaluation data, one policy) and `study` (FP32 reference, plain
graph, sensitivity → greedy → budget, the writing of the chosen model).
"""
