"""`infermeter optimize`: the progressive selection procedure in one command, ending in a deployable artifact.

Baseline (PyTorch eager FP32, or ONNX Runtime FP32 for an ONNX input) → verified ONNX export → every available
backend at FP32, parity-checked → reduced precisions the hardware supports (INT8 with calibration and, when it
breaks the accuracy budget, sensitivity-guided mixed precision; BF16/FP16 where the CPU computes them natively),
each accuracy-checked → static vs dynamic shapes and batching → advice under the user's constraints, with the
runner-up and the ONNX Runtime FP32 fallback. Everything is written as it goes into one output folder, so an
interrupted run resumes where it stopped.

Modules: `request` (what was asked), `journal` (the story of the run, kept in the results file), `candidates`
(which configurations to try, pruning and the time budget), `accuracy` (the INT8 study's data and FP32 reference
for a run, the accuracy of any backend), `engine_quantizers` (which quantizer makes each engine's INT8 artifact),
`pipeline` (the run's state), `main` (the steps in order), `step_log` (the journal every step writes through),
`steps*` and `finish` (the steps), `deploy` (deploy.json, DEPLOY.md, artifact folder).
The package prints nothing: `pipeline.run_optimize` reports progress through a callback.
"""
