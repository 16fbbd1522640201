"""`infermeter explain`: where each engine spends its time on one model, block by block, aligned on the original
ONNX nodes (issue 46). `run.explain_model` makes the record; `records` holds its typed form."""
