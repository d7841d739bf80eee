"""Partition reassignment on the active controller (KIP-455): AlterPartitionReassignments and
ListPartitionReassignments, and the completion of a reassignment when its new replicas are in sync.

I/O free, as :mod:`kcompat.kraft.leader_election`: functions read the :class:`MetadataImage` and
return ``PartitionChangeRecord``\\ s. The rules are Kafka 4.3's ``ReplicationControlManager``
(``alterPartitionReassignment``, ``changePartitionReassignment``, ``cancelPartitionReassignment``,
``listPartitionReassignments``), ``PartitionReassignmentReplicas``, ``PartitionReassignmentRevert``
and ``PartitionChangeBuilder.build``:

1. A new target replica list ``T`` for a partition with replicas ``R`` records
   ``replicas = T + sorted(R - T)``, ``adding_replicas = sorted(T - R)``,
   ``removing_replicas = sorted(R - T)``. The brokers of the adding replicas host the partition as
   followers of the current leader, fetch from it and join the ISR through the leader's
   AlterPartition.
2. Every partition change (:func:`build_change`, used for AlterPartition and when a broker is
   fenced or unregistered) completes the reassignment as soon as the ISR without the removing
   replicas holds every remaining replica: replicas and ISR lose the removing ones, adding and
   removing become empty, the leader epoch is bumped (a removed replica's fetches are fenced) and,
   if the leader was removed, the first target replica in the ISR (in target order) leads.
   A broker dropped from a partition's replicas stops it and deletes its log.
3. Cancelling (``replicas`` null) reverts: the adding replicas leave the replica list and the
   ISR; NO_REASSIGNMENT_IN_PROGRESS when none is in progress; INVALID_REPLICA_ASSIGNMENT when only
   adding replicas are in sync and the topic does not allow an unclean election.

Target lists are checked as Kafka's ``validateManualPartitionAssignment``: empty list, unknown
broker, broker named twice -> INVALID_REPLICA_ASSIGNMENT (Kafka's messages). Unknown topic or
partition -> UNKNOWN_TOPIC_OR_PARTITION. Each partition succeeds or fails on its own; the records
of all that succeed are committed as one batch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kcompat.kraft.controller import validate_replica_list
from kcompat.kraft.image import NO_CHANGE_LEADER, MetadataImage, PartitionImage
from kcompat.kraft.leader_election import ONLINE, UNCLEAN, choose_leader
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import PartitionChangeRecord


@dataclass
class PartitionResult:
    """AlterPartitionReassignmentsResponse.ReassignablePartitionResponse: NONE or the error."""

    partition: int
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass
class TopicResult:
    """One topic of the AlterPartitionReassignments answer, partitions in request order."""

    name: str
    partitions: list[PartitionResult] = field(default_factory=list)


@dataclass
class Ongoing:
    """ListPartitionReassignmentsResponse.OngoingPartitionReassignment: broker ids."""

    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


def build_change(topic_id: uuid.UUID, p: PartitionImage, acceptable: set[int], *, election: int = ONLINE,
                 isr: list[int] | None = None, replicas: list[int] | None = None, adding: list[int] | None = None,
                 removing: list[int] | None = None) -> PartitionChangeRecord | None:
    """The PartitionChangeRecord taking ``p`` to the target ``isr`` / ``replicas`` / ``adding`` /
    ``removing`` (None: unchanged), completing a reassignment the target ISR allows, electing a
    leader (``election`` ONLINE or UNCLEAN among ``acceptable`` brokers, in target replica order)
    and bumping the leader epoch when replicas are removed (Kafka ``PartitionChangeBuilder.build``);
    None when nothing changes."""
    t_isr = list(p.isr if isr is None else isr)
    t_replicas = list(p.replicas if replicas is None else replicas)
    t_adding = list(p.adding_replicas if adding is None else adding)
    t_removing = list(p.removing_replicas if removing is None else removing)
    completed = _completed(t_replicas, t_isr, t_adding, t_removing)
    if completed is not None:
        t_replicas, t_isr = completed
        t_adding, t_removing = [], []
    rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=topic_id, leader=NO_CHANGE_LEADER)
    chosen = choose_leader(t_replicas, t_isr, p.leader, election, acceptable)
    if chosen.leader != p.leader:
        rec.leader = chosen.leader
        if chosen.unclean:
            rec.isr = [chosen.leader]
    elif not set(p.replicas) <= set(t_replicas):
        rec.leader = p.leader   # same leader, new epoch: the removed replicas are fenced
    if rec.isr is None and t_isr and t_isr != p.isr:
        rec.isr = t_isr
    if t_replicas != p.replicas:
        rec.replicas = t_replicas
    if t_removing != p.removing_replicas:
        rec.removing_replicas = t_removing
    if t_adding != p.adding_replicas:
        rec.adding_replicas = t_adding
    if rec.leader == NO_CHANGE_LEADER and rec.isr is None and rec.replicas is None \
            and rec.removing_replicas is None and rec.adding_replicas is None:
        return None
    return rec


def _completed(replicas: list[int], isr: list[int], adding: list[int],
               removing: list[int]) -> tuple[list[int], list[int]] | None:
    """(replicas, ISR) once the reassignment completes with this ISR, else None (Kafka
    ``PartitionReassignmentReplicas.maybeCompleteReassignment``)."""
    if not adding and not removing:
        return None
    new_isr = [r for r in isr if r not in removing]
    new_replicas = [r for r in replicas if r not in removing]
    if not new_isr or not new_replicas or not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def alter_reassignments(image: MetadataImage, topics: list[tuple[str, list[tuple[int, list[int] | None]]]],
                        acceptable: set[int], unclean_enabled, allow_rf_change: bool = True,
                        ) -> tuple[list[TopicResult], list[PartitionChangeRecord]]:
    """AlterPartitionReassignments (key 45) on the controller. ``topics``: ``[(name, [(partition,
    target replicas or None to cancel), ...]), ...]`` in request order; ``acceptable``: brokers
    that may lead; ``unclean_enabled(topic)``: the topic's ``unclean.leader.election.enable``;
    ``allow_rf_change`` False (v1, KIP-860): a valid target of another size than the partition's
    replication factor (the ongoing reassignment's target, if any) is INVALID_REPLICATION_FACTOR.
    Returns (results, records to commit atomically)."""
    records: list[PartitionChangeRecord] = []
    results = []
    for name, partitions in topics:
        tr = TopicResult(name)
        results.append(tr)
        for pid, target in partitions:
            try:
                rec = _alter_one(image, name, pid, target, acceptable, unclean_enabled, allow_rf_change)
            except KafkaError as e:
                tr.partitions.append(PartitionResult(pid, e.code, e.message))
                continue
            if rec is not None:
                records.append(rec)
            tr.partitions.append(PartitionResult(pid))
    return results, records


def _alter_one(image: MetadataImage, name: str, pid: int, target: list[int] | None, acceptable: set[int],
               unclean_enabled, allow_rf_change: bool) -> PartitionChangeRecord | None:
    t = image.topics.get(name)
    if t is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    p = t.partitions.get(pid)
    if p is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{pid}.")
    unclean = unclean_enabled(name)
    election = UNCLEAN if unclean else ONLINE
    if target is None:
        if not p.reassigning:
            # no message: Kafka 3.9.2 and 4.3.1 answer a null error_message (clients print the
            # code's own text, "No partition reassignment is in progress.")
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        replicas = [r for r in p.replicas if r not in p.adding_replicas]
        isr = [r for r in p.isr if r not in p.adding_replicas]
        if not isr:   # only adding replicas are in sync: reverting elects an out-of-sync replica
            if not replicas:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "Invalid replica assignment: addingReplicas contains all replicas.")
            if not unclean:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unable to revert partition assignment for {name}:{pid} because it would "
                                 f"require an unclean leader election.")
            isr = [replicas[0]]
        return build_change(t.topic_id, p, acceptable, election=election, isr=isr, replicas=replicas,
                            adding=[], removing=[])
    validate_replica_list(target, set(image.brokers))
    rf = len(p.replicas) - len(p.removing_replicas)
    if not allow_rf_change and len(target) != rf:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"The replication factor is changed from {rf} to {len(target)}")
    removing = sorted(set(p.replicas) - set(target))
    adding = sorted(set(target) - set(p.replicas))
    replicas = list(target) + removing
    return build_change(t.topic_id, p, acceptable, election=election,
                        replicas=replicas if replicas != p.replicas else None,
                        removing=removing or None, adding=adding or None)


def list_reassignments(image: MetadataImage,
                       topics: list[tuple[str, list[int]]] | None) -> list[tuple[str, list[Ongoing]]]:
    """ListPartitionReassignments (key 46): ``[(topic, [Ongoing, ...]), ...]`` for the partitions in
    ``topics`` (``[(name, [partition, ...])]``; None: every partition) that are being reassigned.
    Unknown topics and partitions, and topics with nothing in progress, are left out (as Kafka)."""
    out = []
    if topics is None:
        topics = [(name, sorted(t.partitions)) for name, t in sorted(image.topics.items())]
    for name, pids in topics:
        t = image.topics.get(name)
        if t is None:
            continue
        ongoing = [Ongoing(pid, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                   for pid in pids for p in [t.partitions.get(pid)] if p is not None and p.reassigning]
        if ongoing:
            out.append((name, ongoing))
    return out
