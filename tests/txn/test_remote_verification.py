"""KIP-890 part 1 verification across brokers: the leader of a partition asks the transaction
coordinator on another broker (AddPartitionsToTxn v5, ``verify_only``) before it accepts the
batch that opens a producer's transaction in that partition. A batch for a partition that was
never added to the transaction is refused (a hanging transaction prevented); once the partition
is added the same batch is accepted, and a confluent-kafka transactional producer writing to
partitions led away from its coordinator works end to end. The same holds for a TxnOffsetCommit
whose group coordinator is not its transaction coordinator: ``__consumer_offsets``-<partition of
the group> must be in the transaction (AddOffsetsToTxn) before the offsets are written."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kcompat.protocol.messages.end_txn import EndTxnRequest
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from tests.group.test_failover_cluster import coordinator
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until

TID = "remote-verify"


def _address(cluster: Cluster, node_id: int) -> str:
    return f"127.0.0.1:{cluster.client_ports[node_id - 1]}"


def _produce(address: str, topic: str, pid: int, epoch: int, seq: int):
    batch = rb.build_batch([(1_700_000_000_000, b"k", b"v%d" % seq, ())], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, transactional=True)
    req = ProduceRequest(transactional_id=TID, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return wire.call(address, req, 9).responses[0].partition_responses[0]


def test_a_partition_leader_verifies_with_a_remote_coordinator(tmp_path):
    overrides = {"transaction.state.log.replication.factor": "3", "offsets.topic.replication.factor": "3"}
    with Cluster(tmp_path, 3, overrides=overrides) as c:
        coord = wait_until(lambda: coordinator(c, TID, 1), 20, "a transaction coordinator")
        leader = next(n for n in (1, 2, 3) if n != coord)
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic("verified", 1, replica_assignment=[[leader, coord]])])["verified"].result(15)
        wait_until(lambda: _produce_probe(c, leader), 20, "the partition led by node %d" % leader)

        init = wire.call(_address(c, coord), InitProducerIdRequest(
            transactional_id=TID, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1), 4)
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch

        # not added to the transaction: the leader asks node `coord`, which says no
        refused = _produce(_address(c, leader), "verified", pid, epoch, 0)
        assert refused.error_code == ErrorCode.INVALID_TXN_STATE, ErrorCode(refused.error_code).name

        R = AddPartitionsToTxnRequest
        added = wire.call(_address(c, coord), R(
            v3_and_below_transactional_id=TID, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[R.AddPartitionsToTxnTopic(name="verified", partitions=[0])]), 3)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        first = _produce(_address(c, leader), "verified", pid, epoch, 0)
        assert first.error_code == 0
        second = _produce(_address(c, leader), "verified", pid, epoch, 1)  # in the open transaction now
        assert second.error_code == 0 and second.base_offset == first.base_offset + 1
        ended = wire.call(_address(c, coord), EndTxnRequest(transactional_id=TID, producer_id=pid,
                                                            producer_epoch=epoch, committed=True), 3)
        assert ended.error_code == 0

        # a real transactional producer over the same layout commits and aborts as usual
        producer = ck.Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "remote-verify-2"})
        producer.init_transactions(30)
        for commit in (True, False, True):
            producer.begin_transaction()
            for i in range(10):
                producer.produce("verified", value=b"%s-%d" % (b"c" if commit else b"a", i), partition=0)
            producer.commit_transaction(30) if commit else producer.abort_transaction(30)
        consumer = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "reader",
                                "isolation.level": "read_committed", "enable.auto.commit": False})
        try:
            consumer.assign([ck.TopicPartition("verified", 0, 0)])
            got = []
            wait_until(lambda: _poll_into(consumer, got) and len(got) >= 23, 30, "the committed records")
            assert sorted(got) == sorted([b"probe", b"v0", b"v1"] + [b"c-%d" % i for i in range(10)] * 2)
        finally:
            consumer.close()


def _poll_into(consumer, got: list) -> bool:
    m = consumer.poll(0.2)
    if m is not None and not m.error():
        got.append(m.value())
    return True


def _produce_probe(cluster: Cluster, leader: int) -> bool:
    """True once node ``leader`` leads ``verified``-0 (a non-transactional acks=1 produce works)."""
    req = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name="verified", partition_data=[ProduceRequest.PartitionProduceData(
            index=0, records=rb.build_batch([(1_700_000_000_000, b"k", b"probe", ())]))])])
    return wire.call(_address(cluster, leader), req, 9).responses[0].partition_responses[0].error_code == 0


OFFSETS_TID = "remote-verify-offsets"
# what a TxnOffsetCommit answers while a coordinator loads, moves or is busy: clients retry
_RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


def test_a_group_coordinator_verifies_txn_offset_commits_with_a_remote_coordinator(tmp_path):
    """KIP-890 part 1 for TxnOffsetCommit (Kafka's GroupCoordinator with
    ``transaction.partition.verification.enable``): the group coordinator asks the transaction
    coordinator on another broker whether the group's ``__consumer_offsets`` partition is in the
    producer's transaction. Without AddOffsetsToTxn, or after the transaction ended, the commit is
    refused with INVALID_TXN_STATE instead of leaving pending offsets that never complete."""
    overrides = {"transaction.state.log.replication.factor": "3", "offsets.topic.replication.factor": "3"}
    with Cluster(tmp_path, 3, overrides=overrides) as c:
        txn_coord = wait_until(lambda: coordinator(c, OFFSETS_TID, 1), 20, "a transaction coordinator")
        group, group_coord = _group_led_away_from(c, txn_coord)
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic("consumed", 1, 3)])["consumed"].result(15)
        wait_until(lambda: all("consumed" in _topics(c, n) for n in (1, 2, 3)), 20, "the topic on every broker")

        init = wire.call(_address(c, txn_coord), InitProducerIdRequest(
            transactional_id=OFFSETS_TID, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1), 4)
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch

        # no AddOffsetsToTxn: node `txn_coord` says __consumer_offsets-<p> is not in the transaction
        refused = _txn_offset_commit(c, group_coord, group, pid, epoch, 42)
        assert refused == ErrorCode.INVALID_TXN_STATE, refused.name

        added = wire.call(_address(c, txn_coord), AddOffsetsToTxnRequest(
            transactional_id=OFFSETS_TID, producer_id=pid, producer_epoch=epoch, group_id=group), 3)
        assert added.error_code == 0
        assert _txn_offset_commit(c, group_coord, group, pid, epoch, 42) == ErrorCode.NONE
        ended = wire.call(_address(c, txn_coord), EndTxnRequest(transactional_id=OFFSETS_TID, producer_id=pid,
                                                                producer_epoch=epoch, committed=True), 3)
        assert ended.error_code == 0
        wait_until(lambda: _fetch_stable(c, group_coord, group) == (0, 42), 30, "the committed offset, stable")

        # the transaction is over: a late commit of the same producer is refused, no hanging offsets
        late = _txn_offset_commit(c, group_coord, group, pid, epoch, 99)
        assert late == ErrorCode.INVALID_TXN_STATE, late.name
        assert _fetch_stable(c, group_coord, group) == (0, 42)


def _group_led_away_from(cluster: Cluster, node: int) -> tuple[str, int]:
    """A group id whose coordinator is not node ``node``, and its coordinator."""
    for i in range(200):
        group = f"remote-verify-group-{i}"
        owner = wait_until(lambda: coordinator(cluster, group), 20, "a group coordinator")
        if owner != node:
            return group, owner
    raise AssertionError(f"every group is coordinated by node {node}")


def _topics(cluster: Cluster, node: int) -> set[str]:
    resp = wire.call(_address(cluster, node), MetadataRequest(topics=None, allow_auto_topic_creation=False), 9)
    return {t.name for t in resp.topics if t.error_code == 0}


def _txn_offset_commit(cluster: Cluster, node: int, group: str, pid: int, epoch: int, offset: int) -> ErrorCode:
    """TxnOffsetCommit v3 of ``consumed``-0 to node ``node``, retried on retriable coordinator
    errors as producers do; the partition's error."""
    T = TxnOffsetCommitRequest
    req = T(transactional_id=OFFSETS_TID, group_id=group, producer_id=pid, producer_epoch=epoch, topics=[
        T.TxnOffsetCommitRequestTopic(name="consumed", partitions=[
            T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])
    for _ in range(150):
        code = ErrorCode(wire.call(_address(cluster, node), req, 3).topics[0].partitions[0].error_code)
        if code not in _RETRIABLE:
            return code
        time.sleep(0.2)
    raise AssertionError(f"TxnOffsetCommit kept failing with {code.name}")


def _fetch_stable(cluster: Cluster, node: int, group: str) -> tuple[int, int]:
    """OffsetFetch v7 with ``require_stable`` (KIP-447): (error, committed offset) of ``consumed``-0."""
    resp = wire.call(_address(cluster, node), OffsetFetchRequest(group_id=group, require_stable=True, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="consumed", partition_indexes=[0])]), 7)
    p = resp.topics[0].partitions[0] if resp.topics else None
    return (resp.error_code or (p.error_code if p else 0), p.committed_offset if p else -1)
