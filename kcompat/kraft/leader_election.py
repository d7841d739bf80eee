"""Partition leader election on the active controller: who leads a partition after a change.

I/O free: functions read the :class:`MetadataImage` and return ``PartitionChangeRecord``\\ s; the
caller commits them (the image changes only when they are replayed, which bumps the leader epoch
of every record with a new leader). The rules are those of Kafka 3.9 KRaft's
``PartitionChangeBuilder.electLeader`` and ``ReplicationControlManager`` (KIP-631; ElectLeaders
KIP-183 / KIP-460; eligible leader replicas, KIP-966, are not implemented):

- An *acceptable* leader is a registered broker that is not fenced and not in controlled shutdown
  (``ClusterControlManager.isActive``), adjusted by the caller for a broker being fenced (never
  acceptable) or unfenced (acceptable although the image still shows it fenced).
- ``ONLINE`` (every membership change, ``unclean.leader.election.enable=false``): keep the leader
  if it is still in the ISR and acceptable, else the first replica, in replica order, that is in
  the ISR and acceptable, else no leader (-1, the ISR keeps its last member).
- ``UNCLEAN`` (the topic's ``unclean.leader.election.enable=true``, or ElectLeaders type 1): as
  ``ONLINE``, and when no ISR member qualifies, the first acceptable replica in replica order; the
  ISR becomes that leader alone. Kafka 3.9 also marks such a partition ``RECOVERING``
  (KIP-704) until the new leader sends AlterPartition; kcompat leaves the leader recovery state
  RECOVERED, so no AlterPartition round is needed before the partition is usable.
- ``PREFERRED`` (ElectLeaders type 0, ``auto.leader.rebalance.enable``): the preferred replica (the
  first replica) if it is in the ISR and acceptable, else keep a valid leader, else the first
  other valid ISR member.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable, Iterable

from kcompat.kraft.image import NO_CHANGE_LEADER, NO_LEADER, RESOURCE_TOPIC, MetadataImage, PartitionImage
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import PartitionChangeRecord

# ElectLeadersRequest.election_type (Kafka's org.apache.kafka.common.ElectionType)
PREFERRED = 0
UNCLEAN = 1
# kcompat-internal: ISR-only election (PartitionChangeBuilder.Election.ONLINE); never on the wire
ONLINE = -1

UNCLEAN_CONFIG = "unclean.leader.election.enable"
# ReplicationControlManager.maxElectionsPerImbalance: preferred elections per rebalance pass
MAX_ELECTIONS_PER_IMBALANCE = 1000

# the messages Kafka's ApiError carries for these codes (its exceptions' default messages)
_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
}


@dataclass(frozen=True)
class Leader:
    """An election's outcome: ``leader`` (-1 none) and whether it came from outside the ISR."""

    leader: int
    unclean: bool = False


@dataclass
class PartitionElection:
    """One partition's ElectLeaders result: ``error`` NONE, ELECTION_NOT_NEEDED,
    PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION."""

    partition: int
    error: ErrorCode
    message: str | None = None


@dataclass
class TopicElection:
    """ElectLeadersResponse.ReplicaElectionResult: a topic and its partitions' results."""

    topic: str
    partitions: list[PartitionElection]


def acceptable_leaders(image: MetadataImage, *, exclude: Iterable[int] = (), include: Iterable[int] = ()) -> set[int]:
    """Brokers that may lead: unfenced and not shutting down, minus ``exclude`` (being fenced or
    shut down in this operation), plus ``include`` (being unfenced in this operation)."""
    out = set(image.unfenced_brokers()) | set(include)
    return out.difference(exclude)


def choose_leader(replicas: list[int], isr: list[int], leader: int, election: int,
                  acceptable: set[int]) -> Leader:
    """The leader ``election`` (ONLINE, UNCLEAN or PREFERRED) picks for a partition with these
    ``replicas`` (preference order), target ``isr`` and current ``leader``
    (``PartitionChangeBuilder.electLeader``)."""
    def valid(r: int) -> bool:
        return r in isr and r in acceptable
    if election == PREFERRED and replicas and valid(replicas[0]):
        return Leader(replicas[0])
    if leader != NO_LEADER and valid(leader):
        return Leader(leader)
    for r in replicas:
        if valid(r):
            return Leader(r)
    if election == UNCLEAN:
        for r in replicas:
            if r in acceptable:
                return Leader(r, unclean=True)
    return Leader(NO_LEADER)


def change(topic_id: uuid.UUID, p: PartitionImage, election: int, acceptable: set[int], *,
           leader: int | None = None, isr: list[int] | None = None,
           target_isr: list[int] | None = None) -> PartitionChangeRecord | None:
    """The PartitionChangeRecord electing a leader for ``p`` (None when nothing changes).

    ``leader``/``isr``: the partition's state if earlier records of the same operation changed it
    (default: the image's); ``target_isr``: the ISR the change proposes before the election (default:
    ``isr``), e.g. without a broker being fenced. An unclean election sets the ISR to the new
    leader alone."""
    cur_leader = p.leader if leader is None else leader
    cur_isr = list(p.isr if isr is None else isr)
    new_isr = list(cur_isr if target_isr is None else target_isr)
    chosen = choose_leader(p.replicas, new_isr, cur_leader, election, acceptable)
    if chosen.unclean:
        new_isr = [chosen.leader]
    if chosen.leader == cur_leader and new_isr == cur_isr:
        return None
    return PartitionChangeRecord(
        partition_id=p.partition_id, topic_id=topic_id,
        isr=new_isr if new_isr != cur_isr else None,
        leader=chosen.leader if chosen.leader != cur_leader else NO_CHANGE_LEADER)


def unclean_enabled_in_image(image: MetadataImage, topic: str, static_default: bool = False) -> bool:
    """``unclean.leader.election.enable`` of ``topic`` from the image alone: the topic override,
    else the dynamic cluster-wide broker default, else ``static_default`` (the broker config)."""
    value = image.configs.get((RESOURCE_TOPIC, topic), {}).get(UNCLEAN_CONFIG)
    if value is None:
        value = image.broker_configs("").get(UNCLEAN_CONFIG)
    if value is None:
        return static_default
    return value.strip().lower() == "true"


def unclean_elections(image: MetadataImage, acceptable: set[int],
                      unclean_enabled: Callable[[str], bool]) -> list[PartitionChangeRecord]:
    """Records electing a leader, unclean if need be, for every leaderless partition of a topic
    with unclean election enabled (Kafka 3.9 ``maybeElectUncleanLeaders``, run periodically and
    after the config changes). ``unclean_enabled(topic name)`` is asked only for topics with a
    leaderless partition."""
    out: list[PartitionChangeRecord] = []
    for t in image.topics.values():
        enabled = None
        for p in t.partitions.values():
            if p.leader != NO_LEADER:
                continue
            if enabled is None:
                enabled = unclean_enabled(t.name)
            if not enabled:
                break
            rec = change(t.topic_id, p, UNCLEAN, acceptable)
            if rec is not None:
                out.append(rec)
    return out


def preferred_elections(image: MetadataImage, acceptable: set[int],
                        limit: int = MAX_ELECTIONS_PER_IMBALANCE) -> tuple[list[PartitionChangeRecord], bool]:
    """Records moving leadership back to the preferred replica of every partition not led by it,
    where it is in the ISR and acceptable (Kafka 3.9 ``maybeBalancePartitionLeaders``, the
    ``auto.leader.rebalance.enable`` task). At most ``limit`` records; the flag says more may be
    due (Kafka reschedules the task at once)."""
    out: list[PartitionChangeRecord] = []
    for t in image.topics.values():
        for p in t.partitions.values():
            if not p.replicas or p.leader == p.replicas[0]:
                continue
            if len(out) >= limit:
                return out, True
            rec = change(t.topic_id, p, PREFERRED, acceptable)
            if rec is not None:
                out.append(rec)
    return out, False


def elect_leaders(image: MetadataImage, election_type: int, topic_partitions: list[tuple[str, list[int]]] | None,
                  acceptable: set[int]) -> tuple[list[TopicElection], list[PartitionChangeRecord]]:
    """ElectLeaders (key 43) on the controller (Kafka 3.9 ``ReplicationControlManager.electLeaders``).

    ``topic_partitions``: ``[(topic, [partition, ...]), ...]`` in request order, or None for every
    partition of every topic (then partitions that need no election are left out of the results).
    Per partition: UNKNOWN_TOPIC_OR_PARTITION; ELECTION_NOT_NEEDED when PREFERRED finds the
    preferred replica leading or UNCLEAN finds any leader; PREFERRED_LEADER_NOT_AVAILABLE /
    ELIGIBLE_LEADERS_NOT_AVAILABLE when the election changes nothing; else NONE and a record. A
    partition named twice is elected once. Raises KafkaError(INVALID_REQUEST) for an unknown
    ``election_type``. Returns (results, records)."""
    if election_type not in (PREFERRED, UNCLEAN):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")
    records: list[PartitionChangeRecord] = []
    elected: dict[tuple[uuid.UUID, int], int] = {}   # partitions given a new leader in this request
    results: list[TopicElection] = []

    def one(topic: str, partition: int) -> PartitionElection:
        t = image.topics.get(topic)
        if t is None:
            return PartitionElection(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}")
        p = t.partitions.get(partition)
        if p is None:
            return PartitionElection(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"No such partition as {topic}-{partition}")
        leader = elected.get((t.topic_id, partition), p.leader)
        if (election_type == PREFERRED and p.replicas and leader == p.replicas[0]) \
                or (election_type == UNCLEAN and leader != NO_LEADER):
            return _error(partition, ErrorCode.ELECTION_NOT_NEEDED)
        rec = change(t.topic_id, p, election_type, acceptable)
        if rec is None:
            return _error(partition, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED
                          else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        records.append(rec)
        if rec.leader != NO_CHANGE_LEADER:
            elected[(t.topic_id, partition)] = rec.leader
        return PartitionElection(partition, ErrorCode.NONE)

    if topic_partitions is None:
        for name, t in image.topics.items():
            out = [r for r in (one(name, pid) for pid in t.partitions)
                   if r.error != ErrorCode.ELECTION_NOT_NEEDED]
            results.append(TopicElection(name, out))
    else:
        for name, partitions in topic_partitions:
            results.append(TopicElection(name, [one(name, pid) for pid in partitions]))
    return results, records


def _error(partition: int, code: ErrorCode) -> PartitionElection:
    return PartitionElection(partition, code, _MESSAGES.get(code))
