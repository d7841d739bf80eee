"""Followers fetch in incremental fetch sessions (KIP-227), as Kafka's ``AbstractFetcherThread``
does with ``FetchSessionHandler``: on a 3-node cluster with 30 partitions of RF 3, each leader holds a
privileged session per follower, and a follower's Fetch carries only the partitions that changed,
so its mean size stays far below a full fetch of the partitions it follows from that leader, while
acks=all records to a few partitions reach every replica and the ISRs stay full. With
``max.incremental.fetch.session.cache.slots=0`` the leaders answer session id 0, the followers stay
on full fetches, and replication works the same."""

from __future__ import annotations

import urllib.request

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.records import iter_batches, iter_records
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until, with_http_listeners
from tests.support.replication_load import partition_states

PARTITIONS = 30
BUSY = [0, 1, 2, 3, 4]          # produced to; the other 25 stay idle
RECORDS = 150                   # per busy partition, one flush at a time in rounds
FETCH_VERSION = 16


def metrics(port: int) -> dict:
    """{(sample name, frozenset(labels)): value} of a node's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text)
            for s in f.samples}


def fetch_counters(port: int) -> tuple[float, float]:
    """(Fetch request bytes, Fetch requests) a node has received."""
    m = metrics(port)
    nbytes = m.get(("kafka_network_requestmetrics_requestbytes_total", frozenset({("request", "Fetch")})), 0.0)
    count = sum(v for (name, labels), v in m.items()
                if name == "kafka_network_requestmetrics_requests_total" and ("request", "Fetch") in labels)
    return nbytes, count


def unlabelled(port: int, name: str) -> float:
    return metrics(port)[(name, frozenset())]


def start(tmp_path, overrides: dict | None = None):
    c = Cluster(tmp_path, 3, overrides)
    ports = with_http_listeners(c)
    c.start()
    return c, ports


def create_and_wait_in_sync(c: Cluster, topic: str) -> dict:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)], operation_timeout=30)[topic].result(60)
    addr = f"127.0.0.1:{c.client_ports[0]}"

    def in_sync():
        s = partition_states(addr, topic)
        ok = len(s) == PARTITIONS and all(p.leader > 0 and len(p.isr) == 3 for p in s.values())
        return s if ok else None
    return wait_until(in_sync, 60, f"{PARTITIONS} partitions of {topic} led, all replicas in sync")


def produce_all(c: Cluster, topic: str) -> dict[int, list[bytes]]:
    """acks=all records to the BUSY partitions in rounds; the acknowledged values per partition."""
    acked: dict[int, list[bytes]] = {p: [] for p in BUSY}
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.partition()].append(msg.value())
    producer = ck.Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(RECORDS // 5):
        for p in BUSY:
            for k in range(5):
                producer.produce(topic, value=f"{p}-{i * 5 + k}".encode(), partition=p, on_delivery=delivered)
        assert producer.flush(30) == 0
    assert errors == []
    return acked


def replica_values(c: Cluster, node: int, topic: str, p: int) -> list[bytes]:
    out = []
    for path in sorted((c.node(node).data_dir / f"{topic}-{p}").glob("*.log")):
        data = path.read_bytes()
        for pos, h in iter_batches(data):
            out.extend(r.value for r in iter_records(data[pos:pos + h.size]))
    return out


def check_replicated(c: Cluster, topic: str, acked: dict[int, list[bytes]]) -> None:
    for p in BUSY:
        assert acked[p] == [f"{p}-{i}".encode() for i in range(RECORDS)]
        for node in (1, 2, 3):
            wait_until(lambda: replica_values(c, node, topic, p) == acked[p], 10,
                       f"node {node} holds every acknowledged record of {topic}-{p}")
    s = partition_states(f"127.0.0.1:{c.client_ports[0]}", topic)
    assert all(len(st.isr) == 3 for st in s.values()), s


def full_fetch_body_bytes(topic_id, partitions: list[int]) -> int:
    """The body size of a full follower Fetch (v16) of ``partitions``: what a sessionless fetch sends."""
    F = FetchRequest
    req = F(replica_state=F.ReplicaState(replica_id=1, replica_epoch=10), max_wait_ms=500, min_bytes=1,
            max_bytes=10 << 20, isolation_level=0, session_id=0, session_epoch=0, topics=[
                F.FetchTopic(topic_id=topic_id, partitions=[
                    F.FetchPartition(partition=p, current_leader_epoch=1, fetch_offset=0, last_fetched_epoch=1,
                                     log_start_offset=0, partition_max_bytes=1 << 20) for p in partitions])],
            forgotten_topics_data=[], rack_id="")
    out = bytearray()
    req.write(out, FETCH_VERSION)
    return len(out)


def topic_id_of(c: Cluster, topic: str):
    resp = wire.call(c.bootstrap.split(",")[0], MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False), 12)
    return resp.topics[0].topic_id


@pytest.fixture
def cluster(tmp_path):
    c, ports = start(tmp_path)
    try:
        yield c, ports
    finally:
        c.stop()


def test_followers_fetch_in_sessions_that_carry_only_changed_partitions(cluster):
    c, ports = cluster
    topic = "sessions"
    states = create_and_wait_in_sync(c, topic)
    led = {n: [p for p, s in states.items() if s.leader == n] for n in (1, 2, 3)}

    # every leader holds a session for each of its two followers (followers of a leader that leads
    # nothing yet may not have one: every node leads some of 30 partitions here)
    assert all(led[n] for n in (1, 2, 3)), led
    for n in (1, 2, 3):
        wait_until(lambda: unlabelled(ports[n - 1], "kafka_server_fetchsessioncache_numincrementalfetchsessions")
                   >= 2, 30, f"node {n} holds a fetch session per follower")
    before = {n: fetch_counters(ports[n - 1]) for n in (1, 2, 3)}
    shrinks = {n: unlabelled(ports[n - 1], "kafka_server_replicamanager_isrshrinks_total") for n in (1, 2, 3)}

    acked = produce_all(c, topic)
    check_replicated(c, topic, acked)

    topic_id = topic_id_of(c, topic)
    for n in (1, 2, 3):
        nbytes, count = fetch_counters(ports[n - 1])
        nbytes, count = nbytes - before[n][0], count - before[n][1]
        assert count >= 4, (n, count)   # two followers long-polling all along
        mean = nbytes / count
        full = full_fetch_body_bytes(topic_id, led[n])
        assert mean < full / 2, f"node {n}: {mean:.0f} bytes per follower Fetch vs {full} for a full fetch " \
                                f"of its {len(led[n])} partitions"
        assert unlabelled(ports[n - 1], "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 2
        assert unlabelled(ports[n - 1], "kafka_server_replicamanager_isrshrinks_total") == shrinks[n]


def test_leaders_without_session_slots_keep_followers_on_full_fetches(tmp_path):
    c, ports = start(tmp_path, {"max.incremental.fetch.session.cache.slots": "0"})
    try:
        topic = "no-sessions"
        states = create_and_wait_in_sync(c, topic)
        led = {n: [p for p, s in states.items() if s.leader == n] for n in (1, 2, 3)}
        before = {n: fetch_counters(ports[n - 1]) for n in (1, 2, 3)}
        acked = produce_all(c, topic)
        check_replicated(c, topic, acked)
        topic_id = topic_id_of(c, topic)
        for n in (1, 2, 3):
            assert unlabelled(ports[n - 1], "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 0
            nbytes, count = fetch_counters(ports[n - 1])
            mean = (nbytes - before[n][0]) / (count - before[n][1])
            # every follower Fetch is full: at least the body of a full fetch of what it follows here
            assert mean >= full_fetch_body_bytes(topic_id, led[n]), (n, mean)
    finally:
        c.stop()
