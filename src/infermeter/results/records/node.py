"""The node record (`bench --cluster`): which machine of a Ray cluster ran a case, that machine's environment, when
the case's task held the node's slot, and the earlier attempts that were lost with their node (`node` field)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Self

from infermeter.results.records.base import Record, known_fields


@dataclass(frozen=True)
class LostAttempt:
    """An attempt at a case that ended with its node (the node died, or Ray lost the task's worker): where it
    ran (`node_id`, `hostname`, `machine`; empty when it had not said yet), why it was lost, and when (ISO)."""

    node_id: str
    hostname: str
    machine: str | None
    reason: str
    at: str


@dataclass(frozen=True)
class NodeRecord(Record):
    """The node a case ran on. `machine` is the node's class label (`infermeter.io/machine`), None when the node
    has none. `held_from_s` and `held_until_s` (Unix seconds, None when the task never gave the slot back) bound
    the task that held the node's one `infermeter_slot`: no other case ran on the node between them.
    `environment` is the node's, as `infermeter env` prints it (the results file's own is the driver's);
    `lost` lists earlier attempts lost with their node before this one ran."""

    KEY: ClassVar[str] = "node"

    node_id: str
    hostname: str
    _: KW_ONLY  # the rest by keyword
    machine: str | None
    held_from_s: float
    held_until_s: float | None
    environment: dict[str, Any] = field(default_factory=dict)
    lost: tuple[LostAttempt, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The `node` block; `lost` only when an attempt was lost."""
        data: dict[str, Any] = {
            "node_id": self.node_id,
            "hostname": self.hostname,
            "machine": self.machine,
            "held_from_s": self.held_from_s,
            "held_until_s": self.held_until_s,
            "environment": self.environment,
        }
        if self.lost:
            data["lost"] = [vars(attempt).copy() for attempt in self.lost]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of `to_dict`."""
        fields = known_fields(cls, data)
        fields["lost"] = tuple(LostAttempt(**known_fields(LostAttempt, entry)) for entry in data.get("lost", []))
        return cls(**fields)
