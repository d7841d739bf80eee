"""ISR changes requested by partition leaders: AlterPartition on the active controller.

As Kafka's ``ReplicationControlManager.alterPartition`` (KIP-497, KIP-704, KIP-903): the leader
proposes a new ISR for a partition at the partition epoch it knows; the controller checks, in
Kafka's order, that the leader's broker epoch is current (STALE_BROKER_EPOCH), that the topic and
partition exist (UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION), that the requester leads it
(NOT_LEADER_OR_FOLLOWER), at this leader epoch (FENCED_LEADER_EPOCH) and partition epoch
(INVALID_UPDATE_VERSION), that the new ISR holds the leader and only replicas (INVALID_REQUEST),
and that every member is registered, unfenced and not shutting down and, where the request gives
a member's broker epoch (v3 ``new_isr_with_epochs``), still at that epoch: a replica that
restarted since the leader saw it fetch is not let back in on its old log (INELIGIBLE_REPLICA).
An accepted change is a PartitionChangeRecord; the answer is the partition as it will be after
the record (same leader and leader epoch, the new ISR, partition epoch + 1). An ISR that brings
every target replica of a reassignment in sync completes it in the same record
(:func:`kcompat.kraft.reassignment.build_change`): the removed replicas leave, the leader epoch is
bumped, and when the requesting leader itself is removed the answer is NEW_LEADER_ELECTED (v2+,
FENCED_LEADER_EPOCH before) while the record moves leadership, as Kafka's ``alterPartition``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

from kcompat.kraft.image import NO_CHANGE_LEADER, MetadataImage
from kcompat.kraft.leader_election import acceptable_leaders
from kcompat.kraft.reassignment import build_change
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.metadata_records import PartitionChangeRecord


@dataclass
class IsrChange:
    """One partition of an AlterPartition request."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int
    # broker epoch of each new ISR member as the leader saw it in its fetches (KIP-903); -1 or
    # absent: not checked
    broker_epochs: dict[int, int] | None = None


@dataclass
class IsrChangeResult:
    """The AlterPartition answer for one partition (leader -1 and epochs -1 on error)."""

    error: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: list[int] | None = None
    partition_epoch: int = -1


def alter_partition(image: MetadataImage, sink: Callable[[list, int], None], broker_id: int, broker_epoch: int,
                    changes: list[IsrChange], now_ms: int, version: int = 3) -> list[IsrChangeResult]:
    """Validate and record ISR changes; one result per change, in order (``version``: of the
    AlterPartition request, for the error a leader removed by a reassignment gets)."""
    b = image.brokers.get(broker_id)
    if b is None or (broker_epoch != -1 and b.epoch != broker_epoch):
        return [IsrChangeResult(ErrorCode.STALE_BROKER_EPOCH) for _ in changes]
    records, results = [], []
    acceptable = None
    for c in changes:
        result = _check(image, broker_id, c)
        if result.error == ErrorCode.NONE:
            p = image.topics_by_id[c.topic_id].partitions[c.partition]
            if p.reassigning:
                if acceptable is None:
                    acceptable = acceptable_leaders(image)
                rec = build_change(c.topic_id, p, acceptable, isr=list(c.new_isr))
            else:
                rec = PartitionChangeRecord(partition_id=c.partition, topic_id=c.topic_id,
                                            isr=list(c.new_isr), leader=NO_CHANGE_LEADER)
            if rec is not None:
                records.append(rec)
                result = _after(p, rec, broker_id, version)
            else:
                result = IsrChangeResult(ErrorCode.NONE, p.leader, p.leader_epoch, list(p.isr), p.partition_epoch)
        results.append(result)
    if records:
        sink(records, now_ms)
    return results


def _after(p, rec: PartitionChangeRecord, broker_id: int, version: int) -> IsrChangeResult:
    """The answer for an accepted change: the partition as ``rec`` leaves it."""
    if rec.leader not in (NO_CHANGE_LEADER, broker_id):
        return IsrChangeResult(ErrorCode.NEW_LEADER_ELECTED if version > 1 else ErrorCode.FENCED_LEADER_EPOCH)
    epoch = p.leader_epoch + (rec.leader != NO_CHANGE_LEADER)
    return IsrChangeResult(ErrorCode.NONE, p.leader, epoch, list(rec.isr if rec.isr is not None else p.isr),
                           p.partition_epoch + 1)


def _check(image: MetadataImage, broker_id: int, c: IsrChange) -> IsrChangeResult:
    t = image.topics_by_id.get(c.topic_id)
    if t is None:
        return IsrChangeResult(ErrorCode.UNKNOWN_TOPIC_ID)
    p = t.partitions.get(c.partition)
    if p is None:
        return IsrChangeResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if p.leader != broker_id:
        return IsrChangeResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if c.leader_epoch != p.leader_epoch:
        return IsrChangeResult(ErrorCode.FENCED_LEADER_EPOCH)
    if c.partition_epoch != p.partition_epoch:
        return IsrChangeResult(ErrorCode.INVALID_UPDATE_VERSION)
    if broker_id not in c.new_isr or len(set(c.new_isr)) != len(c.new_isr) \
            or any(r not in p.replicas for r in c.new_isr):
        return IsrChangeResult(ErrorCode.INVALID_REQUEST)
    for r in c.new_isr:
        rb = image.brokers.get(r)
        epoch = (c.broker_epochs or {}).get(r, -1)
        if rb is None or rb.fenced or rb.in_controlled_shutdown or (epoch != -1 and rb.epoch != epoch):
            return IsrChangeResult(ErrorCode.INELIGIBLE_REPLICA)
    return IsrChangeResult(ErrorCode.NONE, p.leader, p.leader_epoch, list(c.new_isr), p.partition_epoch + 1)
