"""`infermeter deploy`: a Triton model repository (and a KServe InferenceService) from measured figures.

Modules: `source` (what to deploy: the case, model file, tensors and serving figures, each with its origin),
`triton` (config.pbtxt and the repository), `kserve` (the InferenceService and its CRD check), `markdown`
(DEPLOY.md and the perf_analyzer line), `pbtxt` (protobuf text format reader) and `repository` (reading a
repository back for `infermeter serve REPO`) and `manifest` (the `deploy.json` of an optimize folder: written by
`optimize`, read here and by `serve DIR`).
"""
