"""Serving under load: an Open Inference Protocol server with dynamic batching (`serve`), an MLPerf-LoadGen-style
load generator (`load`), and a batching-policy search (`tune-batching`). Frameworks load lazily, through the
backend contract."""

# tune-batching's default grid and load, shared by `tune-batching` and `optimize --serve` (kept here, light, so
# that the commands' modules read them without importing the server).
DEFAULT_MAX_BATCHES = (1, 2, 4, 8, 16)
DEFAULT_MAX_DELAYS_MS = (1.0, 4.0)
DEFAULT_WORKERS = (1,)
DEFAULT_POINT_DURATION_S = 3.0
DEFAULT_CONCURRENCY = 64

# The load generator's scenarios (`load --scenario`), named once for the command and the driver.
SCENARIOS = ("single-stream", "server", "offline", "sweep")
