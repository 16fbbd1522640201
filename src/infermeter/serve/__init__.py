"""Serving under load: an Open Inference Protocol server with dynamic batching (`serve`), an MLPerf-LoadGen-style
load generator (`load`), and a batching-policy search (`tune-batching`). Frameworks load lazily, through the
backend contract."""
