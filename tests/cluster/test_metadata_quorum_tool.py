"""Apache Kafka's own ``kafka-metadata-quorum`` (``org.apache.kafka.tools.MetadataQuorumCommand``,
from Kafka's jars resolved from Maven Central by the conformance suite) describes kcompat's
quorum: ``describe --status`` and ``describe --replication`` through a broker, which forwards
DescribeQuorum to the active controller, and ``--bootstrap-controller`` straight at a controller
listener (KIP-919: the admin client first asks DescribeCluster for the controllers, then sends
DescribeQuorum to the active one it named)."""

from __future__ import annotations

import re
import subprocess

import pytest

from conformance import KAFKA_VERSION, maven
from tests.support.cluster import Cluster, wait_until


@pytest.fixture(scope="module")
def kafka_lib():
    return maven.resolve_kafka(KAFKA_VERSION)


def _quorum_tool(lib, bootstrap: str, *args: str, flag: str = "--bootstrap-server") -> str:
    proc = subprocess.run(["java", "-cp", f"{lib}/*", "org.apache.kafka.tools.MetadataQuorumCommand",
                           flag, bootstrap, "describe", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _leadership(cluster) -> tuple[int, int] | None:
    q = cluster.quorum()
    return (q.leader_id, q.leader_epoch) if q is not None and q.leader_id >= 0 else None


def _with_stable_leader(cluster, call, attempts: int = 5) -> tuple[str, tuple[int, int]]:
    """``call()``'s output and the (leader id, leader epoch) it must show: those the cluster
    reports before and after the call, which must be the same. The suite's clusters use short Raft
    timeouts (``controller.quorum.fetch.timeout.ms=1000``), so on a loaded machine - each tool run
    starts a JVM - an election can come between two calls; a call during which one happened is
    made again."""
    for _ in range(attempts):
        before = wait_until(lambda: _leadership(cluster), 15, "a leader")
        out = call()
        if _leadership(cluster) == before:
            return out, before
    raise AssertionError(f"the quorum elected a new leader during each of {attempts} tool runs")


def test_kafka_metadata_quorum_describes_a_three_voter_quorum(tmp_path, kafka_lib):
    with Cluster(tmp_path) as cluster:
        leader = wait_until(cluster.leader_id, 15, "a leader")
        follower_port = next(p for i, p in enumerate(cluster.client_ports) if i + 1 != leader)
        status, (leader, epoch) = _with_stable_leader(
            cluster, lambda: _quorum_tool(kafka_lib, f"127.0.0.1:{follower_port}", "--status"))
        fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.M))
        assert fields["ClusterId"] == cluster.cluster_id
        assert (int(fields["LeaderId"]), int(fields["LeaderEpoch"])) == (leader, epoch)
        assert int(fields["HighWatermark"]) > 0
        assert sorted(int(i) for i in re.findall(r'"id": (\d+)', fields["CurrentVoters"])) == [1, 2, 3]
        replication, (leader, _) = _with_stable_leader(
            cluster, lambda: _quorum_tool(kafka_lib, f"127.0.0.1:{follower_port}", "--replication"))
        rows = [line.split() for line in replication.splitlines()[1:] if line.strip()]
        assert sorted(int(r[0]) for r in rows) == [1, 2, 3]
        assert [r[-1] for r in rows if int(r[0]) == leader] == ["Leader"]
        assert sorted(r[-1] for r in rows if int(r[0]) != leader) == ["Follower", "Follower"]


def test_kafka_metadata_quorum_with_bootstrap_controller(tmp_path, kafka_lib):
    with Cluster(tmp_path) as cluster:
        leader = wait_until(cluster.leader_id, 15, "a leader")
        follower_port = next(p for i, p in enumerate(cluster.controller_ports) if i + 1 != leader)
        status, (leader, epoch) = _with_stable_leader(
            cluster, lambda: _quorum_tool(kafka_lib, f"127.0.0.1:{follower_port}", "--status",
                                          flag="--bootstrap-controller"))
        fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.M))
        assert fields["ClusterId"] == cluster.cluster_id
        assert (int(fields["LeaderId"]), int(fields["LeaderEpoch"])) == (leader, epoch)
        assert sorted(int(i) for i in re.findall(r'"id": (\d+)', fields["CurrentVoters"])) == [1, 2, 3]
