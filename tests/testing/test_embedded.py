"""kcompat.testing.Broker and Cluster as context managers (kcompat/testing/embedded.py): child
process and in-process brokers and clusters, restarts and faults, configuration errors, data removal.

A clean stop is told from a forced one by the broker's last log line, ``shutdown complete``, which a
broker killed after its SIGTERM went unanswered never writes."""

from __future__ import annotations

import threading

import confluent_kafka
import pytest

from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import Broker, Cluster, admin, wire
from kcompat.testing.embedded import broker_properties


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    """Offsets of ``values`` as acknowledged (acks=all, idempotent)."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    acks: list = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda e, m: acks.append(e or m.offset()))
    assert p.flush(60) == 0
    assert all(isinstance(a, int) for a in acks), acks
    return acks


def consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    try:
        while len(got) < n:
            m = c.poll(30)
            assert m is not None, f"only {len(got)} of {n} records"
            assert m.error() is None, m.error()
            got.append(m.value())
    finally:
        c.close()
    return got


def test_properties_from_a_mapping_and_keywords():
    assert broker_properties({"log.retention.ms": 5}, {"num_partitions": 3, "auto_create_topics_enable": False}) == {
        "log.retention.ms": "5", "num.partitions": "3", "auto.create.topics.enable": "false"}


def test_child_process_broker_keeps_data_over_restart_and_kill_and_removes_it_at_exit():
    with Broker(num_partitions=1) as b:
        root = b._owned_root
        assert produce(b.bootstrap_servers, "t", [b"a", b"b"]) == [0, 1]
        b.restart()
        assert produce(b.bootstrap_servers, "t", [b"c"]) == [2]
        b.kill()
        b.start()                                  # recovers the killed broker's log
        assert consume(b.bootstrap_servers, "t", 3) == [b"a", b"b", b"c"]
        assert "started listener" in b.log_text()
    assert not root.exists()


def test_paused_broker_answers_again_after_resume():
    with Broker() as b:
        b.pause()
        with wire.connect(b.bootstrap_servers, timeout=1.0) as sock:   # the kernel accepts...
            wire.send_request(sock, MetadataRequest(topics=[]), admin.METADATA_V)
            with pytest.raises(TimeoutError):                           # ...the broker never answers
                wire.read_response(sock, MetadataRequest.API_KEY, admin.METADATA_V)
        b.resume()
        assert admin.list_topics(b.bootstrap_servers) == []


def test_a_paused_broker_restarts_and_stops_cleanly_and_a_killed_one_heals(tmp_path):
    with Broker(data_dir=tmp_path / "data") as b:
        produce(b.bootstrap_servers, "p", [b"a"])
        b.pause()
        b.restart()                               # resumed first, then SIGTERM
        produce(b.bootstrap_servers, "p", [b"b"])
        b.kill()
        b.heal()                                  # started again over its data
        b.heal()                                  # whole: nothing to do
        produce(b.bootstrap_servers, "p", [b"c"])
        b.pause()                                 # and left paused at exit
    log = (tmp_path / "data-broker.log").read_text()
    assert log.count("shutdown complete") == 2, log[-3000:]   # the restart and the exit
    with Broker(data_dir=tmp_path / "data") as b:
        assert consume(b.bootstrap_servers, "p", 3) == [b"a", b"b", b"c"]


def test_a_given_data_dir_is_kept(tmp_path):
    with Broker(data_dir=tmp_path / "data") as b:
        produce(b.bootstrap_servers, "kept", [b"x"])
    with Broker(data_dir=tmp_path / "data") as b:
        assert consume(b.bootstrap_servers, "kept", 1) == [b"x"]
    assert (tmp_path / "data" / "meta.properties").exists()


def test_bad_property_fails_the_start_naming_it_and_leaves_nothing_behind():
    b = Broker({"num.partitions": "many"})
    root = b._owned_root
    with pytest.raises(RuntimeError, match="num.partitions"):
        with b:
            pass
    assert not root.exists()
    with pytest.raises(RuntimeError, match="num.partitions"):
        Broker({"num.partitions": "many"}, in_process=True).__enter__()


def test_in_process_broker_runs_on_a_thread_and_stops_cleanly():
    before = {t.name for t in threading.enumerate()}
    with Broker(in_process=True) as b:
        assert "kcompat-broker" in {t.name for t in threading.enumerate()} - before
        assert produce(b.bootstrap_servers, "inproc", [b"1", b"2"]) == [0, 1]
        assert consume(b.bootstrap_servers, "inproc", 2) == [b"1", b"2"]
        with pytest.raises(RuntimeError):
            b.kill()                                # faults need a process
        root = b._owned_root
    assert "kcompat-broker" not in {t.name for t in threading.enumerate()}
    assert not root.exists()


def test_two_in_process_brokers_side_by_side():
    with Broker(in_process=True) as a, Broker(in_process=True) as b:
        produce(a.bootstrap_servers, "side", [b"a"])
        produce(b.bootstrap_servers, "side", [b"b1", b"b2"])
        assert consume(a.bootstrap_servers, "side", 1) == [b"a"]
        assert consume(b.bootstrap_servers, "side", 2) == [b"b1", b"b2"]


def test_cluster_replicates_over_three_nodes_and_heals():
    with Cluster(3) as c:
        root = c._owned_root
        c.create_topic("rep", partitions=2)
        meta = admin.metadata(c.bootstrap_servers, ["rep"]).topics[0]
        assert all(sorted(p.replica_nodes) == [1, 2, 3] for p in meta.partitions)   # RF 3 by default
        produce(c.bootstrap_servers, "rep", [b"%d" % i for i in range(10)])
        victim = c.leader_of("rep", 0)
        c.kill(victim)
        other = next(n for n in (1, 2, 3) if n != victim)
        c.pause(other)                             # 1 of 3 left: acks=all cannot succeed
        c.heal()
        assert [n.proc is not None for n in c.nodes] == [True, True, True]
        produce(c.bootstrap_servers, "rep", [b"after"])
        pid = c.node(1).proc.pid
        c.restart(1)                               # a running node: SIGTERM, then started again
        assert c.node(1).proc.pid != pid
        assert "shutdown complete" in c.node(1).log_text()
        produce(c.bootstrap_servers, "rep", [b"after restart"])
        assert sorted(consume(c.bootstrap_servers, "rep", 12)) == sorted(
            [b"%d" % i for i in range(10)] + [b"after", b"after restart"])
    assert not root.exists()


def test_in_process_cluster_replicates_restarts_nodes_and_stops_cleanly():
    def broker_threads() -> int:
        return [t.name for t in threading.enumerate()].count("kcompat-broker")

    before = broker_threads()
    with Cluster(n=3, in_process=True) as c:      # n by keyword, not taken for a broker property
        root = c._owned_root
        assert broker_threads() - before == 3 and all(n.proc is not None for n in c.nodes)
        c.create_topic("rep", partitions=2)
        meta = admin.metadata(c.bootstrap_servers, ["rep"]).topics[0]
        assert all(sorted(p.replica_nodes) == [1, 2, 3] for p in meta.partitions)
        produce(c.bootstrap_servers, "rep", [b"%d" % i for i in range(10)])
        leader = c.leader_of("rep", 0)
        c.restart(leader)                          # a clean stop of its thread, then a new one
        assert broker_threads() - before == 3
        produce(c.bootstrap_servers, "rep", [b"after"])
        for fault in (c.kill, c.pause):
            with pytest.raises(RuntimeError, match="child processes"):
                fault(leader)
        c.heal()                                   # whole: nothing to undo
        assert sorted(consume(c.bootstrap_servers, "rep", 11)) == sorted([b"%d" % i for i in range(10)] + [b"after"])
    assert broker_threads() == before
    assert not root.exists()
