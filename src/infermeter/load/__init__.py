"""The client side of serving: the load generator and its driver, the protocol clients, the verdict of a run and
tune-batching; and what every load client shares, whatever the protocol (KServe v2 over HTTP or gRPC, OpenAI
streaming): one arrivals schedule (`arrivals`), one timing record with one meaning of latency (`timing`), one way
to state a service-level objective and count the goodput under it (`slo`), the levels and the peak search.
"""
