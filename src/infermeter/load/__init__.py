"""What every load client shares, whatever the protocol (KServe v2 over HTTP or gRPC, OpenAI streaming): one
arrivals schedule (`arrivals`), one timing record with one meaning of latency (`timing`), and one way to state a
service-level objective and count the goodput under it (`slo`)."""
