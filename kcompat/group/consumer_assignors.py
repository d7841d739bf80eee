"""Server-side partition assignors of the KIP-848 consumer group protocol.

With KIP-848 (``group.protocol=consumer``) the group coordinator, not a group leader, computes each
consumer group's target assignment. Kafka's coordinator picks one of ``group.consumer.assignors``
(default ``uniform,range``; a member may name one through ConsumerGroupHeartbeat's
``ServerAssignor``) from the ``org.apache.kafka.coordinator.group.assignor`` package:

* :class:`UniformAssignor` (``"uniform"``, Kafka's ``UniformAssignor`` with its
  ``UniformHomogeneousAssignmentBuilder`` / ``UniformHeterogeneousAssignmentBuilder``): balance
  first, then stickiness (keep partitions where they are).
* :class:`RangeAssignor` (``"range"``, Kafka's ``RangeAssignor``): per topic, contiguous ranges
  over the subscribed members sorted by id, so co-partitioned topics line up.

This module is pure data in, data out: no I/O, no clocks, no hash- or insertion-order dependence
(every iteration is over sorted ids), so the same input always gives the same output.

Shapes: topic ids are strings (uuid strings on the wire), partitions ints, member ids strings.
``assign(members, topics)`` returns ``{member_id: {topic_id: frozenset(partitions)}}`` with every
member of ``members`` present (``{}`` when it gets nothing) and topics without partitions omitted.
Subscribed topics missing from ``topics`` are ignored (Kafka throws ``PartitionAssignorException``
there; the coordinator only passes existing topics, so here they are simply not assignable yet).

Racks: Kafka removed rack awareness from the server-side assignors in 3.8 (KAFKA-16694); its
return is proposed in KAFKA-19909 (an open pull request at the time of writing, for the
homogeneous uniform builder, with the priority balance > rack > stickiness). The uniform assignor here follows that
proposal: once counts are balanced, partitions of each topic are exchanged between that topic's
holders so that, best effort, a partition sits on a member whose rack holds one of its replicas.
Per-member partition counts never change in that step, so balance is unaffected, and without
member racks or partition racks the step does not run (same result as rack-unaware).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, runtime_checkable

__all__ = ["ASSIGNORS", "GroupAssignment", "MemberSpec", "PartitionAssignor", "RangeAssignor", "TopicSpec",
           "UniformAssignor", "assignor"]

GroupAssignment = dict[str, dict[str, frozenset[int]]]
"""member id -> topic id -> partitions: the target assignment of a whole group."""


@dataclass(frozen=True)
class MemberSpec:
    """What the assignor knows about one member (Kafka's ``MemberSubscription`` plus its current
    ``MemberAssignment``, as handed over in a ``GroupSpec``).

    ``rack_id``: the member's ``client.rack`` (``None`` when it sent none).
    ``subscribed_topic_ids``: topic ids (uuid strings) it subscribes to (regexes already resolved).
    ``current``: its current assignment, topic id -> partitions; may be stale (deleted topics,
    shrunk topics, unsubscribed topics, partitions also claimed by another member).
    """

    rack_id: str | None
    subscribed_topic_ids: frozenset[str]
    current: Mapping[str, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicSpec:
    """What the assignor knows about one topic (Kafka's ``SubscribedTopicDescriber``):
    ``num_partitions`` and, per partition, the racks of its replicas (``racksForPartition``;
    partitions not in ``partition_racks`` have no known racks)."""

    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


@runtime_checkable
class PartitionAssignor(Protocol):
    """Kafka's ``ConsumerGroupPartitionAssignor``: ``name`` is what ``group.consumer.assignors``
    and ConsumerGroupHeartbeat's ``ServerAssignor`` refer to; ``assign`` computes the target
    assignment ``{member_id: {topic_id: frozenset(partitions)}}`` for every member."""

    name: str

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> GroupAssignment: ...


class _Group:
    """Working state shared by the assignors: members numbered 0..M-1 in sorted id order, the
    subscribers of every existing subscribed topic, and one owner per partition (-1: none)."""

    def __init__(self, members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> None:
        self.members = members
        self.topics = topics
        self.ids = sorted(members)
        self.racks = [members[m].rack_id for m in self.ids]
        self.subs = [frozenset(t for t in members[m].subscribed_topic_ids if t in topics) for m in self.ids]
        subscribers: dict[str, list[int]] = {}
        for i, subs in enumerate(self.subs):
            for t in subs:
                subscribers.setdefault(t, []).append(i)  # i ascends, so each list is sorted
        self.topic_ids = sorted(subscribers)
        self.subscribers = subscribers
        self.num = {t: max(0, topics[t].num_partitions) for t in self.topic_ids}
        self.owner = {t: [-1] * self.num[t] for t in self.topic_ids}
        self.count = [0] * len(self.ids)

    def retain_current(self) -> None:
        """Keep each member's current partitions that still exist and that it still subscribes
        to; a partition claimed by several members stays with the one whose id sorts first."""
        for i, m in enumerate(self.ids):
            current = self.members[m].current
            for t in sorted(current):
                if t not in self.subs[i]:
                    continue
                own = self.owner[t]
                for p in sorted(current[t]):
                    if 0 <= p < len(own) and own[p] < 0:
                        own[p] = i
                        self.count[i] += 1
        self.original = {t: list(own) for t, own in self.owner.items()}

    def result(self) -> GroupAssignment:
        parts: list[dict[str, list[int]]] = [{} for _ in self.ids]
        for t in self.topic_ids:
            for p, i in enumerate(self.owner[t]):
                if i >= 0:
                    parts[i].setdefault(t, []).append(p)
        return {m: {t: frozenset(ps) for t, ps in parts[i].items()} for i, m in enumerate(self.ids)}


class UniformAssignor:
    """Kafka's ``UniformAssignor`` (``"uniform"``, the default of ``group.consumer.assignors``).

    Priorities: balance > rack locality > stickiness.

    * Homogeneous groups (every member subscribes to the same existing topics), as Kafka's
      ``UniformHomogeneousAssignmentBuilder``: with P partitions over M members every member gets
      ``P // M`` or ``P // M + 1``; the ``P % M`` larger quotas go to the members that currently hold
      the most (so the fewest partitions move; Kafka hands them out in member iteration order), a
      member above its quota gives up its highest (topic, partition)s, and the unassigned partitions
      fill the members below quota one member at a time, in member id order.
    * Heterogeneous groups, as Kafka's ``UniformHeterogeneousAssignmentBuilder``: current
      partitions are kept, unassigned ones go one by one to the least loaded subscriber (topics in
      order of partitions per subscriber descending, subscriber count ascending, topic id), then,
      topic by topic, the highest partition of the most loaded holder moves to the least loaded
      subscriber until, for every topic, no holder of its partitions has 2+ more partitions in
      total than any subscriber of it. Kafka stops after 16 passes; this loops to that fixpoint
      (it terminates: each move lowers the sum of squared counts).
    * Racks (see the module docstring): a per-topic exchange that keeps every member's counts.
    """

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> GroupAssignment:
        g = _Group(members, topics)
        g.retain_current()
        if g.ids and g.topic_ids:
            if all(s == g.subs[0] for s in g.subs):
                _homogeneous(g)
            else:
                _heterogeneous(g)
            _rack_exchange(g)
        return g.result()


def _homogeneous(g: _Group) -> None:
    n = len(g.ids)
    q, extra = divmod(sum(g.num.values()), n)
    quota = [q] * n
    for i in sorted(range(n), key=lambda i: (-g.count[i], i))[:extra]:
        quota[i] = q + 1
    kept = [0] * n
    unassigned: list[tuple[str, int]] = []
    for t in g.topic_ids:  # a member above its quota keeps its lowest (topic, partition)s
        own = g.owner[t]
        for p, i in enumerate(own):
            if i >= 0 and kept[i] < quota[i]:
                kept[i] += 1
                continue
            own[p] = -1
            unassigned.append((t, p))
    pos = 0
    for i in range(n):
        for _ in range(quota[i] - kept[i]):
            t, p = unassigned[pos]
            g.owner[t][p] = i
            pos += 1
    assert pos == len(unassigned)
    g.count = quota


def _topic_order(g: _Group, topic_ids: list[str]) -> list[str]:
    """Kafka's heterogeneous topic order: partitions per subscriber descending, then subscriber
    count ascending, then topic id."""
    return sorted(topic_ids, key=lambda t: (-Fraction(g.num[t], len(g.subscribers[t])),
                                            len(g.subscribers[t]), t))


def _heterogeneous(g: _Group) -> None:
    count = g.count
    for t in _topic_order(g, g.topic_ids):
        own = g.owner[t]
        heap = [(count[i], i) for i in g.subscribers[t]]
        heapq.heapify(heap)
        for p, owner in enumerate(own):
            if owner < 0:
                _, i = heapq.heappop(heap)
                own[p] = i
                count[i] += 1
                heapq.heappush(heap, (count[i], i))
    movable = _topic_order(g, [t for t in g.topic_ids if len(g.subscribers[t]) >= 2])
    moved = True
    while moved:
        moved = False
        for t in movable:
            moved = _balance_topic(g, t) or moved


def _balance_topic(g: _Group, t: str) -> bool:
    """Move partitions of ``t`` from its most loaded holders to its least loaded subscribers until
    they differ by at most one. Returns whether anything moved."""
    count, own = g.count, g.owner[t]
    held: dict[int, list[int]] = {}
    for p, i in enumerate(own):
        held.setdefault(i, []).append(p)  # ascending partitions per holder
    low = [(count[i], i) for i in g.subscribers[t]]
    high = [(-count[i], i) for i in held]
    heapq.heapify(low)
    heapq.heapify(high)
    moved = False
    while high:
        neg, d = high[0]
        if -neg != count[d] or not held[d]:  # stale entry: a fresher one is in the heap
            heapq.heappop(high)
            continue
        c, r = low[0]
        if c != count[r]:
            heapq.heappop(low)
            continue
        if count[d] - count[r] <= 1:
            break
        p = held[d].pop()
        own[p] = r
        held.setdefault(r, []).append(p)
        count[d] -= 1
        count[r] += 1
        for i in (d, r):
            heapq.heappush(low, (count[i], i))
            heapq.heappush(high, (-count[i], i))
        moved = True
    return moved


def _rack_exchange(g: _Group) -> None:
    """Rack locality without touching balance: per topic, every member keeps exactly as many of its
    partitions as it holds; within those slots, partitions move towards members on a rack of one
    of their replicas (most constrained partitions first), and the ones displaced go back to their
    original (else current) holder when it has room. Best effort (greedy, like Kafka's KIP-881
    builders): a partition left off-rack only ever faces on-rack members whose slots in its topic
    are all taken by on-rack partitions."""
    if not any(r is not None for r in g.racks):
        return
    for t in g.topic_ids:
        racks = g.topics[t].partition_racks
        if not racks:
            continue
        own = g.owner[t]
        free: dict[int, int] = {}  # member -> slots in t held by off-rack partitions
        unmatched = []
        for p, i in enumerate(own):
            if not _on_rack(g, i, t, p):
                free[i] = free.get(i, 0) + 1
                unmatched.append(p)
        by_rack: dict[str, list[int]] = {}  # rack -> members with free slots, id order
        for i in sorted(free):
            if g.racks[i] is not None:
                by_rack.setdefault(g.racks[i], []).append(i)
        if not by_rack:
            continue
        next_of = dict.fromkeys(by_rack, 0)
        placed = dict.fromkeys(unmatched, -1)
        for p in sorted(unmatched, key=lambda p: (len(racks.get(p, ())), p)):
            for rack in sorted(racks.get(p, ())):
                candidates = by_rack.get(rack, [])
                k = next_of.get(rack, 0)
                while k < len(candidates) and free[candidates[k]] == 0:
                    k += 1
                next_of[rack] = k
                if k < len(candidates):
                    placed[p] = candidates[k]
                    free[candidates[k]] -= 1
                    break
        original = g.original[t]
        rest = [p for p in unmatched if placed[p] < 0]
        for holder in (original, own):  # displaced partitions: back where they were, else stay
            for p in rest:
                i = holder[p]
                if placed[p] < 0 and i >= 0 and free.get(i, 0) > 0:
                    placed[p] = i
                    free[i] -= 1
        room = iter([i for i in sorted(free) for _ in range(free[i])])
        for p in rest:
            if placed[p] < 0:
                placed[p] = next(room)
        for p, i in placed.items():
            own[p] = i


def _on_rack(g: _Group, i: int, t: str, p: int) -> bool:
    """Whether member ``i``'s rack holds a replica of partition ``p`` of ``t``."""
    rack = g.racks[i]
    return rack is not None and rack in g.topics[t].partition_racks.get(p, ())


class RangeAssignor:
    """Kafka's ``RangeAssignor`` (``"range"``) as rewritten in Kafka 3.9/4.0 (KAFKA-16944).

    Per topic, its subscribers sorted by member id get contiguous ranges in order: with N
    partitions and S subscribers each gets ``N // S`` and the first ``N % S`` one more (subscribers
    past N get nothing). Topics with the same partition count and the same subscribers therefore
    get the same partition numbers per member (co-partitioning).

    Kafka's server RangeAssignor is not sticky since KAFKA-16944 (it recomputes from scratch;
    stickiness comes only from the stable member order, which Kafka bases on
    ``group.instance.id`` first for static members, a field :class:`MemberSpec` does not carry)
    and not rack aware since KAFKA-16694; so ``current`` and racks are ignored here too.
    """

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> GroupAssignment:
        g = _Group(members, topics)
        out: GroupAssignment = {m: {} for m in g.ids}
        for t in g.topic_ids:
            subscribers = g.subscribers[t]
            q, extra = divmod(g.num[t], len(subscribers))
            start = 0
            for k, i in enumerate(subscribers):
                size = q + (1 if k < extra else 0)
                if size:
                    out[g.ids[i]][t] = frozenset(range(start, start + size))
                    start += size
        return out


ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
"""The built-in server assignors by name, ``uniform`` first (Kafka's default order)."""


def assignor(name: str) -> PartitionAssignor:
    """The built-in assignor called ``name`` (``"uniform"`` or ``"range"``); ``KeyError`` otherwise
    (Kafka answers UNSUPPORTED_ASSIGNOR for an unknown ``ServerAssignor``)."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise KeyError(f"unknown consumer group assignor {name!r}; known: {sorted(ASSIGNORS)}") from None
