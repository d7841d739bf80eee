"""Bad input on every listener of a 3-node cluster, the CONTROLLER listeners included.

Each node's controller listener (Raft Vote/BeginQuorumEpoch/EndQuorumEpoch/Fetch, broker
registration and heartbeats, forwarded admin requests) gets random bytes, truncated frames,
mutated default requests for every API it serves, and the node-to-node requests kcompat nodes
really sent each other (tests/robustness/data/frames/controller.frames, recorded by
tools/capture_client_frames.py in another cluster, so their cluster id differs) as sent, cut short
and mutated. Each node's client listener gets the captured client and follower requests. Known
data (replication factor 3) was written first; a normal client produces (acks=all) throughout.

Afterwards: every node is up, every connection was answered or closed within the bound (unless
the request may rightly wait), the producer lost nothing and failed nothing, the quorum has a
leader and every broker is registered, the known data is byte-for-byte what it was (Fetch from the
leaders, and the segment files of every node), and the logs say why connections were closed and
show no handler or decoder failure. Seeded (``SEED``), so the frames replay.
"""

from __future__ import annotations

import random
import struct
from concurrent.futures import ThreadPoolExecutor

import pytest

from kcompat.broker import apis
from kcompat.protocol.messages import api_classes
from tests.robustness.util import (
    CAPTURES, CLIENT_CAPTURES, captured_items, encode, frame, header_bytes, mutate, read_batches,
    read_frames, segment_files, send_and_drain,
)
from tests.support.broker_process import wait_for
from tests.support.cluster import Cluster
from tests.support.replication_load import SequentialProducer, check_log, in_sync, partition_states, read_partitions

SEED = 0x436C7573
KNOWN = "known-replicated"
LIVE = "live-replicated"
PARTITIONS = 2
PER_VERSION = 6      # mutated default requests per controller API and version
CLIENT_MUTATIONS = 2  # per captured client frame and node (the single-broker test does more)


def controller_garbage(rng: random.Random) -> list[tuple[str, bytes, bool]]:
    """Random bodies and mutated default requests behind valid headers, for every API and version
    a controller listener serves; random bytes and bad lengths."""
    out = []
    corr = 1
    for key, lo, hi in apis.advertised(controller_listener=True):
        req_cls, _ = api_classes(key)
        for v in range(lo, hi + 1):
            base = encode(req_cls(), v)
            for i in range(PER_VERSION):
                corr += 1
                body = rng.randbytes(rng.choice((0, 3, 40))) if i % 3 == 0 else mutate(rng, base)
                out.append((f"controller api {key} v{v} #{i}", frame(header_bytes(key, v, corr) + body), True))
    for i in range(40):
        out.append((f"random #{i}", rng.randbytes(rng.choice((1, 4, 9, 100, 2000))), False))
    for n in (-1, 104857601, 0x7FFFFFFF, 3):
        out.append((f"length {n}", struct.pack(">i", n) + rng.randbytes(8), n == 3))
    return out


def leaders(cluster: Cluster, topic: str) -> dict[int, str]:
    """partition -> address of its leader's client listener, as node 1 sees it (all partitions
    led and in sync: the caller waited for that)."""
    states = partition_states(f"127.0.0.1:{cluster.client_ports[0]}", topic)
    return {p: f"127.0.0.1:{cluster.client_ports[s.leader - 1]}" for p, s in states.items()}


def known_state(cluster: Cluster):
    wait_for(lambda: in_sync(cluster, KNOWN, list(range(PARTITIONS))), 60, what=f"{KNOWN} in sync on every node")
    lead = leaders(cluster, KNOWN)
    fetched = {p: read_batches(lead[p], KNOWN, p) for p in range(PARTITIONS)}
    return fetched, segment_files([n.data_dir for n in cluster.nodes], KNOWN, PARTITIONS)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("badinput-cluster"), 3)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_bad_input_on_every_listener_of_a_cluster(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaProducer

    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in (KNOWN, LIVE)], operation_timeout=30,
                                 request_timeout=30).values():
        f.result(60)  # the client retries NOT_CONTROLLER while the quorum settles
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", client_id="known-writer")
    try:
        for i in range(200):
            producer.send(KNOWN, key=b"key-%d" % i, value=b"value-%d" % i + bytes(i % 50), partition=i % PARTITIONS)
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)
    fetched_before, files_before = known_state(cluster)
    assert sum(len(v) for v in fetched_before.values()) > 0 and len(files_before) == 3 * PARTITIONS

    rng = random.Random(SEED)
    controller_frames = read_frames(CAPTURES / "controller.frames")
    client_frames = [f for name in (*CLIENT_CAPTURES, "replication") for f in read_frames(CAPTURES / f"{name}.frames")]
    work = []  # (item, address)
    for i in range(len(cluster.nodes)):
        ctl = ("127.0.0.1", cluster.controller_ports[i])
        client = ("127.0.0.1", cluster.client_ports[i])
        work += [(it, ctl) for it in controller_garbage(rng) + captured_items(rng, controller_frames, f"node{i + 1}")]
        work += [(it, client) for it in captured_items(rng, client_frames, f"clients@node{i + 1}", CLIENT_MUTATIONS)]
    rng.shuffle(work)
    assert len(work) > 3000

    writer = SequentialProducer(bootstrap, LIVE, list(range(PARTITIONS)), interval=0.02).start()
    try:
        writer.wait_progress(60, "the live producer's first acks")
        with ThreadPoolExecutor(max_workers=16) as pool:
            outcomes = list(pool.map(lambda w: send_and_drain(*w), work, chunksize=4))
        writer.wait_progress(90, "the live producer after the bad input")
    finally:
        writer.stop(90)

    dead = [i + 1 for i, n in enumerate(cluster.nodes) if n.proc is None or n.proc.poll() is not None]
    assert not dead, f"nodes {dead} died"
    assert "refused" not in outcomes, "a listener stopped accepting connections"
    stuck = [w[0][0] for w, o in zip(work, outcomes) if o == "open"]
    assert not stuck, f"{len(stuck)} connections neither answered nor closed in time: {stuck[:20]}"
    assert outcomes.count("closed") > len(work) // 3
    assert not writer.failed and writer.fatal is None, writer.summary()
    check_log(read_partitions(bootstrap, LIVE, list(range(PARTITIONS))), writer.acked)

    # the cluster is whole, the known data untouched on every node
    wait_for(lambda: cluster.leader_id() is not None, 60, what="a quorum leader")
    cluster.wait_for_brokers(60)
    fetched_after, files_after = known_state(cluster)
    assert fetched_after == fetched_before
    assert files_after.keys() == files_before.keys()
    for name in files_before:
        assert files_after[name] == files_before[name], f"segment {name} changed"

    for i, node in enumerate(cluster.nodes):
        log = node.log_text()
        assert "closing connection from" in log, f"node {i + 1} logged no closed connection"
        bad = [line for line in log.splitlines()
               if "unexpected error" in line or "Traceback" in line or "decoder bug" in line]
        assert not bad, f"node {i + 1}:\n" + "\n".join(bad[:20])
