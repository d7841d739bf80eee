"""DescribeQuorum v2's ``Nodes`` (KIP-853) on a single node with a controller listener: Kafka's
quorum leader names each static voter at its ``controller.quorum.voters`` address on the first of
``controller.listener.names``, which Kafka 4.3.1's ``kafka-metadata-quorum describe --status`` prints
as ``CurrentVoters: [{"id": 1, "endpoints": ["CONTROLLER://host:port"]}]``. Asked on the broker
listener and on the controller listener; v1 has no such field."""

from __future__ import annotations

import re

import pytest

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.protocol.messages.describe_quorum import DescribeQuorumRequest as Q
from kcompat.testing import wire
from kcompat.testing.ports import free_ports
from tests.support.broker_process import BrokerProcess

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    port, cport = free_ports(2, HOST)
    overrides = {"listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{cport}",
                 "controller.listener.names": "CONTROLLER", "controller.quorum.voters": f"1@{HOST}:{cport}",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}
    with BrokerProcess(tmp_path_factory.mktemp("quorum-nodes") / "data", overrides, port=port) as b:
        yield b, f"{HOST}:{cport}"


def describe(address: str, version: int):
    req = Q(topics=[Q.TopicData(topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])])
    return wire.call(address, req, version)


@pytest.mark.parametrize("via", ["broker", "controller"])
def test_v2_names_each_voter_on_the_controller_listener(node, via):
    broker, controller = node
    resp = describe(broker.bootstrap if via == "broker" else controller, 2)
    assert resp.error_code == 0 and resp.topics[0].partitions[0].leader_id == 1
    host, port = controller.split(":")
    assert [(n.node_id, [(ln.name, ln.host, ln.port) for ln in n.listeners]) for n in resp.nodes] == \
        [(1, [("CONTROLLER", host, int(port))])]


def test_v1_has_no_nodes(node):
    resp = describe(node[0].bootstrap, 1)
    assert resp.error_code == 0 and resp.nodes == []


def test_kafka_metadata_quorum_prints_the_voter_endpoints(node, tmp_path):
    broker, controller = node
    tools = JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path)
    out = tools.run("org.apache.kafka.tools.MetadataQuorumCommand",
                    ["--bootstrap-server", broker.bootstrap, "describe", "--status"], timeout=120, heap="256m")
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", out.stdout, re.M))
    assert fields["CurrentVoters"] == f'[{{"id": 1, "endpoints": ["CONTROLLER://{controller}"]}}]'
    assert fields["CurrentObservers"] == "[]"
