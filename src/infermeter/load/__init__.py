"""The client side of serving: the load generator, its driver and protocol clients, and the verdict of a run."""
