"""Picking a configuration from measured cases (`pick`) under the user's limits (`constraints`), and its cost side
(`tradeoff`)."""
