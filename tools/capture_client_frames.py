#!/usr/bin/env python3
"""Record the request frames real clients send, for the bad-input tests to mutate.

Usage::

    python3 tools/capture_client_frames.py [--out tests/robustness/data/frames] [--clients kafka-python,...]

Starts a kcompat broker behind a recording TCP proxy (tests/support/tcp_proxy.py, advertised as
the broker's address so every connection passes through it) and runs, per client, a scenario
touching the APIs it uses: topic admin, (idempotent, compressed, transactional) produce, a
consumer group with commits, offsets by time, metadata. Clients: ``kafka-python``,
``confluent-kafka``, ``kcat`` and ``java`` (Apache Kafka's own tools from the conformance suite's
Maven cache, ``conformance/maven.py``). Then a 3-node :class:`ProxiedCluster` records what nodes
send each other on the CONTROLLER listeners (Raft, registration, heartbeats, forwarded admin
requests: ``controller``) and on the inter-broker listeners (replica fetches: ``replication``),
through a topic creation, producer ids and a controller failover.

Each ``<name>.frames`` file is the frames as sent (int32 size + header + body; read them with
``tests.robustness.util.read_frames``), at most
``PER_VERSION`` per API key and version and none above ``MAX_FRAME`` bytes. Topic, group and
transactional ids all start with ``capture-``, so replaying them touches nothing else.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.robustness.util import CAPTURES, read_frames  # noqa: E402,F401 - read_frames for readers
from tests.support.broker_process import BrokerProcess, wait_for  # noqa: E402
from tests.support.tcp_proxy import TcpProxy  # noqa: E402

PER_VERSION = 4
MAX_FRAME = 16384
DEFAULT_OUT = CAPTURES
JAVA_LIB = Path.home() / ".cache" / "kcompat-conformance" / "kafka-3.9.2" / "lib"


def select(frames: list[bytes]) -> list[bytes]:
    """At most PER_VERSION frames per (api key, version), the first ones seen, small ones only."""
    kept: dict[tuple[int, int], list[bytes]] = defaultdict(list)
    for f in frames:
        if len(f) < 12 or len(f) > MAX_FRAME:
            continue
        key, version = struct.unpack_from(">hh", f, 4)
        if len(kept[(key, version)]) < PER_VERSION:
            kept[(key, version)].append(f)
    return [f for k in sorted(kept) for f in kept[k]]


def kafka_python(bs: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bs, client_id="capture-kafka-python")
    admin.create_topics([NewTopic("capture-kp", 2, 1), NewTopic("capture-kp-gone", 1, 1)])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "capture-kp")])
    admin.create_partitions({"capture-kp": NewPartitions(3)})
    producer = KafkaProducer(bootstrap_servers=bs, compression_type="gzip", linger_ms=5)
    for i in range(20):
        producer.send("capture-kp", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("capture-kp", bootstrap_servers=bs, group_id="capture-group-kp",
                             auto_offset_reset="earliest", consumer_timeout_ms=5000, enable_auto_commit=False)
    got = 0
    for _ in consumer:
        got += 1
        if got == 20:
            break
    consumer.commit()
    consumer.offsets_for_times({TopicPartition("capture-kp", 0): 0})
    consumer.close()
    admin.list_groups()
    admin.describe_groups(["capture-group-kp"])
    admin.list_group_offsets("capture-group-kp")
    admin.describe_cluster()
    admin.list_transactions()
    admin.describe_producers([TopicPartition("capture-kp", 0)])
    admin.delete_records({TopicPartition("capture-kp", 1): 1})
    admin.delete_topics(["capture-kp-gone"])
    admin.close()


def confluent(bs: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("capture-ck", 2, 1), NewTopic("capture-ck-gone", 1, 1)]).values():
        f.result(30)
    for f in admin.describe_configs([ConfigResource("topic", "capture-ck")]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "compression.type": "zstd", "linger.ms": 5})
    for i in range(20):
        p.produce("capture-ck", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    assert p.flush(30) == 0
    t = Producer({"bootstrap.servers": bs, "transactional.id": "capture-txn", "compression.type": "lz4"})
    t.init_transactions(30)
    for commit in (True, False):
        t.begin_transaction()
        t.produce("capture-ck", key=b"t", value=b"txn")
        (t.commit_transaction if commit else t.abort_transaction)(30)
    c = Consumer({"bootstrap.servers": bs, "group.id": "capture-group-ck", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe(["capture-ck"])
    got, deadline = 0, time.time() + 30
    while got < 21 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.commit(asynchronous=False)
    c.offsets_for_times([TopicPartition("capture-ck", 0, 0)], 10)
    c.close()
    admin.list_consumer_groups().result(30)
    for f in admin.delete_topics(["capture-ck-gone"]).values():
        f.result(30)


def kcat(bs: str) -> None:
    lines = "".join(f"k{i}:v{i}\n" for i in range(20))
    subprocess.run(["kcat", "-b", bs, "-P", "-t", "capture-kcat", "-z", "snappy", "-K:"], input=lines.encode(),
                   check=True, timeout=60)
    subprocess.run(["kcat", "-b", bs, "-C", "-t", "capture-kcat", "-o", "beginning", "-e", "-q"], check=True,
                   timeout=60, capture_output=True)
    subprocess.run(["kcat", "-b", bs, "-L"], check=True, timeout=60, capture_output=True)
    subprocess.run(["kcat", "-b", bs, "-G", "capture-group-kcat", "-o", "beginning", "-e", "-q", "capture-kcat"],
                   timeout=60, capture_output=True)


def java(bs: str) -> None:
    if not JAVA_LIB.is_dir() or shutil.which("java") is None:
        raise RuntimeError(f"no Java or no Kafka jars in {JAVA_LIB} (python3 -m conformance resolves them)")
    cp = f"{JAVA_LIB}/*"

    def run(main: str, *args: str) -> None:
        subprocess.run(["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, main, *args],
                       check=True, timeout=120, capture_output=True)
    run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs, "--create", "--topic", "capture-java",
        "--partitions", "2", "--replication-factor", "1")
    run("org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", bs, "--topic", "capture-java",
        "--max-messages", "20", "--producer.config", "/dev/null")
    run("org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", bs, "--topic", "capture-java",
        "--group-id", "capture-group-java", "--max-messages", "20", "--reset-policy", "earliest")
    run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs, "--describe", "--topic", "capture-java")


CLIENTS = {"kafka-python": kafka_python, "confluent-kafka": confluent, "kcat": kcat, "java": java}


def capture_clients(names: list[str], out: Path, work: Path) -> None:
    proxy = TcpProxy().start()
    broker = BrokerProcess(work / "broker", {"advertised.listeners": f"PLAINTEXT://{proxy.bootstrap}"})
    try:
        broker.start()
        proxy.upstream = broker.bootstrap
        for name in names:
            proxy.recorded = []
            CLIENTS[name](proxy.bootstrap)
            time.sleep(0.5)  # the last requests of clients closing
            frames = select(proxy.recorded)
            (out / f"{name}.frames").write_bytes(b"".join(frames))
            print(f"{name}: {len(proxy.recorded)} requests, kept {len(frames)} "
                  f"({sum(len(f) for f in frames)} bytes)")
    finally:
        broker.stop()
        proxy.stop()


def capture_cluster(out: Path, work: Path) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    from tests.support.cluster import ProxiedCluster
    (work / "cluster").mkdir(parents=True, exist_ok=True)
    cluster = ProxiedCluster(work / "cluster", 3)
    recorded = {"controller": [], "replication": []}
    try:
        for (_s, _d, kind), proxy in cluster.mesh.links.items():
            proxy.recorded = recorded[kind]
        cluster.start()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.create_topics([NewTopic("capture-cluster", 3, 3)])
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True)
        for i in range(30):
            producer.send("capture-cluster", value=b"v%d" % i)
        producer.flush()
        leader = cluster.leader_id()
        cluster.kill9(leader)
        wait_for(lambda: cluster.leader_id() not in (None, leader), 60, what="a new quorum leader")
        cluster.restart(leader)
        cluster.wait_for_brokers(60)
        admin.delete_topics(["capture-cluster"])
        producer.close()
        admin.close()
        time.sleep(2)
    finally:
        cluster.close()
    for kind, frames in recorded.items():
        kept = select(frames)
        (out / f"{kind}.frames").write_bytes(b"".join(kept))
        print(f"cluster {kind}: {len(frames)} requests, kept {len(kept)} ({sum(len(f) for f in kept)} bytes)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated, of " + ", ".join(CLIENTS))
    ap.add_argument("--no-cluster", action="store_true", help="skip the node-to-node capture")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kcompat-capture-") as tmp:
        names = [n for n in args.clients.split(",") if n]
        if names:
            capture_clients(names, args.out, Path(tmp))
        if not args.no_cluster:
            capture_cluster(args.out, Path(tmp))
    print(f"wrote {sorted(os.listdir(args.out))} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
