"""Directory assignment on the controller (KIP-858): AssignReplicasToDirs records each replica's
log dir in the partition (PartitionChangeRecord ``Directories``, kept by snapshots), with Kafka's
errors; a heartbeat naming an offline dir takes the broker out of leadership and ISR of exactly
the partitions assigned to that dir, once."""

from __future__ import annotations

import uuid

import pytest

from kcompat.kraft.directories import assign_replicas_to_dirs
from kcompat.kraft.image import MetadataImage
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import PartitionChangeRecord
from kcompat.kraft.cluster_control import Listener
from kcompat.protocol.metadata_records import BrokerRegistrationChangeRecord
from tests.kraft.test_cluster_control import T0, Harness

DIR_A, DIR_B = uuid.uuid4(), uuid.uuid4()


@pytest.fixture
def h():
    h = Harness()
    h.epochs = {}
    for b in (1, 2, 3):   # each registers its two log dirs, as a broker with two log.dirs does
        h.epochs[b] = h.cc.register(b, "c1", uuid.uuid4(), [Listener("PLAINTEXT", f"h{b}", 9092)], None, -1, T0,
                                    log_dirs=[DIR_A, DIR_B])
        assert not h.cc.heartbeat(b, h.epochs[b], h.image.offset, False, False, T0).is_fenced
    return h


def assign(h, broker: int, items):
    records, results = assign_replicas_to_dirs(h.image, broker, h.epochs[broker], items)
    h.commit(records, T0)
    return records, results


def test_assignments_are_recorded_per_replica_and_survive_a_snapshot(h):
    t = h.topic("t", 4, 3)
    records, results = assign(h, 2, [(DIR_A if i % 2 else DIR_B, t.topic_id, i) for i in range(4)])
    assert len(records) == 4 and set(results.values()) == {ErrorCode.NONE}
    assert [t.partitions[i].directories[2] for i in range(4)] == [DIR_B, DIR_A, DIR_B, DIR_A]
    epoch = t.partitions[0].partition_epoch
    again, _ = assign(h, 2, [(DIR_B, t.topic_id, 0)])
    assert again == [] and t.partitions[0].partition_epoch == epoch   # unchanged: no record
    assign(h, 3, [(DIR_A, t.topic_id, 0)])
    assert t.partitions[0].directories == {2: DIR_B, 3: DIR_A}
    copy = MetadataImage()
    for i, r in enumerate(h.image.to_records()):
        copy.apply(r, i)
    assert copy.topics["t"].partitions[0].directories == {2: DIR_B, 3: DIR_A}


def test_assignment_errors(h):
    t = h.topic("t", 1, 2)
    outsider = next(b for b in (1, 2, 3) if b not in t.partitions[0].replicas)
    _, results = assign(h, outsider, [(DIR_A, t.topic_id, 0), (DIR_A, t.topic_id, 7), (DIR_A, uuid.uuid4(), 0)])
    assert list(results.values()) == [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      ErrorCode.UNKNOWN_TOPIC_ID]
    with pytest.raises(KafkaError) as e:
        assign_replicas_to_dirs(h.image, 2, h.epochs[2] + 100, [])
    assert e.value.code == ErrorCode.STALE_BROKER_EPOCH
    with pytest.raises(KafkaError) as e:
        assign_replicas_to_dirs(h.image, 9, 0, [])
    assert e.value.code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_an_offline_dir_moves_leadership_and_isr_of_its_partitions_only(h):
    t = h.topic("t", 6, 3)
    assign(h, 2, [(DIR_A if i < 3 else DIR_B, t.topic_id, i) for i in range(6)])
    before = {i: (p.leader, list(p.isr)) for i, p in t.partitions.items()}
    n = len(h.records)
    h.cc.heartbeat(2, h.epochs[2], h.image.offset, False, False, T0, offline_dirs=[DIR_B])
    changes = [r for r in h.records[n:] if isinstance(r, PartitionChangeRecord)]
    assert sorted(r.partition_id for r in changes) == [3, 4, 5]
    for i, p in t.partitions.items():
        if i < 3:
            assert (p.leader, p.isr) == before[i]
        else:
            assert p.leader != 2 and 2 not in p.isr and p.leader in before[i][1]
    assert [r.log_dirs for r in h.records[n:] if isinstance(r, BrokerRegistrationChangeRecord)] == [[DIR_A]]
    assert h.image.brokers[2].log_dirs == [DIR_A]
    assert [h.image.offline_replicas(t.partitions[i]) for i in range(6)] == [[], [], [], [2], [2], [2]]
    n = len(h.records)
    h.cc.heartbeat(2, h.epochs[2], h.image.offset, False, False, T0, offline_dirs=[DIR_B])
    assert h.records[n:] == []   # every heartbeat names the dir; nothing more to do


def test_the_last_in_sync_replica_on_an_offline_dir_leaves_the_partition_leaderless(h):
    t = h.topic("solo", 1, 1)
    broker = t.partitions[0].replicas[0]
    assign(h, broker, [(DIR_A, t.topic_id, 0)])
    h.cc.heartbeat(broker, h.epochs[broker], h.image.offset, False, False, T0, offline_dirs=[DIR_A])
    assert t.partitions[0].leader == -1 and t.partitions[0].isr == [broker]


def test_a_replica_on_an_offline_dir_is_never_elected(h):
    """A single-replica partition whose dir failed stays leaderless, also after its broker comes
    back (registered again) without that dir: electing it would serve an empty log."""
    t = h.topic("solo", 1, 1)
    [b] = t.partitions[0].replicas
    assign(h, b, [(DIR_A, t.topic_id, 0)])
    h.cc.heartbeat(b, h.epochs[b], h.image.offset, False, False, T0, offline_dirs=[DIR_A])
    assert (t.partitions[0].leader, t.partitions[0].isr) == (-1, [b])
    h.epochs[b] = h.cc.register(b, "c1", uuid.uuid4(), [Listener("PLAINTEXT", "h", 9092)], None, h.epochs[b], T0,
                                log_dirs=[DIR_B])   # restarted; DIR_A is gone
    assert h.image.offline_replicas(t.partitions[0]) == [b]
    assert not h.cc.heartbeat(b, h.epochs[b], h.image.offset, False, False, T0).is_fenced
    assert t.partitions[0].leader == -1
    h.epochs[b] = h.cc.register(b, "c1", uuid.uuid4(), [Listener("PLAINTEXT", "h", 9092)], None, h.epochs[b], T0,
                                log_dirs=[DIR_A, DIR_B])   # the disk is back
    h.cc.heartbeat(b, h.epochs[b], h.image.offset, False, False, T0)
    assert t.partitions[0].leader == b
