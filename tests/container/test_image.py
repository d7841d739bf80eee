"""The kcompat image with a real Docker engine (issue 24): built from the repository's Dockerfile on a
base image made from Debian's packages (tests/container/images.py), run as users run apache/kafka -
no environment, the apache/kafka environment, the 3-node compose cluster, a volume across
``docker stop``/``start``, a bad environment, and the README's testcontainers snippet. Clients are
confluent-kafka and kafka-python on the host; every published port is on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
import kafka
import pytest

from kcompat.testing.ports import free_ports, machine_lock
from kcompat.testing.process import wait_for
from tests.container.images import ROOT, as_user_image, build_image, docker, logs, volume_digest, wait_healthy

# the first test of a run builds the base image (debootstrap) and the kcompat image (pip from PyPI)
pytestmark = pytest.mark.timeout(900)

COMPOSE_CLUSTER = ROOT / "examples" / "docker-compose" / "cluster" / "docker-compose.yml"
COMPOSE_SINGLE = ROOT / "examples" / "docker-compose" / "single-node" / "docker-compose.yml"
CLUSTER_ID = "4L6g3nShT-eMCtK--X86sw"


@pytest.fixture(scope="module")
def image() -> str:
    return build_image()


class Containers:
    """Containers and volumes a test made, removed at its end."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.volumes: list[str] = []

    def volume(self) -> str:
        name = f"kcompat-test-{uuid.uuid4().hex[:10]}"
        docker("volume", "create", name)
        self.volumes.append(name)
        return name

    def run(self, image: str, *args: str, env: dict | None = None, detach: bool = True) -> str:
        name = f"kcompat-test-{uuid.uuid4().hex[:10]}"
        self.names.append(name)
        env_args = [a for k, v in (env or {}).items() for a in ("-e", f"{k}={v}")]
        docker("run", *(["-d"] if detach else []), "--name", name, *env_args, *args, image, timeout=120,
               check=detach)
        return name

    def cleanup(self) -> None:
        for name in self.names:
            docker("rm", "-f", "-v", name, check=False)
        for volume in self.volumes:
            docker("volume", "rm", "-f", volume, check=False)


@pytest.fixture
def containers():
    c = Containers()
    yield c
    c.cleanup()


@pytest.fixture
def port_9092():
    """127.0.0.1:9092, what apache/kafka's defaults advertise: one test on the machine at a time."""
    with machine_lock("port-9092"):
        yield


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """The values acknowledged (acks=all, idempotent), in order."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "message.timeout.ms": 120000})
    acked: list[bytes] = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda e, m: acked.append(m.value()) if e is None else None)
    assert p.flush(150) == 0
    return acked


def consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    """The first ``n`` values of partition 0 of ``topic``, from the beginning."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < n:
            m = c.poll(1)
            assert time.monotonic() < deadline, f"read {len(got)} of {n}"
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def kafka_python_round_trip(bootstrap: str, topic: str) -> None:
    """kafka-python produces one record to ``topic`` and reads it back."""
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(topic, b"from kafka-python").get(30)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                   consumer_timeout_ms=30000)
    try:
        assert next(iter(consumer)).value == b"from kafka-python"
    finally:
        consumer.close()


def test_run_with_no_environment_serves_on_localhost_9092(image, containers, port_9092):
    c = containers.run(image, "-p", "127.0.0.1:9092:9092")
    wait_healthy(c)
    meta = AdminClient({"bootstrap.servers": "127.0.0.1:9092"}).list_topics(timeout=30)
    assert [(b.id, b.host, b.port) for b in meta.brokers.values()] == [(1, "localhost", 9092)]
    assert produce("127.0.0.1:9092", "plain", [b"a", b"b"]) == [b"a", b"b"]
    assert consume("127.0.0.1:9092", "plain", 2) == [b"a", b"b"]
    kafka_python_round_trip("localhost:9092", "plain-kp")
    assert docker("exec", c, "id", "-u").stdout.strip() != "0"      # not root
    text = logs(c)
    assert "log dir /var/lib/kcompat/data: new, formatted" in text and "unclean" not in text


def test_apache_kafka_environment_with_a_triple_underscore_variable(image, containers):
    (port,) = free_ports(1)
    env = {"KAFKA_NODE_ID": "1", "KAFKA_PROCESS_ROLES": "broker,controller", "CLUSTER_ID": CLUSTER_ID,
           "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
           "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT_HOST://localhost:{port},PLAINTEXT://broker:19092",
           "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@broker:29093",
           "KAFKA_LISTENERS": "CONTROLLER://:29093,PLAINTEXT_HOST://:9092,PLAINTEXT://:19092",
           "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT", "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
           "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1", "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
           "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
           "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs", "KAFKA_HEAP_OPTS": "-Xmx1G -Xms1G",
           "KAFKA_LISTENER_NAME_PLAINTEXT___HOST_MAX_CONNECTIONS": "100"}
    c = containers.run(image, "--hostname", "broker", "-p", f"127.0.0.1:{port}:9092", env=env)
    wait_healthy(c)
    bootstrap = f"localhost:{port}"
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    assert [(b.host, b.port) for b in meta.brokers.values()] == [("localhost", port)]
    assert produce(bootstrap, "env", [b"x"]) == [b"x"] and consume(bootstrap, "env", 1) == [b"x"]
    kafka_python_round_trip(bootstrap, "env-kp")
    text = logs(c)
    assert "listener.name.plaintext_host.max.connections" in text     # KAFKA_..._PLAINTEXT___HOST_... mapped
    assert "log dirs /tmp/kraft-combined-logs" in text and f"cluster id {CLUSTER_ID}" in text


def test_stop_and_start_on_a_volume_is_a_clean_shutdown_with_every_record(image, containers):
    (port,) = free_ports(1)
    volume = containers.volume()
    env = {"KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://localhost:{port}"}   # listeners follow: 0.0.0.0:<port>
    c = containers.run(image, "-p", f"127.0.0.1:{port}:{port}", "-v", f"{volume}:/var/lib/kcompat/data", env=env)
    wait_healthy(c)
    bootstrap = f"localhost:{port}"
    values = [b"%d" % i for i in range(500)]
    assert produce(bootstrap, "kept", values) == values
    docker("stop", "--time", "10", c)   # SIGTERM, then SIGKILL (exit status 137) if 10 s pass
    assert docker("inspect", "--format", "{{.State.ExitCode}}", c).stdout.strip() == "0"   # it exited itself
    first_run = logs(c)
    assert "shutdown complete" in first_run
    stored = volume_digest(volume, image)
    bad = containers.run(image, "-v", f"{volume}:/var/lib/kcompat/data", detach=False,
                         env={"KAFKA_NUM_PARTITIONS": "zero"})
    assert docker("inspect", "--format", "{{.State.ExitCode}}", bad).stdout.strip() == "2"
    assert volume_digest(volume, image) == stored                       # a refused start wrote nothing
    docker("start", c)
    wait_healthy(c)
    restart = logs(c)[len(first_run):]
    assert "log dir /var/lib/kcompat/data: clean shutdown" in restart
    assert "unclean" not in restart and "recovering" not in restart
    assert consume(bootstrap, "kept", 500) == values


def test_bad_environment_exits_2_naming_the_variable_and_leaves_the_volume_empty(image, containers):
    volume = containers.volume()
    c = containers.run(image, "-v", f"{volume}:/var/lib/kcompat/data", detach=False,
                       env={"KAFKA_NO_SUCH_SETTING": "1"})
    assert docker("inspect", "--format", "{{.State.ExitCode}}", c).stdout.strip() == "2"
    text = logs(c)
    assert "KAFKA_NO_SUCH_SETTING" in text and "invalid configuration" in text
    assert volume_digest(volume, image) == {}
    c = containers.run(image, detach=False, env={"KAFKA_PROCESS_ROLES": "broker,controller"})
    assert docker("inspect", "--format", "{{.State.ExitCode}}", c).stdout.strip() == "2"
    assert "CLUSTER_ID" in logs(c)


def compose(project: str, *args: str, env: dict, timeout: float = 300, file=COMPOSE_CLUSTER,
            check: bool = True) -> subprocess.CompletedProcess:
    """``docker-compose -p project -f file args`` with ``env`` added to the environment."""
    result = subprocess.run(["docker-compose", "-p", project, "-f", str(file), *args],
                            capture_output=True, text=True, timeout=timeout, env={**os.environ, **env})
    assert result.returncode == 0 or not check, result.stdout + result.stderr
    return result


def test_compose_single_node_file_serves_on_localhost_9092(image, port_9092):
    project = f"kcompat{uuid.uuid4().hex[:8]}"
    env = {"IMAGE": image}
    compose(project, "up", "-d", env=env, file=COMPOSE_SINGLE)
    try:
        wait_healthy(compose(project, "ps", "-q", "broker", env=env, file=COMPOSE_SINGLE).stdout.strip())
        assert produce("localhost:9092", "single", [b"1", b"2"]) == [b"1", b"2"]
        assert consume("localhost:9092", "single", 2) == [b"1", b"2"]
    finally:
        compose(project, "down", "-v", env=env, file=COMPOSE_SINGLE, timeout=120, check=False)


def test_compose_cluster_keeps_acknowledged_records_when_the_leader_is_killed(image, containers):
    ports = free_ports(3)
    env = {"IMAGE": image, **{f"KAFKA_{n}_PORT": str(p) for n, p in zip((1, 2, 3), ports)}}
    project = f"kcompat{uuid.uuid4().hex[:8]}"
    stop = threading.Event()                                            # ends the producer thread
    compose(project, "up", "-d", env=env)
    try:
        ids = {n: compose(project, "ps", "-q", f"kafka-{n}", env=env).stdout.strip() for n in (1, 2, 3)}
        wait_healthy(*ids.values())
        bootstrap = ",".join(f"localhost:{p}" for p in ports)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("orders", 1)])["orders"].result(60)

        def partition():  # a broker that has not applied the new topic yet answers without it
            return wait_for(lambda: admin.list_topics("orders", timeout=30).topics["orders"].partitions.get(0),
                            30, what="orders-0 in the metadata")
        assert sorted(partition().replicas) == [1, 2, 3]                # RF 3 from the environment
        acked: list[bytes] = []
        errors: list = []
        p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 120000, "linger.ms": 5})

        def load():
            i = 0
            while not stop.is_set():
                p.produce("orders", b"%d" % i,
                          on_delivery=lambda e, m: acked.append(m.value()) if e is None else errors.append(e))
                i += 1
                p.poll(0.002)
            p.flush(150)
        producer = threading.Thread(target=load, daemon=True)
        producer.start()
        deadline = time.monotonic() + 90
        while len(acked) < 2000:
            assert time.monotonic() < deadline and not errors, f"{len(acked)} acknowledged, errors {errors[:5]}"
            time.sleep(0.05)
        leader = partition().leader
        docker("kill", ids[leader])
        before = len(acked)
        deadline = time.monotonic() + 90
        while len(acked) < before + 2000:                               # the producer carries on
            assert time.monotonic() < deadline, f"{len(acked) - before} records acknowledged after the kill"
            time.sleep(0.1)
        assert partition().leader not in (leader, -1)
        docker("start", ids[leader])
        wait_healthy(ids[leader])
        deadline = time.monotonic() + 90
        while leader not in partition().isrs:                           # the killed node catches up
            assert time.monotonic() < deadline, f"node {leader} not back in the ISR: {partition().isrs}"
            time.sleep(0.25)
        stop.set()
        producer.join(180)
        assert not errors, errors[:5]
        assert consume(bootstrap, "orders", len(acked)) == [b"%d" % i for i in range(len(acked))]
    finally:
        stop.set()
        compose(project, "down", "-v", env=env, timeout=120, check=False)


def test_the_readme_testcontainers_snippet_runs_as_written(image, port_9092, tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Testcontainers", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "snippet.py").write_text(snippet)
    # Ryuk, testcontainers' reaper, is an image from Docker Hub, which this machine cannot reach
    env = {**os.environ, "TESTCONTAINERS_RYUK_DISABLED": "true"}
    with as_user_image(image):                                          # the snippet's "kcompat"
        result = subprocess.run([sys.executable, str(tmp_path / "snippet.py")], capture_output=True, text=True,
                                timeout=300, env=env, cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "acknowledged at offset 0" in result.stdout
