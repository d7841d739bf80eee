"""DescribeCluster v2 (KIP-1073) with a fenced broker: in a 3-node cluster whose node was killed
(its broker session expires and the controller fences it), DescribeCluster lists the two live
brokers, and with ``include_fenced_brokers`` all three, the killed one ``is_fenced``; Kafka
4.3.1's ``kafka-cluster.sh list-endpoints --include-fenced-brokers`` shows the same."""

from __future__ import annotations

import pytest

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.protocol.messages.describe_cluster import DescribeClusterRequest as DCReq
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until


@pytest.fixture(scope="module")
def kafka_lib():
    return maven.resolve_kafka("4.3.1")


def _described(bootstrap: str, include_fenced: bool) -> list[tuple[int, bool]]:
    resp = wire.call(bootstrap, DCReq(endpoint_type=1, include_fenced_brokers=include_fenced), 2)
    assert resp.error_code == 0
    return [(b.broker_id, b.is_fenced) for b in resp.brokers]


def test_fenced_brokers_are_listed_only_when_asked(tmp_path, kafka_lib):
    tools = JavaTools(str(kafka_lib), tmp_path)
    with Cluster(tmp_path) as cluster:
        cluster.wait_for_brokers()
        controller = wait_until(cluster.leader_id, 30, "an active controller")
        gone = next(n for n in (3, 2, 1) if n != controller)
        via = f"127.0.0.1:{cluster.client_ports[controller - 1]}"
        assert _described(via, True) == [(1, False), (2, False), (3, False)]
        cluster.kill(gone)
        live = [n for n in (1, 2, 3) if n != gone]
        wait_until(lambda: [n for n, _f in _described(via, False)] == live, 60, f"broker {gone} fenced")
        assert _described(via, False) == [(n, False) for n in live]
        assert _described(via, True) == [(n, n == gone) for n in (1, 2, 3)]
        for flag, expected in (((), [(n, "unfenced") for n in live]),
                               (("--include-fenced-brokers",),
                                [(n, "fenced" if n == gone else "unfenced") for n in (1, 2, 3)])):
            res = tools.run("org.apache.kafka.tools.ClusterTool",
                            ["list-endpoints", "--bootstrap-server", via, *flag], timeout=120)
            # ID HOST PORT RACK STATE ENDPOINT_TYPE
            rows = [line.split() for line in res.stdout.splitlines()[1:] if line.strip()]
            assert [(int(r[0]), r[4]) for r in rows] == expected, res.stdout
            assert all(r[1:3] == ["127.0.0.1", str(cluster.client_ports[int(r[0]) - 1])] for r in rows), res.stdout
