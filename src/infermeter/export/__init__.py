"""`infermeter export`: PyTorch -> ONNX (`torch_export`), then proof that the file computes the same (`verify`)."""
