"""examples/docker-compose/ says what apache/kafka's documented examples say (issue 24): a user's
compose file works with only the image name changed. The files are read as text (the environment
and port lines); test_image.py runs them."""

from __future__ import annotations

import re

from tests.container.images import ROOT

EXAMPLES = ROOT / "examples" / "docker-compose"
# apache/kafka docker/examples/docker-compose-files/cluster/combined/plaintext: every node's variables
APACHE_MULTI_NODE = {
    "KAFKA_NODE_ID", "KAFKA_PROCESS_ROLES", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "KAFKA_CONTROLLER_QUORUM_VOTERS",
    "KAFKA_LISTENERS", "KAFKA_INTER_BROKER_LISTENER_NAME", "KAFKA_ADVERTISED_LISTENERS",
    "KAFKA_CONTROLLER_LISTENER_NAMES", "CLUSTER_ID", "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
    "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
    "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "KAFKA_LOG_DIRS",
}
# the cluster: replication factor 3 and min.insync.replicas 2 (apache/kafka's example has 1)
REPLICATION = {"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "3", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "3",
               "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "2", "KAFKA_DEFAULT_REPLICATION_FACTOR": "3",
               "KAFKA_MIN_INSYNC_REPLICAS": "2"}
_SERVICE = re.compile(r"^  ([\w-]+):\s*$")
_VARIABLE = re.compile(r"^      ((?:KAFKA_|CLUSTER_ID)\w*):\s*'?(.*?)'?\s*$")
_PORT = re.compile(r"^      - '?([^']+)'?\s*$")


def services(path) -> dict[str, tuple[dict[str, str], list[str]]]:
    """service -> (environment, published ports) of a compose file written as the examples are."""
    out: dict[str, tuple[dict[str, str], list[str]]] = {}
    current = None
    section = None
    for line in path.read_text().splitlines():
        if m := _SERVICE.match(line):
            current = out.setdefault(m.group(1), ({}, []))
        elif current is not None and line.strip() in ("environment:", "ports:"):
            section = line.strip()
        elif current is not None and section == "environment:" and (m := _VARIABLE.match(line)):
            current[0][m.group(1)] = m.group(2)
        elif current is not None and section == "ports:" and (m := _PORT.match(line)):
            current[1].append(m.group(1))
    return out


def test_the_cluster_file_has_apache_kafkas_multi_node_environment_with_rf_3_and_min_isr_2():
    nodes = services(EXAMPLES / "cluster" / "docker-compose.yml")
    assert sorted(nodes) == ["kafka-1", "kafka-2", "kafka-3"]
    for n, (name, (env, ports)) in enumerate(sorted(nodes.items()), start=1):
        assert set(env) == APACHE_MULTI_NODE | set(REPLICATION), name
        assert {k: env[k] for k in REPLICATION} == REPLICATION
        host_port = f"${{KAFKA_{n}_PORT:-{n + 1}9092}}"                 # apache/kafka's 29092, 39092, 49092
        assert env["KAFKA_NODE_ID"] == str(n) and env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
        assert env["KAFKA_LISTENERS"] == "PLAINTEXT://:19092,CONTROLLER://:9093,PLAINTEXT_HOST://:9092"
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{name}:19092,PLAINTEXT_HOST://localhost:{host_port}"
        assert env["CLUSTER_ID"] == "4L6g3nShT-eMCtK--X86sw"
        assert ports == [f"127.0.0.1:{host_port}:9092"]


def test_the_single_node_file_publishes_apache_kafkas_port_on_loopback():
    (broker,) = services(EXAMPLES / "single-node" / "docker-compose.yml").values()
    env, ports = broker
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT_HOST://localhost:9092,PLAINTEXT://broker:19092"
    assert env["KAFKA_LISTENERS"] == "CONTROLLER://:29093,PLAINTEXT_HOST://:9092,PLAINTEXT://:19092"
    assert ports == ["127.0.0.1:9092:9092"]
