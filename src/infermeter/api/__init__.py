"""The Python API: `infermeter.bench(...)` and the other calls (`calls`), and `Results` (`results_view`)."""
