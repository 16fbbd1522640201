"""Why a model is fast or slow: pure analyses of an ONNX graph after shape inference.

- `model`: load a model's ONNX form with its symbolic dims fixed and every tensor shape inferred (`GraphView`).
- `flops`: per-node FLOPs (MACs x 2) and bytes moved; arithmetic intensity.
- `memory`: activation memory, naive vs planned (liveness + greedy offset allocator).
- `fusion`: fusion opportunities by pattern, and ONNX Runtime's optimizer node counts per level.
- `peak`: this machine's measured compute and bandwidth ceilings; `roofline`: bench results against them.

Frameworks (onnx, onnxruntime, torch, openvino) are imported inside the functions that need them.
"""
