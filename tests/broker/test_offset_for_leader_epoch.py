"""OffsetForLeaderEpoch (key 23) v0-4 over the wire against a real broker process: end offsets
from the leader-epoch cache, KIP-320 epoch fencing errors, unknown partitions, the
leader-epoch-checkpoint file on disk, and answers after a restart that rebuilds it."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.broker.handlers import offset_for_leader_epoch as handler
from kcompat.isr.partition import Partition
from kcompat.log import Log, LogConfig
from kcompat.protocol import records as rb
from kcompat.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest as Q
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess

UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 3, 6, 74, 75


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(bootstrap: str, topic: str, n: int) -> int:
    """One batch of ``n`` records to partition 0 with acks=1; returns its base offset."""
    batch = rb.build_batch([(1_700_000_000_000 + i, b"k", b"v%d" % i, ()) for i in range(n)])
    req = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    resp = wire.call(bootstrap, req, 9)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0
    return part.base_offset


def ask(bootstrap: str, topic: str, epoch: int, *, version: int = 4, current: int = -1, partition: int = 0,
        replica_id: int = -1):
    req = Q(replica_id=replica_id, topics=[Q.OffsetForLeaderTopic(topic=topic, partitions=[
        Q.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current, leader_epoch=epoch)])])
    resp = wire.call(bootstrap, req, version)
    assert [t.topic for t in resp.topics] == [topic]
    p = resp.topics[0].partitions[0]
    assert p.partition == partition
    return p.error_code, p.leader_epoch, p.end_offset


def test_end_offset_of_the_current_epoch_in_every_version(broker):
    topic = f"olep-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 2)
    assert ask(broker.bootstrap, topic, 0, version=0) == (0, -1, 5)      # v0 has no leader epoch field
    for version in range(1, 5):
        assert ask(broker.bootstrap, topic, 0, version=version) == (0, 0, 5), version
    assert ask(broker.bootstrap, topic, -1) == (0, -1, -1)               # UNDEFINED_EPOCH
    assert ask(broker.bootstrap, topic, 3) == (0, -1, -1)                # above every epoch
    produce(broker.bootstrap, topic, 1)
    assert ask(broker.bootstrap, topic, 0, current=0) == (0, 0, 6)       # the LEO moves with the epoch


def test_fencing_and_unknown_partitions(broker):
    topic = f"olep-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, 1)
    for version in (2, 3, 4):
        assert ask(broker.bootstrap, topic, 0, version=version, current=1) == (UNKNOWN_LEADER_EPOCH, -1, -1)
    assert ask(broker.bootstrap, topic, 0, version=1, current=1) == (0, 0, 1)   # v0-1 carry no current epoch
    assert ask(broker.bootstrap, topic, 0, partition=7) == (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
    assert ask(broker.bootstrap, f"nope-{uuid.uuid4().hex[:8]}", 0) == (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
    for replica_id in (-2, -1, 1, 42):                                   # v3+: consumer, debug or follower alike
        assert ask(broker.bootstrap, topic, 0, version=3, replica_id=replica_id) == (0, 0, 1)


def test_many_partitions_in_one_request(broker):
    topic = f"olep-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=3)
    produce(broker.bootstrap, topic, 4)
    req = Q(replica_id=-1, topics=[Q.OffsetForLeaderTopic(topic=topic, partitions=[
        Q.OffsetForLeaderPartition(partition=i, current_leader_epoch=0, leader_epoch=0) for i in (0, 1, 2, 9)])])
    resp = wire.call(broker.bootstrap, req, 4)
    got = [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in resp.topics[0].partitions]
    # partition 0 holds 4 records; 1 and 2 are empty: the leader's epoch starts at their LEO 0
    assert got == [(0, 0, 0, 4), (1, 0, 0, 0), (2, 0, 0, 0), (9, UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]


def test_checkpoint_file_and_answers_after_a_restart_that_rebuilds_it(tmp_path):
    data = tmp_path / "data"
    b = BrokerProcess(data).start()
    try:
        topic = f"olep-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap, topic)
        produce(b.bootstrap, topic, 3)                                   # 0-2 in epoch 0
        b.stop()
        part_dir = data / f"{topic}-0"
        assert (part_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
        # extend the stored log offline as a replica that saw later leaders would have it: epoch 2
        # wrote 3-4, epoch 5 wrote 5-6; then lose the checkpoint so that start-up rebuilds it
        log = Log.open(part_dir, LogConfig(), clean_shutdown=True, now_ms=1_700_000_000_000)
        for base, epoch in ((3, 2), (5, 5)):
            batch = rb.build_batch([(1_700_000_000_000, b"k", b"x", ()), (1_700_000_000_001, b"k", b"y", ())],
                                   base_offset=base, partition_leader_epoch=epoch)
            log.append(batch, last_offset=base + 1, max_timestamp=1_700_000_000_001, offset_of_max_timestamp=-1,
                       now_ms=1_700_000_000_000)
        log.close()
        (part_dir / "leader-epoch-checkpoint").unlink()
        b.start()
        expected = {0: (0, 0, 3), 1: (0, 0, 3), 2: (0, 2, 5), 4: (0, 2, 5), 5: (0, 5, 7), 6: (0, -1, -1)}
        for epoch, answer in expected.items():
            assert ask(b.bootstrap, topic, epoch) == answer, epoch
        assert (part_dir / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 3\n5 5\n"
    finally:
        if b.proc is not None:
            b.stop()


# -- the handler against fake services: cases a single-node broker cannot produce ----------------
class FakeServices:
    """The ApiServices the handler reads: hosted partitions, the metadata image, this node's id."""

    def __init__(self, partitions: dict, image: dict, node_id: int = 1) -> None:
        self._partitions = partitions
        self.replica_manager = SimpleNamespace(get=lambda t, i: self._partitions.get((t, i)))
        self.image = SimpleNamespace(topics={t: SimpleNamespace(partitions=ps) for t, ps in image.items()})
        self.node_id = node_id


def call_handler(broker, version: int, *parts, topic: str = "t"):
    req = Q(replica_id=-1, topics=[Q.OffsetForLeaderTopic(topic=topic, partitions=[
        Q.OffsetForLeaderPartition(partition=i, current_leader_epoch=cur, leader_epoch=ep) for i, cur, ep in parts])])
    # a context without an authorizer: every check passes (RequestContext.authorize)
    ctx = SimpleNamespace(services=broker, api_version=version, authorize=lambda *_: True,
                          authorize_cluster=lambda *_: True)
    resp = handler.handle(ctx, req)
    return [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in resp.topics[0].partitions]


@pytest.fixture
def hosted(tmp_path):
    """Partition t-0 led by node 1 in leader epoch 4 (data from epochs 1 and 4), t-1 hosted as a
    follower, t-2 known to the metadata only."""
    log = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True, now_ms=1_700_000_000_000)
    for base, epoch in ((0, 1), (2, 4)):
        log.append(rb.build_batch([(1, b"k", b"a", ()), (2, b"k", b"b", ())], base_offset=base,
                                  partition_leader_epoch=epoch),
                   last_offset=base + 1, max_timestamp=2, offset_of_max_timestamp=-1, now_ms=1)
    p0 = Partition("t", 0, uuid.UUID(int=5), log, leader_epoch=4)
    p1 = SimpleNamespace(leader_epoch=4)
    image = {"t": {0: SimpleNamespace(leader=1), 1: SimpleNamespace(leader=2), 2: SimpleNamespace(leader=2)}}
    yield FakeServices({("t", 0): p0, ("t", 1): p1}, image)
    log.close()


def test_handler_epoch_checks_and_leadership(hosted):
    assert call_handler(hosted, 4, (0, 3, 1), (0, 5, 1), (0, 4, 1), (0, -1, 2), (0, -1, 4)) == [
        (0, FENCED_LEADER_EPOCH, -1, -1),        # the client's epoch 3 is older than ours
        (0, UNKNOWN_LEADER_EPOCH, -1, -1),       # newer than ours
        (0, 0, 1, 2),                            # epoch 1 ends where epoch 4 starts
        (0, 0, 1, 2),                            # epoch 2 unknown: the largest <= 2
        (0, 0, 4, 4)]                            # the current epoch ends at the LEO
    assert call_handler(hosted, 4, (1, -1, 1), (1, 9, 1), (2, -1, 1), (3, -1, 1)) == [
        (1, NOT_LEADER_OR_FOLLOWER, -1, -1),     # hosted here as a follower
        (1, UNKNOWN_LEADER_EPOCH, -1, -1),       # the epoch check comes first, as in Kafka
        (2, NOT_LEADER_OR_FOLLOWER, -1, -1),     # in the metadata, not hosted here
        (3, UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]


def test_handler_assigns_the_leaders_epoch_like_make_leader(hosted):
    p0 = hosted.replica_manager.get("t", 0)
    p0.leader_epoch = 6                          # elected again; nothing written in epoch 6 yet
    assert call_handler(hosted, 4, (0, 6, 4), (0, 6, 6)) == [(0, 0, 4, 4), (0, 0, 6, 4)]
    assert p0.log.leader_epoch_cache.entries == [(1, 0), (4, 2), (6, 4)]


def test_error_response_names_every_partition():
    req = Q(topics=[Q.OffsetForLeaderTopic(topic="a", partitions=[Q.OffsetForLeaderPartition(partition=i)
                                                                  for i in (0, 3)])])
    resp = handler.error_response(req, 4, 35)
    out = bytearray()
    resp.write(out, 4)
    assert [(p.partition, p.error_code, p.end_offset) for p in resp.topics[0].partitions] == [(0, 35, -1), (3, 35, -1)]
