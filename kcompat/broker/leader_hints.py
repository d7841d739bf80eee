"""Current-leader hints in Produce and Fetch error responses (KIP-951).

A partition answered NOT_LEADER_OR_FOLLOWER (Produce v10+, Fetch v16+) or FENCED_LEADER_EPOCH
(Fetch v16+) carries the leader id and leader epoch this broker's metadata knows, and the response
lists the endpoints of those leaders on the request's listener, so that the client can move the
partition to its new leader without a Metadata round trip (Kafka ``KafkaApis.getCurrentLeader``).
A leaderless partition gets leader -1 / epoch -1 and no endpoint.
"""

from __future__ import annotations

from typing import Iterable

from kcompat.broker.api_services import MetadataCache
from kcompat.protocol.errors import ErrorCode

PRODUCE_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})
FETCH_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def current_leader(metadata: MetadataCache, topic: str, partition: int) -> tuple[int, int]:
    """``(leader id, leader epoch)`` of ``topic``-``partition`` in the metadata image; ``(-1, -1)``
    when the partition is unknown or has no leader."""
    t = metadata.image.topics.get(topic)
    p = t.partitions.get(partition) if t is not None else None
    if p is None or p.leader < 0:
        return -1, -1
    return p.leader, p.leader_epoch


def add_leader_hints(metadata: MetadataCache, listener_name: str, partitions: Iterable[tuple[str, int, object]], errors: frozenset,
                     leader_cls, endpoint_cls) -> list:
    """Fill ``current_leader`` (a ``leader_cls(leader_id=, leader_epoch=)``) of every partition
    response in ``partitions`` (``(topic name, partition index, response)``) whose error code is in
    ``errors``; returns the ``endpoint_cls(node_id=, host=, port=, rack=)`` list of the leaders
    named, on ``listener_name``, sorted by node id (for the response's ``node_endpoints``)."""
    leaders: set[int] = set()
    for topic, partition, resp in partitions:
        if resp.error_code not in errors:
            continue
        leader_id, leader_epoch = current_leader(metadata, topic, partition)
        resp.current_leader = leader_cls(leader_id=leader_id, leader_epoch=leader_epoch)
        if leader_id >= 0:
            leaders.add(leader_id)
    return leader_endpoints(metadata, listener_name, leaders, endpoint_cls)


def leader_endpoints(metadata: MetadataCache, listener_name: str, leaders: set[int], endpoint_cls) -> list:
    """``endpoint_cls(node_id=, host=, port=, rack=)`` of each live broker in ``leaders`` on
    ``listener_name``, sorted by node id (a response's ``node_endpoints``, KIP-951)."""
    if not leaders:
        return []
    return [endpoint_cls(node_id=node, host=host, port=port, rack=rack)
            for node, host, port, rack in metadata.live_broker_endpoints(listener_name) if node in leaders]

