"""The HTTP listener's ``/metrics`` (Prometheus text, parsed with prometheus-client's own parser)
while real clients produce and consume: the JMX exporter names of Kafka's metrics move as the
traffic says, consumer lag rises and falls, an ISR shrink shows in a 3-node cluster; and the
listener's configuration (off unless set, on in the zero-config node and the container)."""

from __future__ import annotations

import urllib.request
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kcompat.config import BrokerConfig, ConfigError
from kcompat.container import load_config
from kcompat.testing.ports import free_ports
from kcompat.testing.process import wait_for
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster, with_http_listeners


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of one scrape."""
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m: dict, name: str, **labels) -> float:
    return m.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))), 0.0)


@pytest.fixture
def broker(tmp_path):
    (http_port,) = free_ports(1)
    with BrokerProcess(tmp_path / "data", {"http.listeners": f"HTTP://127.0.0.1:{http_port}"}) as b:
        yield b, f"http://127.0.0.1:{http_port}/metrics"


def test_traffic_moves_the_broker_topic_and_request_metrics_and_lag(broker):
    b, url = broker
    topic, group = f"m-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    before = scrape(url)
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 0
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(200):
        p.produce(topic, b"x" * 100, partition=i % 2)
    assert p.flush(30) == 0
    # a group that committed nothing but offset 0 on both partitions: its lag is everything
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    c.commit(offsets=[ck.TopicPartition(topic, 0, 0), ck.TopicPartition(topic, 1, 0)], asynchronous=False)
    m = scrape(url)
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 200
    assert value(m, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) >= 200 * 100
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total") >= 200        # all topics
    assert value(m, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition=0) == 100
    assert value(m, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 200
    assert value(m, "kafka_topic_partition_current_offset", topic=topic, partition=1) == 100
    assert value(m, "kafka_log_log_logendoffset", topic=topic, partition=0) == 100
    assert value(m, "kafka_log_log_size", topic=topic, partition=0) > 100 * 100
    produces = sum(v for (name, labels), v in m.items()
                   if name == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in labels)
    assert produces >= 1
    assert value(m, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") >= 2
    assert value(m, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produces
    assert value(m, "kafka_server_replicamanager_leadercount") >= 2
    assert value(m, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(m, "kafka_server_socket_server_metrics_connection_count") >= 1
    # the consumer reads and commits everything: bytes out grow by what it read, lag falls to 0
    c.subscribe([topic])
    read = 0
    while read < 200:
        msg = c.poll(10)
        assert msg is not None, f"read {read} of 200"
        if msg.error() is None:
            read += 1
    c.commit(asynchronous=False)
    after = scrape(url)
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= 200 * 100
    assert value(after, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition=0) == 0
    assert value(after, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 0
    assert value(after, "kafka_server_group_coordinator_metrics_group_count", protocol="classic") >= 1
    assert value(after, "kafka_server_group_coordinator_metrics_classic_group_completed_rebalance_count_total") >= 1
    c.close()


def test_an_isr_shrink_shows_on_the_leader(tmp_path):
    cluster = Cluster(tmp_path, 3)
    ports = with_http_listeners(cluster)
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("shrink", 1, replica_assignment=[[1, 2, 3]])])["shrink"].result(15)
        url = f"http://127.0.0.1:{ports[0]}/metrics"
        wait_for(lambda: value(scrape(url), "kafka_server_replicamanager_leadercount") >= 1, 20,
                 what="node 1 leading")
        assert value(scrape(url), "kafka_server_replicamanager_underreplicatedpartitions") == 0
        shrinks = value(scrape(url), "kafka_server_replicamanager_isrshrinks_total")
        cluster.node(3).stop()
        wait_for(lambda: value(scrape(url), "kafka_server_replicamanager_isrshrinks_total") > shrinks, 30,
                 what="an ISR shrink counted on the leader")
        assert value(scrape(url), "kafka_server_replicamanager_underreplicatedpartitions") >= 1


def test_listener_configuration():
    assert BrokerConfig.load(None).get("http.listeners") == ["HTTP://127.0.0.1:8090"]       # zero-config
    assert BrokerConfig.load(None, ["num.partitions=2"]).get("http.listeners") == []       # configured: off
    config, _ = load_config({})
    assert config.get("http.listeners") == ["HTTP://0.0.0.0:8090"]                         # the image
    with pytest.raises(ConfigError, match="http.listeners"):
        BrokerConfig({"http.listeners": "HTTPS://127.0.0.1:8443"})


def test_groups_are_counted_under_their_own_protocol_and_state(broker):
    """GroupCoordinatorMetrics' group-count{protocol} and <protocol>-group-count{state} for one group
    of each kind (joined over the wire): a share group or a streams group is not a classic one."""
    from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as CGH
    from kcompat.protocol.messages.offset_commit import OffsetCommitRequest as OC
    from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest as SGH
    from kcompat.testing import wire
    from tests.broker.test_streams_group_wire import hb as streams_heartbeat

    b, url = broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("wire-in", 1, 1)])["wire-in"].result(15)
    assert streams_heartbeat(b.bootstrap, group="counted-streams").error_code == 0   # waits for the coordinator
    member = "m-" + "a" * 20
    assert wire.call(b.bootstrap, CGH(group_id="counted-consumer", member_id=member, member_epoch=0,
                                      rebalance_timeout_ms=30000, subscribed_topic_names=["wire-in"],
                                      topic_partitions=[]), 0).error_code == 0
    assert wire.call(b.bootstrap, SGH(group_id="counted-share", member_id=member, member_epoch=0,
                                      subscribed_topic_names=["wire-in"]), 1).error_code == 0
    commit = OC(group_id="counted-classic", generation_id_or_member_epoch=-1, member_id="", topics=[   # offsets only
        OC.OffsetCommitRequestTopic(name="wire-in", partitions=[OC.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])])
    assert wire.call(b.bootstrap, commit, 8).topics[0].partitions[0].error_code == 0
    m = scrape(url)
    g = "kafka_server_group_coordinator_metrics_"
    assert [value(m, g + "group_count", protocol=p) for p in ("classic", "consumer", "share", "streams")] == [1, 1, 1, 1]
    assert value(m, g + "classic_group_count", state="Empty") == 1
    assert value(m, g + "consumer_group_count", state="Stable") == 1
    assert value(m, g + "share_group_count", state="Stable") == 1
    assert value(m, g + "streams_group_count", state="NotReady") == 1   # its internal topics are being made
