"""Feature flags in a 3-node kcompat cluster with Apache Kafka 4.3.1's ``kafka-features.sh``
(``org.apache.kafka.tools.FeatureCommand``): an upgrade sent to a broker that is not the active
controller is forwarded there (as CreateTopics is) and every node's ApiVersions then shows the new
level; the active controller's controller listener takes UpdateFeatures too, while on another
controller's listener it answers NOT_CONTROLLER; ``kafka-features --bootstrap-controller describe``
prints what ``--bootstrap-server`` prints."""

from __future__ import annotations

import pytest

from conformance import maven
from conformance.clients import tool_server
from conformance.procs import Completed
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.update_features import UpdateFeaturesRequest as UQ
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until


@pytest.fixture(scope="module")
def kafka_lib():
    return maven.resolve_kafka("4.3.1")


def kafka_features(lib, *args: str) -> Completed:
    cmd = java_command(lib, "org.apache.kafka.tools.FeatureCommand", list(args), heap="256m")
    return tool_server.run_command(cmd, timeout=120)


def finalized(port: int) -> dict[str, int]:
    req = ApiVersionsRequest(client_software_name="kcompat-test", client_software_version="1.0")
    resp = wire.call(f"127.0.0.1:{port}", req, 4)
    return {f.name: f.max_version_level for f in resp.finalized_features}


@pytest.mark.timeout(600)
def test_feature_updates_reach_the_active_controller_and_every_node(tmp_path, kafka_lib):
    with Cluster(tmp_path) as cluster:
        leader = cluster.leader_id()
        other = next(n for n in (1, 2, 3) if n != leader)
        out = kafka_features(kafka_lib, "--bootstrap-server", f"127.0.0.1:{cluster.client_ports[other - 1]}",
                             "upgrade", "--feature", "group.version=1")
        assert out.returncode == 0 and out.stdout.strip() == "group.version was upgraded to 1.", out.stdout + out.stderr
        wait_until(lambda: all(finalized(p).get("group.version") == 1 for p in cluster.client_ports), 30,
                   "every node shows group.version 1")

        # the controller listener of the active controller takes UpdateFeatures too (Kafka's ControllerApis)
        share = UQ(timeout_ms=10000, feature_updates=[UQ.FeatureUpdateKey(feature="share.version", max_version_level=1,
                                                                           upgrade_type=1)])
        resp = wire.call(f"127.0.0.1:{cluster.controller_ports[cluster.leader_id() - 1]}", share, 2)
        assert (resp.error_code, resp.error_message) == (ErrorCode.NONE, None)
        wait_until(lambda: all(finalized(p).get("share.version") == 1 for p in cluster.client_ports), 30,
                   "every node shows share.version 1")
        out = kafka_features(kafka_lib, "--bootstrap-server", f"127.0.0.1:{cluster.client_ports[other - 1]}",
                             "upgrade", "--feature", "transaction.version=3")
        assert out.returncode != 0 and "Invalid update version 3 for feature transaction.version. Local controller " \
            f"{cluster.leader_id()} only supports versions 0-2" in out.stdout, out.stdout + out.stderr

        req = UQ(timeout_ms=10000, feature_updates=[UQ.FeatureUpdateKey(feature="group.version", max_version_level=0,
                                                                         upgrade_type=2)])
        follower = next(n for n in (1, 2, 3) if n != cluster.leader_id())
        resp = wire.call(f"127.0.0.1:{cluster.controller_ports[follower - 1]}", req, 2)
        assert resp.error_code == ErrorCode.NOT_CONTROLLER and resp.results == []
        assert all(finalized(p).get("group.version") == 1 for p in cluster.client_ports)

        # --bootstrap-controller (KIP-919): DescribeCluster on a controller listener names the
        # controllers, and the tool describes the features from a controller as from a broker
        via_controller = kafka_features(kafka_lib, "--bootstrap-controller",
                                        f"127.0.0.1:{cluster.controller_ports[follower - 1]}", "describe")
        via_broker = kafka_features(kafka_lib, "--bootstrap-server", f"127.0.0.1:{cluster.client_ports[0]}", "describe")
        assert via_controller.returncode == 0, via_controller.stdout + via_controller.stderr
        assert "Feature: group.version" in via_controller.stdout
        assert via_controller.stdout == via_broker.stdout
