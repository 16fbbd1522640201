"""The server side of serving: an Open Inference Protocol server (KServe v2 HTTP and gRPC, Triton's extensions) with
dynamic batching. Its client side, `load` and `tune-batching`, is the `load` package. Frameworks load lazily, through
the backend contract."""

# tune-batching's default grid and load, shared by `tune-batching` and `optimize --serve` (kept here, light, so
# that the commands' modules read them without importing the server).
DEFAULT_MAX_BATCHES = (1, 2, 4, 8, 16)
DEFAULT_MAX_DELAYS_MS = (1.0, 4.0)
DEFAULT_WORKERS = (1,)
DEFAULT_POINT_DURATION_S = 3.0
DEFAULT_CONCURRENCY = 64

# The load generator's scenarios (`load --scenario`), named once for the command and the driver.
SCENARIOS = ("single-stream", "server", "offline", "sweep")
