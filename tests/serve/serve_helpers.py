"""Helpers of the serving tests (imported by path: `tests/` is not a package)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import httpx

from infermeter.serve.model import ServeConfig
from infermeter.serve.server import ServerThread


def make_server(model: str = "tiny_cnn", backend: str = "null", **overrides: Any) -> ServerThread:
    """A ServerThread for `model` (null backend by default); keyword arguments override ServeConfig fields
    (`grpc=True` starts the gRPC service too)."""
    options = overrides.pop("options", ())
    grpc = overrides.pop("grpc", False)
    config = ServeConfig(model=model, backend=backend, threads=1, options=tuple(sorted(options)), **overrides)
    return ServerThread(config, grpc=grpc)


def post_many(url: str, bodies: list[tuple[bytes, dict[str, str]]], timeout_s: float = 30.0) -> list[httpx.Response]:
    """POST every body concurrently (one connection each) and return the responses in order."""

    async def main() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
        async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:
            return list(await asyncio.gather(*(client.post(url, content=b, headers=h) for b, h in bodies)))

    return asyncio.run(main())


def metric(text: str, name: str) -> float:
    """The value of one Prometheus sample line starting with `name` (labels included in `name`)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name):
            total += float(line.rsplit(" ", 1)[1])
    return total


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real `infermeter` CLI in a subprocess (as tests/conftest.py's run_cli, importable from here)."""
    return subprocess.run(
        [sys.executable, "-m", "infermeter", *args], capture_output=True, text=True, timeout=timeout, env=os.environ
    )
