"""Client metrics subscriptions (ConfigResource CLIENT_METRICS = 16, KIP-714) and ListConfigResources
(key 74, KIP-1142) with Kafka 4.3.1's own tools against a real kcompat process:
``kafka-client-metrics.sh`` (``org.apache.kafka.tools.ClientMetricsCommand``: ListConfigResources,
IncrementalAlterConfigs, DescribeConfigs through the Java AdminClient) and
``kafka-configs.sh --entity-type client-metrics`` (``kafka.admin.ConfigCommand``). What they print
is what they print against Apache Kafka 4.3.1 (the tools' source: ``Client metrics configs for X
are:`` then ``  name=value`` per config; subscriptions come sorted by name, where Kafka lists them
in its hash map's order), bad values are refused with Kafka's messages, the
subscriptions survive a restart (ConfigRecords of type 16 in the metadata log) and disappear when
their last config is deleted. The wire tests cover what the tools cannot send: ListConfigResources
v0 and v1 with type filters and its UNSUPPORTED_VERSION, APPEND on a subscription, the empty
name, the legacy AlterConfigs. One broker for the module (``broker`` of tests/conftest.py).
"""

from __future__ import annotations

import subprocess

import pytest

from conformance import maven
from conformance.clients import tool_server
from conformance.procs import Completed
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_configs import AlterConfigsRequest as AQ
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CQ
from kcompat.protocol.messages.describe_cluster import DescribeClusterRequest
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DQ
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IQ
from kcompat.protocol.messages.list_config_resources import ListConfigResourcesRequest as LQ
from kcompat.testing import wire

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND = 0, 1, 2
CLIENT_METRICS_CONFIG, DEFAULT_CONFIG = 7, 5   # DescribeConfigs config sources
PRODUCER = "org.apache.kafka.producer."
COORDINATOR = "org.apache.kafka.consumer.coordinator"
MATCH = "client_id=app.*,client_software_name=apache-kafka-java"
S1 = ["Client metrics configs for S1 are:", "  interval.ms=1000", f"  match={MATCH}",
      f"  metrics={PRODUCER},{COORDINATOR}"]


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


def run(lib, main: str, *args: str) -> Completed:
    cmd = java_command(lib, main, list(args), heap="256m")
    return tool_server.run_command(cmd, timeout=120)


def client_metrics(lib, broker, *args: str) -> Completed:
    """``kafka-client-metrics.sh --bootstrap-server <broker> <args>`` of Kafka 4.3.1."""
    return run(lib, "org.apache.kafka.tools.ClientMetricsCommand", "--bootstrap-server", broker.bootstrap, *args)


def ok(out: subprocess.CompletedProcess) -> list[str]:
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
    return out.stdout.splitlines()


def listed(broker, version: int, types: list[int] | None = None) -> list[tuple[int, str]]:
    resp = wire.call(broker.bootstrap, LQ(resource_types=types or []), version)
    assert resp.error_code == ErrorCode.NONE, resp
    return [(r.resource_type, r.resource_name) for r in resp.config_resources]


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafka_client_metrics_alters_lists_describes_and_deletes_subscriptions_that_survive_a_restart(broker, lib):
    assert ok(client_metrics(lib, broker, "--alter", "--name", "S1", "--metrics", f"{PRODUCER},{COORDINATOR}",
                             "--interval", "1000", "--match", MATCH)) == ["Altered client metrics config for S1."]
    assert ok(client_metrics(lib, broker, "--list")) == ["S1"]
    assert ok(client_metrics(lib, broker, "--describe", "--name", "S1")) == S1
    assert ok(client_metrics(lib, broker, "--describe", "--name", "nope")) == [
        "The client metric resource nope doesn't exist and doesn't have dynamic config."]

    for args, message in [
            (("--interval", "50"), "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
            (("--interval", "3600001"), "Invalid value 3600001 for interval.ms, interval must be between 100 and "
                                        "3600000 (1 hour)"),
            (("--match", "client_rack=a"), "Illegal client matching pattern: client_rack=a"),
            (("--match", "client_id=("), "Illegal client matching pattern: client_id=(")]:
        bad = client_metrics(lib, broker, "--alter", "--name", "S1", *args)
        assert bad.returncode == 1 and bad.stdout.splitlines() == [
            f"Error while executing client metrics command : {message}"], (bad.stdout + bad.stderr)[-2000:]
    assert ok(client_metrics(lib, broker, "--describe", "--name", "S1")) == S1

    # a metric named twice is kept once (ConfigDef drops a list's duplicates), as Kafka 4.3.1 does
    assert ok(client_metrics(lib, broker, "--alter", "--name", "S2", "--metrics", "a,b,a"))
    assert ok(client_metrics(lib, broker, "--describe", "--name", "S2")) == [
        "Client metrics configs for S2 are:", "  interval.ms=300000", "  match=", "  metrics=a,b"]

    # an empty value deletes that config (the tool sends DELETE); kafka-configs.sh sets and shows them too
    assert ok(client_metrics(lib, broker, "--alter", "--name", "S2", "--interval", "2000", "--metrics", "*"))
    assert ok(client_metrics(lib, broker, "--alter", "--name", "S2", "--metrics", ""))
    configs = ("kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap, "--entity-type", "client-metrics")
    assert ok(run(lib, *configs, "--entity-name", "S3", "--alter", "--add-config", "metrics=[a,b],interval.ms=500")) \
        == ["Completed updating config for client-metric S3."]
    assert ok(run(lib, *configs, "--entity-name", "S3", "--describe")) == [
        "Dynamic configs for client-metric S3 are:",
        "  interval.ms=500 sensitive=false synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:interval.ms=500}",
        "  metrics=a,b sensitive=false synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:metrics=a,b}"]
    assert ok(run(lib, *configs, "--entity-name", "S3", "--describe", "--all")) == [
        "All configs for client-metric S3 are:",
        "  interval.ms=500 sensitive=false synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:interval.ms=500}",
        "  match= sensitive=false synonyms={}",
        "  metrics=a,b sensitive=false synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:metrics=a,b}"]
    bad = run(lib, *configs, "--entity-name", "S3", "--alter", "--add-config", "interval.ms=soon")
    assert bad.returncode != 0 and "InvalidConfigurationException: Invalid value soon for configuration " \
        "interval.ms: Not a number of type INT" in bad.stdout + bad.stderr, (bad.stdout + bad.stderr)[-2000:]

    broker.restart()
    assert ok(client_metrics(lib, broker, "--list")) == ["S1", "S2", "S3"]
    assert ok(client_metrics(lib, broker, "--describe")) == [
        *S1, "Client metrics configs for S2 are:", "  interval.ms=2000", "  match=", "  metrics=",
        "Client metrics configs for S3 are:", "  interval.ms=500", "  match=", "  metrics=a,b"]

    assert ok(client_metrics(lib, broker, "--delete", "--name", "S1")) == ["Deleted client metrics config for S1."]
    assert ok(client_metrics(lib, broker, "--alter", "--name", "S2", "--interval", ""))   # its last config
    assert ok(run(lib, *configs, "--entity-name", "S3", "--alter", "--delete-config", "interval.ms,metrics"))
    assert ok(client_metrics(lib, broker, "--list")) == [""]   # the tool prints the empty join
    assert ok(client_metrics(lib, broker, "--describe", "--name", "S1")) == [
        "The client metric resource S1 doesn't exist and doesn't have dynamic config."]


def test_list_config_resources_v0_lists_subscriptions_and_v1_every_type_it_is_asked_for(broker):
    def alter(rtype: int, name: str, key: str, value: str | None, op: int = SET) -> None:
        req = IQ(resources=[IQ.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=[
            IQ.AlterableConfig(name=key, config_operation=op, value=value)])])
        (res,) = wire.call(broker.bootstrap, req, 1).responses
        assert res.error_code == ErrorCode.NONE, res

    created = wire.call(broker.bootstrap, CQ(topics=[CQ.CreatableTopic(name="list-me", num_partitions=1,
                                                                       replication_factor=1)], timeout_ms=30000), 7)
    assert created.topics[0].error_code == ErrorCode.NONE, created
    alter(CLIENT_METRICS, "W2", "interval.ms", "1000")
    alter(CLIENT_METRICS, "W1", "metrics", "*")
    alter(GROUP, "listed-group", "share.auto.offset.reset", "earliest")
    (node,) = [str(b.broker_id) for b in wire.call(broker.bootstrap, DescribeClusterRequest(), 0).brokers]

    assert listed(broker, 0) == [(CLIENT_METRICS, "W1"), (CLIENT_METRICS, "W2")]   # v0 has no types (default 16)
    assert listed(broker, 1, [CLIENT_METRICS]) == [(CLIENT_METRICS, "W1"), (CLIENT_METRICS, "W2")]
    assert listed(broker, 1, [GROUP]) == [(GROUP, "listed-group")]
    assert listed(broker, 1, [BROKER, BROKER_LOGGER]) == [(BROKER_LOGGER, node), (BROKER, node)]
    topics = listed(broker, 1, [TOPIC])
    assert (TOPIC, "list-me") in topics and {t for t, _ in topics} == {TOPIC}
    assert [n for _, n in topics] == sorted(n for _, n in topics)
    everything = listed(broker, 1)   # empty = every supported type, in KafkaApis' order of types
    assert everything == [(GROUP, "listed-group"), (CLIENT_METRICS, "W1"), (CLIENT_METRICS, "W2"),
                          (BROKER_LOGGER, node), (BROKER, node), *topics]

    for types in ([1], [TOPIC, 64], [0]):   # a type v1 does not support fails the whole request
        resp = wire.call(broker.bootstrap, LQ(resource_types=types), 1)
        assert (resp.error_code, resp.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, []), types

    alter(CLIENT_METRICS, "W1", "metrics", None, DELETE)   # its only config: the subscription is gone
    alter(GROUP, "listed-group", "share.auto.offset.reset", None, DELETE)
    assert listed(broker, 1, [CLIENT_METRICS, GROUP]) == [(CLIENT_METRICS, "W2")]
    alter(CLIENT_METRICS, "W2", "interval.ms", None, DELETE)


def test_subscription_errors_the_tools_cannot_send(broker):
    def incremental(name: str, *configs: tuple[str, int, str | None]):
        req = IQ(resources=[IQ.AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name=name, configs=[
            IQ.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in configs])])
        (res,) = wire.call(broker.bootstrap, req, 1).responses
        return res.error_code, res.error_message

    # metrics and match are LISTs, but Kafka 4.3.1's controller has no schema for client metrics
    assert incremental("E", ("metrics", APPEND, "a")) == \
        (ErrorCode.INVALID_CONFIG, "Can't APPEND to key metrics because its type is not LIST.")
    assert incremental("E", ("metrics", 3, "a")) == \
        (ErrorCode.INVALID_CONFIG, "Can't SUBTRACT to key metrics because its type is not LIST.")
    assert incremental("E", ("interval.ms", SET, "1000"), ("push.enabled", SET, "true")) == \
        (ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: push.enabled")
    assert incremental("", ("interval.ms", SET, "1000")) == (ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    assert incremental("E", ("metrics", SET, "a,,b")) == \
        (ErrorCode.INVALID_CONFIG, "Configuration 'metrics' values must not be empty.")
    assert incremental("E", ("match", SET, "client_id")) == \
        (ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id")
    assert incremental("E", ("interval.ms", SET, "x"), ("metrics", SET, "a,a")) == \
        (ErrorCode.INVALID_CONFIG, "Invalid value x for configuration interval.ms: Not a number of type INT")
    assert incremental("E", ("match", SET, None), ("metrics", DELETE, None)) == \
        (ErrorCode.INVALID_REQUEST, "Null value not supported for : match")
    assert listed(broker, 0) == []   # nothing refused was stored

    (res,) = wire.call(broker.bootstrap, DQ(resources=[DQ.DescribeConfigsResource(
        resource_type=CLIENT_METRICS, resource_name="", configuration_keys=None)]), 4).results
    assert (res.error_code, res.error_message) == \
        (ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")

    # the legacy AlterConfigs replaces the whole set, as Kafka's ConfigAdminManager lets it
    def legacy(**configs: str) -> int:
        req = AQ(resources=[AQ.AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name="L", configs=[
            AQ.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()])])
        return wire.call(broker.bootstrap, req, 2).responses[0].error_code

    assert legacy(metrics="a", interval_ms="700") == ErrorCode.NONE
    assert legacy(match="client_source_port=80") == ErrorCode.NONE
    (res,) = wire.call(broker.bootstrap, DQ(resources=[DQ.DescribeConfigsResource(
        resource_type=CLIENT_METRICS, resource_name="L", configuration_keys=None)], include_synonyms=True,
        include_documentation=True), 4).results
    assert [(c.name, c.value, c.config_source, c.config_type, c.read_only, c.is_sensitive,
             [(s.name, s.value, s.source) for s in c.synonyms], c.documentation) for c in res.configs] == [
        ("interval.ms", "300000", DEFAULT_CONFIG, 3, False, False, [], "Metrics push interval in milliseconds"),
        ("match", "client_source_port=80", CLIENT_METRICS_CONFIG, 7, False, False,
         [("match", "client_source_port=80", CLIENT_METRICS_CONFIG)], "Client match criteria"),
        ("metrics", "", DEFAULT_CONFIG, 7, False, False, [], "Telemetry metric name prefix list")]
    assert legacy(interval_ms="99") == ErrorCode.INVALID_REQUEST
    assert legacy() == ErrorCode.NONE
    assert listed(broker, 0) == []
