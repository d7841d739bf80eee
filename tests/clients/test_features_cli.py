"""Feature flags (KIP-584, KIP-778, KIP-1022) with Kafka 4.3.1's own ``kafka-features.sh``
(``org.apache.kafka.tools.FeatureCommand``: ApiVersions for ``describe``, UpdateFeatures through the
Java AdminClient for ``upgrade`` / ``downgrade`` / ``disable``) against a real kcompat process:
``describe`` lists what kcompat implements as the tool prints it for Apache Kafka, changes succeed
or fail with Kafka's messages, transaction.version 2 (KIP-890 part 2) may be finalized at 3.8-IV0 as
on Kafka 4.3.1 formatted there, and a finalized level survives a restart. What the tool cannot send (v0 and v2 shapes, unknown
upgrade types, repeated features) is checked on the wire."""

from __future__ import annotations

import pytest

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.update_features import UpdateFeaturesRequest as UQ
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess

FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"
ALL_FAILED = "The update failed for all features since the following feature had an error: "


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("features") / "data") as b:
        yield b


@pytest.fixture(scope="module")
def wire_broker(tmp_path_factory):
    """A broker of its own, so the wire checks start from a new cluster's levels."""
    with BrokerProcess(tmp_path_factory.mktemp("features-wire") / "data") as b:
        yield b


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    return JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path_factory.mktemp("features-tools"))


def kafka_features(tools, broker, *args: str):
    """``kafka-features.sh --bootstrap-server <broker> <args>`` of Kafka 4.3.1 (stdout, stderr, exit status)."""
    return tools.run(FEATURE_COMMAND, ["--bootstrap-server", broker.bootstrap, *args], check=False, timeout=120,
                     heap="256m")


def line(feature: str, lo: str, hi: str, level: str, epoch: int) -> str:
    """One ``describe`` line, in FeatureCommand's format."""
    return (f"Feature: {feature:<40}  SupportedMinVersion: {lo:<15}  SupportedMaxVersion: {hi:<15}  "
            f"FinalizedVersionLevel: {level:<15}  Epoch: {epoch}")


def described(tools, broker) -> tuple[list[str], int]:
    out = kafka_features(tools, broker, "describe")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    return lines, int(lines[0].rsplit("Epoch: ", 1)[1])


def expected(epoch: int, group: int = 0, share: int = 0, txn: int = 0, mv: str = "3.8-IV0", streams: int = 1) -> list[str]:
    return [line("group.version", "0", "1", str(group), epoch), line("kraft.version", "0", "0", "0", epoch),
            line("metadata.version", "3.3-IV3", "3.8-IV0", mv, epoch),
            line("share.version", "0", "1", str(share), epoch),
            line("streams.version", "0", "1", str(streams), epoch),
            line("transaction.version", "0", "2", str(txn), epoch)]


def changes(tools, broker, *args: str) -> str:
    out = kafka_features(tools, broker, *args)
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
    return out.stdout.strip()


def refused(tools, broker, *args: str) -> str:
    """What the tool prints for the one refused change (the exit status and the count on stderr
    say it failed)."""
    out = kafka_features(tools, broker, *args)
    assert out.returncode != 0 and "1 out of 1 operation(s) failed." in out.stderr, out.stdout + out.stderr
    return out.stdout.strip()


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafka_features_describes_upgrades_downgrades_and_keeps_levels_over_a_restart(broker, tools):
    lines, epoch = described(tools, broker)
    # a new cluster at 3.8-IV0: Kafka 4.3 finalizes nothing else; kcompat finalizes streams.version 1
    # as a 4.3.1 node formatted at its default release (KIP-1071 streams groups on)
    assert lines == expected(epoch)

    assert changes(tools, broker, "upgrade", "--feature", "group.version=1", "--feature", "share.version=1") == \
        "group.version was upgraded to 1.\nshare.version was upgraded to 1."
    lines, later = described(tools, broker)
    assert later > epoch and lines == expected(later, group=1, share=1)

    for command, (feature, level), reason in [
            ("upgrade", ("transaction.version", 3), "Local controller 1 only supports versions 0-2"),
            ("downgrade", ("transaction.version", 1), "Can't downgrade to a newer version."),
            ("upgrade", ("streams.version", 2), "Local controller 1 only supports versions 0-1")]:
        assert refused(tools, broker, command, "--feature", f"{feature}={level}") == (
            f"Could not {command} {feature} to {level}. {ALL_FAILED}Invalid update version {level} for feature "
            f"{feature}. {reason}")
    assert refused(tools, broker, "downgrade", "--feature", "metadata.version=14") == (
        f"Could not downgrade metadata.version to 14. {ALL_FAILED}Unsupported metadata.version downgrade from 20 to "
        "14. Refusing to perform the requested downgrade because it might delete metadata information.")
    assert changes(tools, broker, "upgrade", "--feature", "transaction.version=1", "--dry-run") == \
        "transaction.version can be upgraded to 1."
    assert changes(tools, broker, "upgrade", "--feature", "transaction.version=2", "--dry-run") == \
        "transaction.version can be upgraded to 2."   # what Kafka 4.3.1 formatted at 3.8-IV0 prints
    assert described(tools, broker)[0] == expected(later, group=1, share=1)   # nothing changed

    assert changes(tools, broker, "downgrade", "--feature", "share.version=0") == "share.version was downgraded to 0."
    assert changes(tools, broker, "upgrade", "--feature", "transaction.version=1") == \
        "transaction.version was upgraded to 1."

    broker.restart()
    lines, epoch = described(tools, broker)
    assert lines == expected(epoch, group=1, txn=1)
    assert changes(tools, broker, "disable", "--feature", "group.version") == "group.version was disabled."
    assert described(tools, broker)[0] == expected(epoch + 1, txn=1)


def test_api_versions_lists_features_as_kafka(broker):
    """v4 lists every supported feature; v3 leaves out those whose minimum is 0 (KAFKA-17011);
    finalized features at level 0 are never listed."""
    req = ApiVersionsRequest(client_software_name="kcompat-test", client_software_version="1.0")
    v4 = wire.call(broker.bootstrap, req, 4)
    assert [(f.name, f.min_version, f.max_version) for f in v4.supported_features] == [
        ("group.version", 0, 1), ("kraft.version", 0, 0), ("metadata.version", 7, 20), ("share.version", 0, 1),
        ("streams.version", 0, 1), ("transaction.version", 0, 2)]
    v3 = wire.call(broker.bootstrap, req, 3)
    assert [f.name for f in v3.supported_features] == ["metadata.version"]
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in v4.finalized_features}
    assert finalized["metadata.version"] == (20, 20) and all(lo > 0 for lo, _ in finalized.values())
    assert v4.finalized_features_epoch > 0


def update(broker, version: int, *updates: tuple, validate_only: bool = False):
    req = UQ(timeout_ms=30000, validate_only=validate_only,
             feature_updates=[UQ.FeatureUpdateKey(feature=f, max_version_level=lvl, upgrade_type=t, allow_downgrade=d)
                              for f, lvl, t, d in updates])
    return wire.call(broker.bootstrap, req, version)


def finalized_level(broker, feature: str) -> int:
    req = ApiVersionsRequest(client_software_name="kcompat-test", client_software_version="1.0")
    return {f.name: f.max_version_level for f in wire.call(broker.bootstrap, req, 4).finalized_features}.get(feature, 0)


def test_update_features_on_the_wire(wire_broker):
    broker = wire_broker
    # v0-v1 answer every feature with NONE (message "NONE", Kafka's Errors.NONE.message())
    resp = update(broker, 1, ("share.version", 1, 1, False), ("share.version", 0, 2, False), validate_only=True)
    assert (resp.error_code, resp.error_message) == (0, None)
    assert [(r.feature, r.error_code, r.error_message) for r in resp.results] == \
        [("share.version", 0, "NONE"), ("share.version", 0, "NONE")]   # repeated: the last one counts
    assert finalized_level(broker, "share.version") == 0                # ValidateOnly wrote nothing

    # v0's AllowDowngrade is not read: Kafka's controller takes the UpgradeType (UPGRADE before v1)
    update(broker, 2, ("group.version", 1, 1, False))
    resp = update(broker, 0, ("group.version", 0, 1, True))
    assert resp.error_code == ErrorCode.INVALID_UPDATE_VERSION and resp.results == []
    assert resp.error_message == (f"{ALL_FAILED}Invalid update version 0 for feature group.version. Can't downgrade "
                                  "the version of this feature without setting the upgrade type to either safe or "
                                  "unsafe downgrade.")

    # v2: no per-feature results, a failure names the first feature in a Java HashMap's order
    resp = update(broker, 2, ("group.version", 0, 2, False))
    assert (resp.error_code, resp.error_message, resp.results) == (0, None, [])
    assert finalized_level(broker, "group.version") == 0
    resp = update(broker, 2, ("transaction.version", 2, 1, False), ("foo", 0, 1, False))
    assert (resp.error_code, resp.error_message) == (ErrorCode.INVALID_UPDATE_VERSION,
                                                     f"{ALL_FAILED}Invalid update version 0 for feature foo. Feature "
                                                     "foo not found.")
    for upgrade_type in (0, 4):
        resp = update(broker, 1, ("share.version", 1, upgrade_type, False))
        assert (resp.error_code, resp.error_message, resp.results) == (
            ErrorCode.INVALID_UPDATE_VERSION, f"{ALL_FAILED}Invalid update version 1 for feature share.version. The "
                                              "controller does not support the given upgrade type.", [])
    resp = update(broker, 2, ("metadata.version", 16, 3, False))
    assert resp.error_message == (f"{ALL_FAILED}Unsupported metadata.version downgrade from 20 to 16. Unsafe "
                                  "metadata downgrade is not supported in this version.")
    resp = update(broker, 2, ("kraft.version", 1, 1, False))
    assert resp.error_message == (f"{ALL_FAILED}Invalid update version 1 for feature kraft.version. Local "
                                  "controller 1 does not support this feature.")
    assert finalized_level(broker, "share.version") == 0 and finalized_level(broker, "metadata.version") == 20
