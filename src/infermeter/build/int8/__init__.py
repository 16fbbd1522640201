"""Each engine's own INT8 quantizer, as primitives with no study: ONNX Runtime's static QDQ and dynamic quantizer
(`ort_quant`), OpenVINO's NNCF (`ov_quant`), the calibration data they take (`feeds`, `calibration`), and
`onthefly.quantize_on_the_fly`, what `bench --precision int8` builds from a float model.

These sit below `measure` (whose build stage, `case_build.py`, quantizes on the fly) and import neither `measure`
nor `quantize`, the INT8 study above both (calibration against evaluation data, sensitivity, mixed precision,
accuracy control in measure's workers). Frameworks are imported inside the functions that need them.
"""
