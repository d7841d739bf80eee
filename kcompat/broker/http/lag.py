"""Consumer lag computed by the broker: for each group this node coordinates and each partition it
has committed an offset for, the committed offset against the partition's high watermark and last
stable offset (what kafka-lag-exporter and Burrow compute from outside, and
``kafka-consumer-groups.sh --describe`` prints as LAG).

The log end of a partition is known here only if this node has a replica of it (leader or
follower; a follower's high watermark trails the leader's by at most one fetch): partitions
without a local replica are listed with ``high_watermark`` None. In a cluster, each node reports
the groups it coordinates; the sum over nodes covers every group once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices


@dataclass(frozen=True)
class PartitionLag:
    """One group's position on one partition: ``lag`` = high watermark - committed offset
    (records), ``stable_lag`` = last stable offset - committed (what a read_committed consumer
    can still read); None when this node has no replica of the partition."""

    group: str
    topic: str
    partition: int
    committed: int
    high_watermark: int | None
    last_stable_offset: int | None
    leader: bool

    @property
    def lag(self) -> int | None:
        return None if self.high_watermark is None else max(0, self.high_watermark - self.committed)

    @property
    def stable_lag(self) -> int | None:
        return None if self.last_stable_offset is None else max(0, self.last_stable_offset - self.committed)


def consumer_lag(services: HttpServices, group_ids: set[str] | None = None) -> list[PartitionLag]:
    """Lag of every committed offset of the groups this node coordinates (``group_ids``: only
    those), sorted by group, topic, partition."""
    groups = services.groups
    if groups is None:
        return []
    partitions = services.replica_manager.partitions
    out = []
    for group_id, group in list(groups.coordinator.ctx.groups.items()):
        if group_ids is not None and group_id not in group_ids:
            continue
        for (topic, partition), om in list(group.offsets.items()):
            p = partitions.get((topic, partition))
            if p is None:
                out.append(PartitionLag(group_id, topic, partition, om.offset, None, None, False))
            else:
                lso = p.last_stable_offset if p.is_leader else None
                out.append(PartitionLag(group_id, topic, partition, om.offset, p.high_watermark, lso, p.is_leader))
    out.sort(key=lambda lag: (lag.group, lag.topic, lag.partition))
    return out
