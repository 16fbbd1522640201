"""Generation backends, one module each; they are registered, with the task `generate`, in
`infermeter.backends.registry` (the one registry of every backend), and loaded lazily from there."""

from __future__ import annotations

from infermeter.backends.registry import get_generation_backend

__all__ = ["get_generation_backend"]
