"""Picking a configuration from measured cases (`pick`), and its cost side (`tradeoff`)."""
