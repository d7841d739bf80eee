"""Client quotas in the metadata log (KIP-546) with Kafka 4.3.1's own ``kafka-configs.sh``
(``kafka.admin.ConfigCommand``: AlterClientQuotas and DescribeClientQuotas through the Java
AdminClient) against a real kcompat process: what it prints is what it prints against Apache Kafka
4.3.1, a bad value is refused with Kafka's message, and quotas survive a restart
(ClientQuotaRecords). The errors the tool refuses before sending are checked on the wire."""

from __future__ import annotations

import subprocess

import pytest

from conformance import maven
from conformance.clients import tool_server
from conformance.procs import Completed
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as AQ
from kcompat.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest as DQ
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("quota-configs") / "data") as b:
        yield b


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


def kafka_configs(lib, broker, *args: str) -> Completed:
    cmd = java_command(lib, "kafka.admin.ConfigCommand", ["--bootstrap-server", broker.bootstrap, *args], heap="256m")
    return tool_server.run_command(cmd, timeout=120)


def ok(lib, broker, *args: str) -> list[str]:
    out = kafka_configs(lib, broker, *args)
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
    return [line for line in out.stdout.splitlines() if line]


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafka_configs_alters_and_describes_client_quotas_that_survive_a_restart(broker, lib):
    assert ok(lib, broker, "--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config",
              "producer_byte_rate=1048576,request_percentage=50") == ["Completed updating config for client app."]
    assert ok(lib, broker, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
              "--entity-default", "--alter", "--add-config", "consumer_byte_rate=2000,controller_mutation_rate=10.5") \
        == ["Completed updating config for user alice."]
    assert ok(lib, broker, "--entity-type", "users", "--entity-default", "--alter", "--add-config",
              "producer_byte_rate=5000") == ["Completed updating default config for users in the cluster."]
    assert ok(lib, broker, "--entity-type", "clients", "--describe") == [
        "Quota configs for client-id 'app' are producer_byte_rate=1048576.0, request_percentage=50.0"]
    assert ok(lib, broker, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
              "--describe") == ["Quota configs for user-principal 'alice', the default client-id are "
                                "consumer_byte_rate=2000.0, controller_mutation_rate=10.5"]

    bad = kafka_configs(lib, broker, "--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config",
                        "producer_byte_rate=1.5")
    assert bad.returncode != 0 and "InvalidRequestException: producer_byte_rate cannot be a fractional value." \
        in bad.stdout + bad.stderr, (bad.stdout + bad.stderr)[-2000:]
    assert ok(lib, broker, "--entity-type", "clients", "--entity-name", "app", "--alter", "--delete-config",
              "request_percentage") == ["Completed updating config for client app."]

    broker.restart()
    assert ok(lib, broker, "--entity-type", "users", "--describe") == [
        "Quota configs for the default user-principal are producer_byte_rate=5000.0"]
    (app,) = wire.call(broker.bootstrap, DQ(components=[DQ.ComponentData(entity_type="client-id", match_type=0,
                                                                          match="app")], strict=True), 1).entries
    assert [(v.key, v.value) for v in app.values] == [("producer_byte_rate", 1048576.0)]


def _alter(broker, entity, ops, validate_only=False):
    req = AQ(entries=[AQ.EntryData(entity=[AQ.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                                   ops=[AQ.OpData(key=k, value=v, remove=False) for k, v in ops])],
             validate_only=validate_only)
    (entry,) = wire.call(broker.bootstrap, req, 1).entries
    return entry.error_code, entry.error_message


def test_what_the_tool_refuses_before_sending_is_refused_as_kafka_does(broker):
    assert _alter(broker, [("client-id", "x")], [("foo_rate", 5.0)]) == \
        (ErrorCode.INVALID_REQUEST, "Invalid configuration key foo_rate")
    assert _alter(broker, [("client-id", "x")], [("producer_byte_rate", 0.0)]) == \
        (ErrorCode.INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0")
    assert _alter(broker, [("group", "x")], [("producer_byte_rate", 5.0)]) == \
        (ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: group")
    assert _alter(broker, [("user", "")], [("producer_byte_rate", 5.0)]) == \
        (ErrorCode.INVALID_REQUEST, "Empty user not supported")
    assert _alter(broker, [("ip", "127.0.0.1"), ("user", "u")], [("connection_creation_rate", 5.0)])[0] == \
        ErrorCode.INVALID_REQUEST
    assert _alter(broker, [("ip", "127.0.0.1")], [("producer_byte_rate", 5.0)]) == \
        (ErrorCode.INVALID_REQUEST, "Invalid configuration key producer_byte_rate")
    assert _alter(broker, [("client-id", "v")], [("producer_byte_rate", 5.0)], validate_only=True) == \
        (ErrorCode.NONE, None)
    nothing = wire.call(broker.bootstrap, DQ(components=[DQ.ComponentData(entity_type="client-id", match_type=0,
                                                                           match="v")], strict=False), 1)
    assert (nothing.error_code, nothing.entries) == (ErrorCode.NONE, [])   # validate_only stored nothing
    unknown = wire.call(broker.bootstrap, DQ(components=[DQ.ComponentData(entity_type="group", match_type=2,
                                                                          match=None)], strict=False), 1)
    assert (unknown.error_code, unknown.error_message, unknown.entries) == \
        (ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group", None)


@pytest.mark.timeout(1200)
def test_the_java_producer_reports_the_throttle_time_in_its_metrics(broker, lib):
    """Kafka 4.3.1's ProducerPerformance over ``producer_byte_rate``: 600 kB at 50 kB/s (the
    first 500 kB pass as the quota window's allowance) and the client's own
    ``produce-throttle-time-avg`` / ``-max`` metrics report the throttle time it was sent."""
    # (default user, client-id): more specific than the default user's 5000 B/s set above
    entity = [AQ.EntityData(entity_type="user", entity_name=None),
              AQ.EntityData(entity_type="client-id", entity_name="java-held")]
    req = AQ(entries=[AQ.EntryData(entity=entity, ops=[AQ.OpData(key="producer_byte_rate", value=50000.0,
                                                                   remove=False)])])
    assert wire.call(broker.bootstrap, req, 1).entries[0].error_code == ErrorCode.NONE
    cmd = java_command(lib, "org.apache.kafka.tools.ProducerPerformance", [
        "--topic", "java-held", "--num-records", "600", "--record-size", "1000", "--throughput", "-1",
        "--print-metrics", "--producer-props", f"bootstrap.servers={broker.bootstrap}", "client.id=java-held",
        "acks=1", "batch.size=16384", "linger.ms=0"], heap="256m")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
    metrics = {}
    for line in out.stdout.splitlines():
        name, _, value = line.rpartition(":")
        if name.startswith("producer-metrics:produce-throttle-time-"):
            metrics[name.split(":")[1]] = float(value.strip())
    assert metrics["produce-throttle-time-max"] > 0 and metrics["produce-throttle-time-avg"] > 0, metrics
