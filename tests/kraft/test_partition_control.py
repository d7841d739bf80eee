"""AlterPartition on the controller (Kafka's ReplicationControlManager.alterPartition rules), on
an image built by replaying the records, and over the wire on a controller listener."""

from __future__ import annotations

import uuid

import pytest

from kcompat.kraft.partition_control import IsrChange, alter_partition
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_partition import AlterPartitionRequest
from tests.kraft.test_cluster_control import T0, Harness
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until


@pytest.fixture
def h():
    h = Harness()
    for b in (1, 2, 3):
        h.join(b)
    return h


def _change(h, topic: str, pid: int, new_isr, *, leader_epoch=None, partition_epoch=None) -> IsrChange:
    t = h.image.topics[topic]
    p = t.partitions[pid]
    return IsrChange(t.topic_id, pid, p.leader_epoch if leader_epoch is None else leader_epoch, list(new_isr),
                     p.partition_epoch if partition_epoch is None else partition_epoch)


def test_the_leader_shrinks_and_expands_the_isr_with_partition_epochs(h):
    t = h.topic("t", 1, 3)
    p = t.partitions[0]
    leader = p.leader
    others = [r for r in p.replicas if r != leader]
    epoch = h.image.brokers[leader].epoch
    (res,) = alter_partition(h.image, h.commit, leader, epoch, [_change(h, "t", 0, [leader, others[0]])], T0)
    assert (res.error, res.leader, res.leader_epoch, res.isr, res.partition_epoch) == \
        (ErrorCode.NONE, leader, 0, [leader, others[0]], 1)
    assert (p.isr, p.partition_epoch, p.leader_epoch) == ([leader, others[0]], 1, 0)  # ISR changes keep the leader epoch
    (res,) = alter_partition(h.image, h.commit, leader, epoch, [_change(h, "t", 0, [leader, *others])], T0)
    assert res.error == ErrorCode.NONE and p.isr == [leader, *others] and p.partition_epoch == 2


def test_every_refusal_has_kafkas_error(h):
    t = h.topic("t", 1, 3)
    p = t.partitions[0]
    leader = p.leader
    follower = next(r for r in p.replicas if r != leader)
    epoch = h.image.brokers[leader].epoch

    def one(change, broker=leader, broker_epoch=epoch):
        return alter_partition(h.image, h.commit, broker, broker_epoch, [change], T0)[0].error

    assert one(_change(h, "t", 0, [leader]), broker_epoch=epoch + 1) == ErrorCode.STALE_BROKER_EPOCH
    assert one(_change(h, "t", 0, [follower]), broker=follower,
               broker_epoch=h.image.brokers[follower].epoch) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert one(_change(h, "t", 0, [leader], leader_epoch=5)) == ErrorCode.FENCED_LEADER_EPOCH
    assert one(_change(h, "t", 0, [leader], partition_epoch=7)) == ErrorCode.INVALID_UPDATE_VERSION
    assert one(_change(h, "t", 0, [follower])) == ErrorCode.INVALID_REQUEST          # without the leader
    assert one(_change(h, "t", 0, [leader, 99])) == ErrorCode.INVALID_REQUEST        # not a replica
    assert one(_change(h, "t", 0, [leader, leader])) == ErrorCode.INVALID_REQUEST
    bad = _change(h, "t", 0, [leader])
    bad.partition = 5
    assert one(bad) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # shrink to the leader, then a fenced replica cannot come back into the ISR
    assert one(_change(h, "t", 0, [leader])) == ErrorCode.NONE
    h.cc.heartbeat(follower, h.image.brokers[follower].epoch, h.image.offset, True, False, T0)  # want_fence
    assert h.image.brokers[follower].fenced
    assert one(_change(h, "t", 0, [leader, follower])) == ErrorCode.INELIGIBLE_REPLICA
    assert p.isr == [leader] and p.partition_epoch == 1


def test_a_member_at_an_old_broker_epoch_is_ineligible(h):
    """KIP-903: the leader sends the broker epoch it saw each follower fetch with; a follower
    that re-registered since (restarted, maybe with a shorter log) is refused; -1 is not checked."""
    t = h.topic("t", 1, 3)
    p = t.partitions[0]
    leader = p.leader
    follower = next(r for r in p.replicas if r != leader)
    epoch = h.image.brokers[leader].epoch
    seen_epoch = h.image.brokers[follower].epoch      # the epoch the leader saw the follower fetch with
    assert alter_partition(h.image, h.commit, leader, epoch, [_change(h, "t", 0, [leader])], T0)[0].error == 0
    # the follower restarts: a new incarnation registers (clean restart, KIP-966) and catches up
    follower_epoch = h.register(follower, T0 + 1000, incarnation=uuid.uuid4(), previous=seen_epoch)
    assert follower_epoch > seen_epoch
    assert not h.cc.heartbeat(follower, follower_epoch, h.image.offset, False, False, T0 + 1001).is_fenced
    stale = _change(h, "t", 0, [leader, follower])
    stale.broker_epochs = {leader: epoch, follower: seen_epoch}
    (res,) = alter_partition(h.image, h.commit, leader, epoch, [stale], T0)
    assert res.error == ErrorCode.INELIGIBLE_REPLICA and p.isr == [leader]
    current = _change(h, "t", 0, [leader, follower])
    current.broker_epochs = {leader: -1, follower: follower_epoch}
    (res,) = alter_partition(h.image, h.commit, leader, epoch, [current], T0)
    assert res.error == ErrorCode.NONE and p.isr == [leader, follower]


def test_alter_partition_over_the_wire_on_the_controller_listener(tmp_path):
    with Cluster(tmp_path) as cluster:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("ap", 1, 3)], operation_timeout=15)["ap"].result(15)
        from kcompat.protocol.messages.describe_cluster import DescribeClusterRequest  # noqa: F401
        from kcompat.protocol.messages.metadata import MetadataRequest
        md = wait_until(lambda: (lambda r: r if r.topics and r.topics[0].partitions else None)(
            wire.call(cluster.bootstrap.split(",")[0], MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name="ap")], allow_auto_topic_creation=False), 12)),
            10, "metadata")
        topic = md.topics[0]
        part = topic.partitions[0]
        controller = f"127.0.0.1:{cluster.controller_ports[cluster.leader_id() - 1]}"
        req = AlterPartitionRequest(broker_id=part.leader_id, broker_epoch=-1, topics=[
            AlterPartitionRequest.TopicData(topic_id=topic.topic_id, partitions=[
                AlterPartitionRequest.PartitionData(
                    partition_index=0, leader_epoch=part.leader_epoch, partition_epoch=0,
                    new_isr_with_epochs=[AlterPartitionRequest.BrokerState(broker_id=part.leader_id, broker_epoch=-1)])])])
        resp = wire.call(controller, req, 3)
        p = resp.topics[0].partitions[0]
        assert (resp.error_code, p.error_code, p.isr, p.partition_epoch) == (0, 0, [part.leader_id], 1)
        # the followers are caught up, so the leader proposes them back (its own AlterPartition):
        # another broker soon shows the full ISR again
        wait_until(lambda: sorted(wire.call(cluster.bootstrap.split(",")[1], MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="ap")], allow_auto_topic_creation=False),
            12).topics[0].partitions[0].isr_nodes) == sorted(part.replica_nodes), 10,
            "the ISR expanded again on another broker")
