"""Connecting to a Ray cluster for `bench --cluster`, and checking what it offers before anything runs: nodes with an
`infermeter_slot`, and the machine classes `--machines` names. Ray is imported here only inside the functions, so
that importing this module costs nothing; the CLI imports it only when `--cluster` is given."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from infermeter.cluster import MACHINE_LABEL, SLOT_RESOURCE
from infermeter.core.errors import UsageError
from infermeter.core.extras import require_extra

# `--cluster local`: a Ray instance started in this process, this machine its one node, with one slot.
LOCAL = "local"
# `--machines all`: every class of node the cluster has now.
ALL_MACHINES = "all"
# `ray start` turns Ray's token authentication on by default (Ray 2.5x on): a driver that does not say so is refused.
AUTH_MODE_VARIABLE = "RAY_AUTH_MODE"
AUTH_HINT = (
    f"; if the cluster uses Ray's token authentication (`ray start`'s default), set {AUTH_MODE_VARIABLE}=token here "
    "with the head's token (`ray get-auth-token` there) in RAY_AUTH_TOKEN or ~/.ray/auth_token"
)
START_LINES = (
    f"ray start --head --resources '{{\"{SLOT_RESOURCE}\": 1}}' --labels {MACHINE_LABEL}=CLASS, and on each other "
    f"node: ray start --address HEAD:6379 --resources '{{\"{SLOT_RESOURCE}\": 1}}' --labels {MACHINE_LABEL}=CLASS"
)


@dataclass(frozen=True)
class NodeView:
    """A live node that offers a slot: its Ray id, hostname and machine class (None: no class label)."""

    node_id: str
    hostname: str
    machine: str | None


def label_value(labels: dict[str, Any], key: str) -> str | None:
    """One label's value from Ray's node labels (a string, or a one-element list in some Ray versions)."""
    value = labels.get(key)
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return None if value in (None, "") else str(value)


def slot_nodes() -> list[NodeView]:
    """The cluster's live nodes that offer an `infermeter_slot` (the connected Ray's view, read now)."""
    import ray

    return [
        NodeView(
            node["NodeID"], node.get("NodeManagerHostname", ""), label_value(node.get("Labels") or {}, MACHINE_LABEL)
        )
        for node in ray.nodes()
        if node.get("Alive") and node.get("Resources", {}).get(SLOT_RESOURCE, 0) >= 1
    ]


def require_cluster_extra() -> None:
    """MissingExtra (exit 2, with the install line) when Ray is not installed; checked without importing it."""
    require_extra("cluster", ["ray"], "`bench --cluster`")


def connect(address: str) -> None:
    """Connect this process to the Ray cluster at `address` (`local`: start one here, this machine its one node
    with one slot). UsageError naming the address when that fails. Ray's own logging is kept to errors, and its
    workers' output is not copied here (each case's failure comes back in its result)."""
    require_cluster_extra()
    import ray

    # No usage report leaves the machine from a benchmark run (Ray asks for one by default when it starts).
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    if address == LOCAL:
        options.update(resources={SLOT_RESOURCE: 1}, include_dashboard=False)
    try:
        ray.init(address=address, **options)
    except Exception as exc:
        raise UsageError(
            f"--cluster {address}: cannot connect to a Ray cluster there ({type(exc).__name__}: {exc})"
            + ("" if os.environ.get(AUTH_MODE_VARIABLE) == "token" else AUTH_HINT)
        ) from None
    if not slot_nodes():
        ray.shutdown()
        raise UsageError(
            f"--cluster {address}: no node of this Ray cluster offers an {SLOT_RESOURCE}; start them with {START_LINES}"
        )


def disconnect() -> None:
    """Leave the cluster (a `local` one stops)."""
    import ray

    ray.shutdown()


@contextlib.contextmanager
def connected(address: str | None) -> Iterator[bool]:
    """Connected to the cluster at `address` for the block (True), or nothing at all when it is None (False)."""
    if address is None:
        yield False
        return
    connect(address)
    try:
        yield True
    finally:
        disconnect()


def classes(nodes: Sequence[NodeView]) -> list[str]:
    """The machine classes among `nodes`, sorted."""
    return sorted({node.machine for node in nodes if node.machine})


def resolve_machines(names: Sequence[str]) -> tuple[str, ...]:
    """`--machines` checked against the cluster: each class must have a live node with a slot; `all` is every
    class there is. UsageError naming the classes there otherwise."""
    there = classes(slot_nodes())
    if ALL_MACHINES in names:
        if not there:
            raise UsageError(
                f"--machines all: no node has a class label ({MACHINE_LABEL}); start them with {START_LINES}"
            )
        return tuple(there)
    missing = [name for name in names if name not in there]
    if missing:
        raise UsageError(
            f"--machines {','.join(missing)}: no live node of that class in the cluster (classes there: "
            f"{', '.join(there) or f'none: no node has a {MACHINE_LABEL} label'})"
        )
    return tuple(dict.fromkeys(names))


def check_plan_machines(machines: Sequence[str | None]) -> None:
    """UsageError when a machine class the plan needs has no live node with a slot (a resumed plan's classes)."""
    resolve_machines([machine for machine in machines if machine is not None])
