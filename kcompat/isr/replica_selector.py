"""Fetch from the closest replica (KIP-392): which replica a consumer should read a partition from.

The leader answers a consumer's Fetch (v11+, which carries the client's ``rack_id``) with a
``preferred_read_replica`` instead of records when its ``replica.selector.class`` prefers a
follower; the consumer then fetches from that follower, which serves it up to the follower's high
watermark (or last stable offset). As Kafka's ``ReplicaManager.findPreferredReadReplica`` with
``org.apache.kafka.common.replica.RackAwareReplicaSelector``:

- only the leader selects, and only for consumers (not for replicas' fetches);
- the candidates are the followers in the ISR whose log holds the fetch offset
  (log start <= fetch offset <= log end), plus the leader;
- a client without a rack, or whose rack has no candidate, or whose rack the leader is in, reads
  from the leader (no preferred replica);
- otherwise the most caught-up candidate of its rack: the highest log end offset, then the least
  time since it was last caught up, then the highest broker id (Kafka ``ReplicaView.comparator``);
- a replica with no endpoint on the client's listener is never preferred.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NO_PREFERRED_REPLICA = -1


@dataclass(frozen=True)
class ReplicaView:
    """A candidate replica: its broker, that broker's rack on the client's listener (None: no rack),
    whether it has an endpoint there, its log end offset and ms since it was last caught up."""

    broker_id: int
    rack: str | None
    has_endpoint: bool
    log_end_offset: int
    time_since_last_caught_up_ms: int


def select_rack_aware(client_rack: str | None, leader: ReplicaView, replicas: list[ReplicaView]) -> ReplicaView:
    """Kafka's ``RackAwareReplicaSelector.select``: the leader unless the client's rack holds
    candidates and not the leader; then the most caught-up candidate of that rack."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms, r.broker_id))


def preferred_read_replica(selector: str | None, partition, client_rack: str | None, fetch_offset: int,
                           now_ms: int, endpoint_rack: Callable[[int], tuple[bool, str | None]]) -> int:
    """The broker id a consumer should fetch ``partition`` from, or -1 for the leader (this broker).

    ``partition``: a leading :class:`~kcompat.isr.partition.Partition` with its replica state;
    ``endpoint_rack(broker_id)``: (has an endpoint on the client's listener, its rack)."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return NO_PREFERRED_REPLICA
    rs = partition.replica_state
    if rs is None:               # a single replica: only the leader
        return NO_PREFERRED_REPLICA
    has_ep, rack = endpoint_rack(partition.local_id)
    leader = ReplicaView(partition.local_id, rack, has_ep, partition.log_end_offset, 0)
    candidates = [leader]
    for replica_id, f in rs.followers.items():
        if replica_id in rs.isr and f.log_start_offset <= fetch_offset <= f.log_end_offset:
            has_ep, rack = endpoint_rack(replica_id)
            candidates.append(ReplicaView(replica_id, rack, has_ep, f.log_end_offset,
                                          now_ms - f.last_caught_up_time_ms))
    chosen = select_rack_aware(client_rack, leader, candidates)
    if chosen is leader or not chosen.has_endpoint:
        return NO_PREFERRED_REPLICA
    return chosen.broker_id
