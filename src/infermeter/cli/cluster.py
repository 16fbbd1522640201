"""`bench --cluster ADDRESS` and `--machines`: the checks made before anything runs or is written, and the connection
held while the sweep runs. Ray is imported only when `--cluster` is given (`infermeter.cluster`)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager

from infermeter.core.errors import UsageError
from infermeter.measure.plan import PlanItem


def check_cluster_flags(cluster: str | None, machines: tuple[str, ...], threads: int | None) -> None:
    """`--machines` only with `--cluster`; `--cluster` only with Ray installed (exit 2 with the install line) and,
    unless the cluster is this machine, with `--threads N` (`threads`; None: the resumed plan has its own), since
    this machine's core count says nothing about the nodes'. Nothing is imported from Ray here."""
    if machines and not cluster:
        raise UsageError("--machines picks classes of cluster node: it goes with --cluster ADDRESS")
    if not cluster:
        return
    from infermeter.cluster.session import LOCAL, require_cluster_extra

    if threads == 0 and cluster != LOCAL:
        raise UsageError(
            "--cluster: give --threads N, the intra-op threads each case runs with on its node (the default, this "
            "machine's physical cores, says nothing about the nodes')"
        )
    require_cluster_extra()


def cluster_connection(cluster: str | None) -> AbstractContextManager[object]:
    """Connected to the cluster for the block (`cluster.session.connected`), or nothing without --cluster."""
    if not cluster:
        return contextlib.nullcontext()
    from infermeter.cluster.session import connected

    return connected(cluster)


def check_plan_machines(todo: Sequence[PlanItem], cluster: str | None) -> None:
    """The machine classes the pending cases need: each must have a live node in the cluster, and a plan with
    machine classes (a resumed one) needs --cluster."""
    machines = {case.machine for item in todo for case in item.chain}
    if cluster:
        from infermeter.cluster.session import check_plan_machines

        check_plan_machines(sorted(m for m in machines if m is not None))
    elif machines - {None}:
        raise UsageError(
            f"this plan runs its cases on cluster machine classes ({', '.join(sorted(m for m in machines if m))}): "
            "give --cluster ADDRESS"
        )
