"""Picking a configuration from measured cases (`pick`) under the user's constraints (`constraints`), and its cost
side (`tradeoff`)."""
