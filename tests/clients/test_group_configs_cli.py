"""Dynamic group configs (ConfigResource GROUP = 32, KIP-932) with Kafka 4.3.1's own
``kafka-configs.sh`` (``kafka.admin.ConfigCommand``: IncrementalAlterConfigs and DescribeConfigs
through the Java AdminClient) against a real kcompat process: what it prints is what it prints
against Apache Kafka 4.3.1, a bad value is refused with Kafka's INVALID_CONFIG message, and the
configs survive a restart (ConfigRecords in the metadata log). The protocol errors the tool
cannot send (APPEND on a group config, the empty group name) are checked on the wire."""

from __future__ import annotations

import pytest

from conformance import maven
from conformance.clients import tool_server
from conformance.procs import Completed
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DQ
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IQ
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess

GROUP = 32
EARLIEST = ("  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset"
            "=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}")
LOCK_45000 = ("  share.record.lock.duration.ms=45000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.record.lock."
              "duration.ms=45000, DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000}")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("group-configs") / "data") as b:
        yield b


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


def kafka_configs(lib, broker, *args: str) -> Completed:
    """``kafka-configs.sh --bootstrap-server <broker> --entity-type groups <args>`` of Kafka 4.3.1."""
    cmd = java_command(lib, "kafka.admin.ConfigCommand",
                       ["--bootstrap-server", broker.bootstrap, "--entity-type", "groups", *args], heap="256m")
    return tool_server.run_command(cmd, timeout=120)


def described(lib, broker, group: str, *extra: str) -> list[str]:
    out = kafka_configs(lib, broker, "--entity-name", group, "--describe", *extra)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafka_configs_sets_describes_and_deletes_group_configs_that_survive_a_restart(broker, lib):
    out = kafka_configs(lib, broker, "--entity-name", "G", "--alter", "--add-config",
                        "share.auto.offset.reset=earliest,share.record.lock.duration.ms=45000")
    assert out.returncode == 0 and "Completed updating config for group G." in out.stdout, out.stderr[-2000:]
    assert described(lib, broker, "G") == ["Dynamic configs for group G are:", EARLIEST, LOCK_45000]

    every = described(lib, broker, "G", "--all")
    assert every[0] == "All configs for group G are:" and len(every) == 18, every
    assert EARLIEST in every and LOCK_45000 in every
    assert ("  share.isolation.level=read_uncommitted sensitive=false synonyms={DEFAULT_CONFIG:share.isolation.level"
            "=read_uncommitted}") in every
    assert ("  share.delivery.count.limit=5 sensitive=false synonyms={DEFAULT_CONFIG:group.share.delivery.count."
            "limit=5}") in every

    for config, message in [
            ("share.record.lock.duration.ms=5000", "InvalidConfigurationException: share.record.lock.duration.ms "
             "must be greater than or equal to group.share.min.record.lock.duration.ms"),
            ("foo.bar=1", "InvalidConfigurationException: Unknown group config name: foo.bar"),
            ("share.auto.offset.reset=by_duration:-PT1H", "InvalidConfigurationException: Invalid value "
             "by_duration:-PT1H for configuration share.auto.offset.reset")]:
        bad = kafka_configs(lib, broker, "--entity-name", "G", "--alter", "--add-config", config)
        assert bad.returncode != 0 and message in bad.stdout + bad.stderr, (bad.stdout + bad.stderr)[-2000:]
    assert described(lib, broker, "G") == ["Dynamic configs for group G are:", EARLIEST, LOCK_45000]

    out = kafka_configs(lib, broker, "--entity-name", "G", "--alter", "--delete-config", "share.record.lock.duration.ms")
    assert out.returncode == 0, out.stderr[-2000:]
    out = kafka_configs(lib, broker, "--entity-name", "H", "--alter", "--add-config",
                        "share.auto.offset.reset=by_duration:PT1H,share.isolation.level=read_committed")
    assert out.returncode == 0, out.stderr[-2000:]

    broker.restart()
    assert described(lib, broker, "G") == ["Dynamic configs for group G are:", EARLIEST]
    assert sorted(described(lib, broker, "H")[1:]) == [
        "  share.auto.offset.reset=by_duration:PT1H sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset."
        "reset=by_duration:PT1H, DEFAULT_CONFIG:share.auto.offset.reset=latest}",
        "  share.isolation.level=read_committed sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.isolation.level="
        "read_committed, DEFAULT_CONFIG:share.isolation.level=read_uncommitted}"]


def test_what_the_tool_cannot_send(broker):
    append = IQ(resources=[IQ.AlterConfigsResource(resource_type=GROUP, resource_name="G", configs=[
        IQ.AlterableConfig(name="share.auto.offset.reset", config_operation=2, value="latest")])])
    (res,) = wire.call(broker.bootstrap, append, 1).responses
    assert (res.error_code, res.error_message) == \
        (ErrorCode.INVALID_CONFIG, "Can't APPEND to key share.auto.offset.reset because its type is not LIST.")
    default = IQ(resources=[IQ.AlterConfigsResource(resource_type=GROUP, resource_name="", configs=[
        IQ.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="latest")])])
    (res,) = wire.call(broker.bootstrap, default, 1).responses
    assert (res.error_code, res.error_message) == (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    (res,) = wire.call(broker.bootstrap, DQ(resources=[DQ.DescribeConfigsResource(
        resource_type=GROUP, resource_name="", configuration_keys=None)]), 4).results
    assert (res.error_code, res.error_message) == (ErrorCode.INVALID_REQUEST, "Group name must not be empty")
