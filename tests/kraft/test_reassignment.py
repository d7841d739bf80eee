"""Partition reassignment on the controller (Kafka 4.3's ReplicationControlManager /
PartitionChangeBuilder rules), on an image built by replaying the records: the replica lists
during a move, completion through the leader's AlterPartition (the leader moving to the first
target replica when it is removed, with NEW_LEADER_ELECTED for it), fencing during a move,
cancellation, listing, a snapshot keeping a move in progress, and the errors."""

from __future__ import annotations

import pytest

from kcompat.kraft.image import MetadataImage
from kcompat.kraft.partition_control import IsrChange, alter_partition
from kcompat.kraft.reassignment import list_reassignments
from kcompat.protocol.errors import ErrorCode
from tests.kraft.test_cluster_control import T0, Harness


@pytest.fixture
def h():
    h = Harness()
    for b in (1, 2, 3, 4):
        h.join(b)
    return h


def _topic(h, assignment):
    from kcompat.kraft.controller import NewTopic
    (res,) = h.controller.create_topics([NewTopic("t", assignments=dict(enumerate(assignment)))],
                                        validate_only=False, now_ms=T0)
    assert res.error == ErrorCode.NONE, res
    return h.image.topics["t"]


def _expand(h, pid: int, new_isr, version: int = 3):
    """The partition's leader proposes ``new_isr`` (AlterPartition)."""
    t = h.image.topics["t"]
    p = t.partitions[pid]
    (res,) = alter_partition(h.image, h.commit, p.leader, h.image.brokers[p.leader].epoch,
                             [IsrChange(t.topic_id, pid, p.leader_epoch, list(new_isr), p.partition_epoch)], T0,
                             version)
    return res


def _state(p):
    return p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader


def test_a_move_adds_then_completes_when_the_new_replica_is_in_sync(h):
    t = _topic(h, [[1, 2, 3]])
    p = t.partitions[0]
    (res,) = h.cc.alter_reassignments([("t", [(0, [1, 2, 4])])], T0)
    assert [(r.partition, r.error) for r in res.partitions] == [(0, ErrorCode.NONE)]
    assert _state(p) == ([1, 2, 4, 3], [1, 2, 3], [4], [3], 1)
    assert list_reassignments(h.image, None)[0][0] == "t"
    epoch = p.leader_epoch
    res = _expand(h, 0, [1, 2, 3, 4])
    assert _state(p) == ([1, 2, 4], [1, 2, 4], [], [], 1)
    assert p.leader_epoch == epoch + 1          # the removed replica's fetches are fenced
    assert (res.error, res.leader, res.leader_epoch, res.isr) == (ErrorCode.NONE, 1, epoch + 1, [1, 2, 4])
    assert list_reassignments(h.image, None) == []


def test_a_removed_leader_hands_over_to_the_first_target_replica(h):
    t = _topic(h, [[1, 2, 3]])
    p = t.partitions[0]
    h.cc.alter_reassignments([("t", [(0, [4, 2, 3])])], T0)
    assert _state(p) == ([4, 2, 3, 1], [1, 2, 3], [4], [1], 1)
    res = _expand(h, 0, [1, 2, 3, 4])
    assert res.error == ErrorCode.NEW_LEADER_ELECTED
    assert _state(p) == ([4, 2, 3], [2, 3, 4], [], [], 4)
    h.cc.alter_reassignments([("t", [(0, [1, 2, 3])])], T0)
    assert _expand(h, 0, [1, 2, 3, 4], version=1).error == ErrorCode.FENCED_LEADER_EPOCH   # before v2


def test_reordering_or_shrinking_in_sync_replicas_completes_at_once(h):
    t = _topic(h, [[1, 2, 3], [1, 2, 3]])
    h.cc.alter_reassignments([("t", [(0, [3, 2, 1]), (1, [2, 3])])], T0)
    assert _state(t.partitions[0]) == ([3, 2, 1], [1, 2, 3], [], [], 1)
    assert _state(t.partitions[1]) == ([2, 3], [2, 3], [], [], 2)


def _fence(h, b: int) -> None:
    h.cc.heartbeat(b, h.image.brokers[b].epoch, h.image.offset, True, False, T0)


def test_a_fenced_replica_leaves_the_isr_during_a_move_and_the_leader_moves_to_a_target(h):
    t = _topic(h, [[1, 2]])
    p = t.partitions[0]
    h.cc.alter_reassignments([("t", [(0, [3, 4])])], T0)
    _expand(h, 0, [1, 2, 3])
    assert _state(p) == ([3, 4, 1, 2], [1, 2, 3], [3, 4], [1, 2], 1)
    _fence(h, 1)
    assert _state(p) == ([3, 4, 1, 2], [2, 3], [3, 4], [1, 2], 3)   # first target replica in the ISR
    _expand(h, 0, [2, 3, 4])
    assert _state(p) == ([3, 4], [3, 4], [], [], 3)


def test_cancel_reverts_and_errors_are_kafkas(h):
    t = _topic(h, [[1, 2, 3], [1, 2, 3]])
    p = t.partitions[0]
    h.cc.alter_reassignments([("t", [(0, [4, 2, 3])])], T0)
    (res,) = h.cc.alter_reassignments([("t", [(0, None), (1, None)])], T0)
    assert [(r.error, r.message) for r in res.partitions] == [
        (ErrorCode.NONE, None), (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)]
    assert _state(p) == ([2, 3, 1], [1, 2, 3], [], [], 1)   # Kafka's revert: target minus adding, then removing
    bad = h.cc.alter_reassignments([("t", [(5, [1]), (1, [1, 9]), (1, [2, 2]), (1, [])]), ("x", [(0, [1])])], T0)
    assert [(r.error, r.message) for tr in bad for r in tr.partitions] == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:5."),
        (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 9, but no such broker is registered."),
        (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker 2 more than once."),
        (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named x."),
    ]


def test_cancel_needing_an_unclean_election_is_refused(h):
    t = _topic(h, [[1, 2]])
    p = t.partitions[0]
    h.cc.alter_reassignments([("t", [(0, [3, 4])])], T0)
    _expand(h, 0, [1, 2, 3])
    _fence(h, 1)
    _fence(h, 2)
    assert _state(p) == ([3, 4, 1, 2], [3], [3, 4], [1, 2], 3)   # only an adding replica in sync
    (res,) = h.cc.alter_reassignments([("t", [(0, None)])], T0)
    assert (res.partitions[0].error, res.partitions[0].message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Unable to revert partition assignment for t:0 because it would require an unclean leader election.")
    assert _state(p) == ([3, 4, 1, 2], [3], [3, 4], [1, 2], 3)


def test_a_snapshot_keeps_a_move_in_progress(h):
    _topic(h, [[1, 2, 3]])
    h.cc.alter_reassignments([("t", [(0, [1, 2, 4])])], T0)
    copy = MetadataImage()
    for i, r in enumerate(h.image.to_records()):
        copy.apply(r, i)
    assert _state(copy.topics["t"].partitions[0]) == ([1, 2, 4, 3], [1, 2, 3], [4], [3], 1)


def test_a_request_that_forbids_changing_the_replication_factor(h):
    """AlterPartitionReassignments v1 with AllowReplicationFactorChange false (KIP-860): a valid
    target of another size is INVALID_REPLICATION_FACTOR (the replica list is checked first, as
    Apache Kafka 4.3.1 answered side by side); during a move the factor is the move's target's."""
    t = _topic(h, [[1, 2], [1, 2], [2, 3]])
    res, = h.cc.alter_reassignments([("t", [(0, [1, 2, 3]), (0, [1]), (0, [1, 9]), (1, [3, 4]), (2, [3, 4, 1])])],
                                    T0, allow_rf_change=False)
    assert [(r.error, r.message) for r in res.partitions] == [
        (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3"),
        (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 1"),
        (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 9, but no such broker is registered."),
        (ErrorCode.NONE, None),
        (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3")]
    assert _state(t.partitions[0]) == ([1, 2], [1, 2], [], [], 1)
    assert _state(t.partitions[1]) == ([3, 4, 1, 2], [1, 2], [3, 4], [1, 2], 1)   # moving to [3, 4]
    res, = h.cc.alter_reassignments([("t", [(1, [4, 1, 2]), (1, [1, 4])])], T0, allow_rf_change=False)
    assert [(r.error, r.message) for r in res.partitions] == [
        (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3"), (ErrorCode.NONE, None)]
    res, = h.cc.alter_reassignments([("t", [(2, [2, 3, 4])])], T0)   # allowed by default (v0)
    assert res.partitions[0].error == ErrorCode.NONE
