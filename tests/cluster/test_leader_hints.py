"""Current-leader hints (KIP-951) over the wire against a real three-node cluster: a Produce v10+
sent to a broker that does not lead the partition, or a Fetch v16+ to one that holds no replica of
it, names the leader and its endpoint, older versions carry no hint, and after a leadership change a fetch at the old leader
epoch gets FENCED_LEADER_EPOCH with the new leader."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until

TOPIC = "hinted"
PAIR = "hinted-pair"   # replicas on nodes 1 and 2 only


def _address(cluster: Cluster, node_id: int) -> str:
    return f"127.0.0.1:{cluster.client_ports[node_id - 1]}"


def _produce(address: str, version: int):
    batch = rb.build_batch([(1_700_000_000_000, b"k", b"v", ())])
    req = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return wire.call(address, req, version)


def _fetch(address: str, topic_id, current_leader_epoch: int = -1):
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                           topic_id=topic_id, partitions=[FetchRequest.FetchPartition(
                               partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0,
                               log_start_offset=-1, partition_max_bytes=1 << 20)])], forgotten_topics_data=[],
                       rack_id="")
    return wire.call(address, req, 16)


def _state(address: str, topic: str = TOPIC):
    """(topic id, leader, leader epoch, isr) of partition 0 as ``address`` sees it."""
    resp = wire.call(address, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
    t = resp.topics[0]
    if t.error_code or not t.partitions:
        return None
    p = t.partitions[0]
    return t.topic_id, p.leader_id, p.leader_epoch, sorted(p.isr_nodes)


def test_produce_and_fetch_name_the_current_leader(tmp_path):
    with Cluster(tmp_path) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC].result(15)
        wait_until(lambda: all((_state(_address(cluster, n)) or (0, 0, 0, []))[1:] == (1, 0, [1, 2, 3])
                               for n in (1, 2, 3)), 20, "node 1 leads with the full ISR everywhere")
        topic_id = _state(_address(cluster, 1))[0]

        # Produce v11 to a follower: NOT_LEADER_OR_FOLLOWER naming node 1 at epoch 0, and its endpoint
        resp = _produce(_address(cluster, 2), 11)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 0)
        assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == \
            [(1, "127.0.0.1", cluster.client_ports[0])]
        # Produce v9 has no such fields: nothing is sent
        old = _produce(_address(cluster, 2), 9)
        assert old.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert old.node_endpoints == []
        assert _produce(_address(cluster, 1), 11).responses[0].partition_responses[0].error_code == 0

        # Fetch v16 to a broker that holds no replica: the same hint (a follower serves consumers'
        # v11+ fetches itself, KIP-392)
        admin.create_topics([NewTopic(PAIR, 1, replica_assignment=[[1, 2]])])[PAIR].result(15)
        wait_until(lambda: (_state(_address(cluster, 3), PAIR) or (0, 0, 0, []))[1:] == (1, 0, [1, 2]), 20,
                   "node 3 knows the pair topic's leader")
        resp = _fetch(_address(cluster, 3), _state(_address(cluster, 3), PAIR)[0])
        part = resp.responses[0].partitions[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 0)
        assert [e.node_id for e in resp.node_endpoints] == [1]
        assert _fetch(_address(cluster, 3), topic_id).responses[0].partitions[0].error_code == 0
        ok = _fetch(_address(cluster, 1), topic_id, current_leader_epoch=0)
        assert ok.responses[0].partitions[0].error_code == 0 and ok.node_endpoints == []

        # leadership moves off node 1 (controlled shutdown): a fetch at epoch 0 on the new leader
        # is fenced and told the new leader and epoch
        cluster.node(1).stop()
        wait_until(lambda: (_state(_address(cluster, 2)) or (0, 0, 0, []))[1] in (2, 3), 20, "a new leader")
        _tid, leader, epoch, _isr = _state(_address(cluster, 2))
        assert epoch >= 1
        resp = _fetch(_address(cluster, leader), topic_id, current_leader_epoch=0)
        part = resp.responses[0].partitions[0]
        assert part.error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, epoch)
        assert [(e.node_id, e.port) for e in resp.node_endpoints] == [(leader, cluster.client_ports[leader - 1])]


def test_a_produce_that_auto_creates_a_replicated_topic(tmp_path):
    """One Produce v11 with acks=all for the three partitions of a topic that does not exist yet:
    the broker creates it (replication factor 3, leaders spread over the brokers), the partition
    it leads is acknowledged once the ISR has the record, the other two name their leaders."""
    overrides = {"num.partitions": "3", "default.replication.factor": "3"}
    with Cluster(tmp_path, overrides=overrides) as cluster:
        batch = lambda: rb.build_batch([(1_700_000_000_000, b"k", b"v", ())])  # noqa: E731
        req = ProduceRequest(acks=-1, timeout_ms=20_000, topic_data=[ProduceRequest.TopicProduceData(
            name="auto", partition_data=[ProduceRequest.PartitionProduceData(index=i, records=batch())
                                         for i in range(3)])])
        resp = wire.call(_address(cluster, 1), req, 11)
        parts = resp.responses[0].partition_responses
        codes = sorted(p.error_code for p in parts)
        assert codes == [0, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_LEADER_OR_FOLLOWER], codes
        hinted = sorted(p.current_leader.leader_id for p in parts if p.error_code)
        assert hinted == [2, 3] and sorted(e.node_id for e in resp.node_endpoints) == [2, 3]
