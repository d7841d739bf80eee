"""Rack-aware replica placement for new partitions (CreateTopics, CreatePartitions).

Kafka's KRaft ``StripedReplicaPlacer`` (metadata module, ``org.apache.kafka.metadata.placement``,
with its ``RackList``/``BrokerList``), which ``ReplicationControlManager`` calls for partitions
created without a manual assignment. Pure: the usable brokers and a ``random.Random`` in, an
assignment out; the same input and the same generator state give the same assignment.

What the controller passes (Kafka's ``ClusterControlManager.usableBrokers``): every registered
broker that is not in controlled shutdown, with its rack and whether it is fenced. Fenced brokers
count as registered (the replication factor may reach them) and may hold followers, but only when
a rack has no unfenced broker left for the partition; a leader is always unfenced.

Brokers without a rack are not refused, alone or mixed with racked brokers: as in Kafka, whose
racks are keyed by ``Optional<String>``, "no rack" is one more rack (sorted before all named
racks). Only the ZooKeeper-mode admin path refused a mix ("Not all brokers have rack information",
``AdminZkClient.getBrokerMetadatas``); KRaft never did.

The stripes (Kafka's algorithm): the racks form a ring sorted by name; partition ``i`` takes its
leader from the rack ``start + i`` of the ring (``start`` random) and its followers from the
racks after that one, one replica per rack per pass around the ring, so a partition's replicas
are on distinct racks whenever there are at least as many racks as replicas. Within a rack the
brokers are taken round-robin from a random start, unfenced ones before fenced ones. Every
``number of unfenced brokers`` partitions the follower orders are reshuffled, so a long run of
partitions does not repeat the same replica sets.

Where we differ from Kafka, on purpose: Kafka's rack cursor serves leaders and followers alike
and skips a rack that has no unfenced broker, and it reshuffles the rack ring itself. So with 3
racks of 3 brokers and replication factor 3 one broker per rack leads every partition of a
reshuffle cycle (3 of 9 brokers lead, 6 lead none), and a fenced-only rack hands its turn to its
neighbour. Here the leader has its own cursors: the leader rack goes round the racks that have an
unfenced broker, in a ring that is never reshuffled, and each rack hands leadership round-robin to
its unfenced brokers. That gives the balance Kafka's placer aims for ("we would like the new
leaders to distributed evenly"): per placement, leaders per rack differ by at most one, leaders per
broker within a rack by at most one, and when those racks have the same number ``k`` of unfenced
brokers every unfenced broker leads ``floor(n / (racks * k))`` or ``ceil(...)`` of ``n``
partitions. The followers use the rack ring (reshuffled each cycle) as Kafka does.
"""

from __future__ import annotations

import random
from typing import Iterable, NamedTuple

from kcompat.protocol.errors import ErrorCode, KafkaError


class UsableBroker(NamedTuple):
    """A broker a replica may be placed on (Kafka ``UsableBroker``): ``rack`` None = no rack."""

    broker_id: int
    rack: str | None
    fenced: bool


def rack_sort_key(rack: str | None) -> tuple[bool, str]:
    """Kafka's ``OptionalStringComparator``: no rack first, then racks by name."""
    return (rack is not None, rack or "")


class _Rack:
    """The brokers of one rack and the cursors into them for one placement.

    ``leaders`` is the rack's unfenced brokers in a fixed rotation (never reshuffled) and
    ``next_leader`` the index of the next leader; ``unfenced``/``fenced`` are the follower orders
    with ``cursor_unfenced``/``cursor_fenced`` where the next partition starts looking.
    """

    def __init__(self, unfenced: list[int], fenced: list[int], rng: random.Random) -> None:
        self.leaders = sorted(unfenced)
        self.unfenced = list(self.leaders)
        self.fenced = sorted(fenced)
        start = rng.randrange(len(self.unfenced)) if self.unfenced else 0
        # followers start where leaders do: in one rack this gives Kafka's consecutive stripes
        # (leader b, followers b+1, b+2, ...)
        self.next_leader = self.cursor_unfenced = start
        self.cursor_fenced = rng.randrange(len(self.fenced)) if self.fenced else 0

    def next_leader_id(self) -> int:
        broker = self.leaders[self.next_leader % len(self.leaders)]
        self.next_leader += 1
        return broker

    def next_follower(self, taken: set[int]) -> tuple[int, bool] | None:
        """The first broker not in ``taken`` in follower order, unfenced before fenced, as
        (broker id, fenced); None if every broker of the rack is taken."""
        for brokers, cursor, fenced in ((self.unfenced, self.cursor_unfenced, False),
                                        (self.fenced, self.cursor_fenced, True)):
            n = len(brokers)
            for i in range(n):
                broker = brokers[(cursor + i) % n]
                if broker not in taken:
                    return broker, fenced
        return None

    def shuffle(self, rng: random.Random) -> None:
        rng.shuffle(self.unfenced)
        rng.shuffle(self.fenced)


def place_replicas(brokers: Iterable[UsableBroker], first_partition: int, count: int,
                   replication_factor: int, rng: random.Random) -> dict[int, list[int]]:
    """Replicas for partitions ``first_partition .. first_partition + count - 1``.

    ``brokers``: the usable brokers (unique ids, any order: they are sorted first, so the order
    does not change the result). Returns {partition index: replica broker ids}, leader first;
    every list has ``replication_factor`` distinct brokers and an unfenced leader.

    Raises KafkaError(INVALID_REPLICATION_FACTOR) with Kafka 4.3's placer messages, checked in
    Kafka's order: a non-positive replication factor, no unfenced broker at all ("All brokers are
    currently fenced, or have all their log directories cordoned."), more replicas than usable
    brokers (brokers whose every log dir is cordoned are not usable, KIP-1066). ReplicationControlManager prefixes
    them with "Unable to replicate the partition N time(s): " for CreateTopics only.
    """
    by_rack: dict[str | None, tuple[list[int], list[int]]] = {}
    for b in brokers:
        unfenced, fenced = by_rack.setdefault(b.rack, ([], []))
        (fenced if b.fenced else unfenced).append(b.broker_id)
    total = sum(len(u) + len(f) for u, f in by_rack.values())
    num_unfenced = sum(len(u) for u, _ in by_rack.values())
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Invalid replication factor {replication_factor}: the replication factor "
                         f"must be positive.")
    if num_unfenced == 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "All brokers are currently fenced, or have all their log directories cordoned.")
    if replication_factor > total:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"The target replication factor of {replication_factor} cannot be reached "
                         f"because only {total} broker(s) are registered or some brokers have all their "
                         f"log directories cordoned.")

    names = sorted(by_rack, key=rack_sort_key)
    racks = {name: _Rack(*by_rack[name], rng) for name in names}
    leader_ring = [name for name in names if racks[name].leaders]
    leader_start = rng.randrange(len(leader_ring))
    ring = list(names)  # follower order of the racks; reshuffled every cycle
    result: dict[int, list[int]] = {}
    for i in range(count):
        if i and num_unfenced > 1 and i % num_unfenced == 0:
            rng.shuffle(ring)
            for name in names:
                racks[name].shuffle(rng)
        leader_rack = leader_ring[(leader_start + i) % len(leader_ring)]
        leader = racks[leader_rack].next_leader_id()
        replicas = [leader]
        taken = {leader}
        used: dict[str | None, tuple[bool, bool]] = {}  # rack -> (gave unfenced, gave fenced)
        pos = ring.index(leader_rack)
        step = 0
        while len(replicas) < replication_factor:
            step += 1
            name = ring[(pos + step) % len(ring)]   # the leader's rack comes last in each pass
            found = racks[name].next_follower(taken)
            if found is None:
                continue
            broker, fenced = found
            replicas.append(broker)
            taken.add(broker)
            gave_unfenced, gave_fenced = used.get(name, (False, False))
            used[name] = (gave_unfenced or not fenced, gave_fenced or fenced)
        # each rack that gave followers starts one broker further on for the next partition
        for name, (gave_unfenced, gave_fenced) in used.items():
            rack = racks[name]
            rack.cursor_unfenced += gave_unfenced
            rack.cursor_fenced += gave_fenced
        result[first_partition + i] = replicas
    return result
