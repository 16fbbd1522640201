"""Typed errors. Library code raises these; only the CLI turns them into a message and an exit code."""

from __future__ import annotations


class InfermeterError(Exception):
    """Base of every error infermeter raises on purpose. The message says what was wrong and what to do."""

    exit_code = 2


class UsageError(InfermeterError):
    """A flag, value or argument the user gave cannot be used as given."""


class ModelError(InfermeterError):
    """The model cannot be found, read or understood."""


class InputSpecError(InfermeterError):
    """An input name, shape or dtype does not fit the model."""


class BackendUnavailable(InfermeterError):
    """The backend cannot run here (framework or hardware missing); the message carries the install hint."""


class BackendError(InfermeterError):
    """The backend failed while loading or running a model."""


class ResultsError(InfermeterError):
    """A results file cannot be read or written."""


class MissingExtra(InfermeterError):
    """An optional package this needs is not installed; the message names the `infermeter[...]` extra to install."""
