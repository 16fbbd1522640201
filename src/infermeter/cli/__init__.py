"""The command-line interface: the only layer that prints to the terminal or exits."""
