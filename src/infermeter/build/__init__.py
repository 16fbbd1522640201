"""Building what a case loads: the case's artifact, and each engine's INT8 quantizer (`build.int8`)."""
