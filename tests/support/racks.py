"""Clusters whose brokers have racks (``broker.rack``), and the bytes each broker served to
consumers, for the rack tests and ``bench/follower_fetch.py`` (KIP-36 placement, KIP-392 reads)."""

from __future__ import annotations

import re
from pathlib import Path

from kcompat.isr.replica_selector import RACK_AWARE_SELECTOR
from kcompat.testing.cluster import Cluster

SERVED = re.compile(r"consumer bytes served \(leader/follower\): (.*)")


def rack_of(node_id: int, racks: int = 3) -> str:
    """Nodes 1..n round-robin over ``racks`` racks: rack-a, rack-b, rack-c, rack-a, ..."""
    return f"rack-{'abcdefghij'[(node_id - 1) % racks]}"


def rack_cluster(root: Path, selector: bool, n: int = 3, racks: int = 3, overrides: dict | None = None,
                 roles: list[str] | None = None, no_rack: tuple[int, ...] = ()) -> Cluster:
    """``n`` nodes on ``racks`` racks (:func:`rack_of`), RF 3 and ``min.insync.replicas=2`` by
    default, ``replica.selector.class`` set to Kafka's RackAwareReplicaSelector if ``selector``;
    the node ids in ``no_rack`` get no ``broker.rack`` (a mixed configuration)."""
    o = {"default.replication.factor": "3", "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
         "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2"}
    if selector:
        o["replica.selector.class"] = RACK_AWARE_SELECTOR
    o.update(overrides or {})
    c = Cluster(root, n, o, roles=roles)
    for node_id, node in enumerate(c.nodes, start=1):
        if node_id not in no_rack:
            node.overrides["broker.rack"] = rack_of(node_id, racks)
    return c


def served(cluster: Cluster, topic: str) -> dict[int, tuple[int, int]]:
    """Node id -> (bytes of ``topic``'s records served to consumers as leader, as follower),
    summed over its partitions, from each node's shutdown log line: stops the cluster first."""
    cluster.stop()
    out = {}
    for node_id, node in enumerate(cluster.nodes, start=1):
        lead = follow = 0
        for m in SERVED.finditer(node.log_text()):
            for item in m.group(1).split():
                name, _, counts = item.rpartition("=")
                if name.rpartition("-")[0] == topic:
                    a, b = counts.split("/")
                    lead, follow = lead + int(a), follow + int(b)
        out[node_id] = (lead, follow)
    return out
