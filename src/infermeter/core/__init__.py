"""The floor every layer stands on: the case's controlled variables, typed errors, atomic files, Ctrl-C, the extras'
install lines, checks of user-given values. No framework import.
"""
