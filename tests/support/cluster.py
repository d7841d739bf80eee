"""Test clusters: :class:`kcompat.testing.cluster.Cluster` (re-exported) and :class:`ProxiedCluster`,
whose node-to-node links pass through proxies a test can cut."""

from __future__ import annotations

from pathlib import Path

from kcompat.broker.cluster_id import new_cluster_id
from kcompat.testing.cluster import FAST, Cluster, ClusterNode, wait_until  # noqa: F401 - re-exported
from kcompat.testing.ports import free_ports
from tests.support.link_proxy import LinkMesh


def with_http_listeners(cluster: Cluster) -> list[int]:
    """Give every node of ``cluster`` (not started yet) an HTTP listener on a free port of
    127.0.0.1; the ports, in node order."""
    ports = free_ports(len(cluster.nodes))
    for node, port in zip(cluster.nodes, ports):
        node.overrides["http.listeners"] = f"HTTP://127.0.0.1:{port}"
    return ports


class ProxiedCluster(Cluster):
    """A :class:`Cluster` whose node-to-node connections all pass through :class:`LinkProxy`s the
    test switches (``cluster.mesh``): "cut node 3 off" is ``cluster.mesh.isolate(3)``.

    Clients use each node's PLAINTEXT listener directly (``client_ports``, ``bootstrap``). Between
    nodes there is one proxy per directed pair (src, dst) and kind:

    - ``controller``: node src's view of ``controller.quorum.voters`` names, for each other voter
      dst, the proxy ``(src, dst, "controller")`` in front of dst's CONTROLLER listener (voters'
      addresses are per-node configuration). Raft traffic, broker registration and heartbeats,
      forwarded admin requests and AlterPartition all go there.
    - ``replication``: every node dst has one inter-broker listener per source node,
      ``REPLICATION_<src>``, advertised as the proxy ``(src, dst, "replication")``; node src sets
      ``inter.broker.listener.name=REPLICATION_<src>``, so its followers reach leader dst through
      that proxy. (Brokers look the leader's endpoint up by their *own* inter-broker listener name,
      so each source node gets a path of its own without binding source addresses.)

    Proxies start with the cluster object (bound to free ports) and stay up across node restarts;
    :meth:`close` (or ``with``) stops nodes and proxies.
    """

    KINDS = ("controller", "replication")

    def __init__(self, root: Path, n: int = 3, overrides: dict[str, str] | None = None) -> None:
        ids = range(1, n + 1)
        # bind the proxies first: free ports picked afterwards cannot be theirs
        self.mesh = LinkMesh()
        for s in ids:
            for d in ids:
                if s != d:
                    self.mesh.add(s, d, "controller", None)
                    self.mesh.add(s, d, "replication", None)
        self.mesh.start()
        ports = free_ports(2 * n + n * n)
        self.client_ports, self.controller_ports = ports[:n], ports[n:2 * n]
        # replication_ports[dst][src]: node dst's REPLICATION_<src> listener
        self.replication_ports = [ports[2 * n + d * n:2 * n + (d + 1) * n] for d in range(n)]
        for (s, d, kind), proxy in self.mesh.links.items():
            port = self.controller_ports[d - 1] if kind == "controller" else self.replication_ports[d - 1][s - 1]
            proxy.upstream = f"127.0.0.1:{port}"
        self.roles = ["broker,controller"] * n
        self.cluster_id = new_cluster_id()

        def via(s: int, d: int, kind: str) -> int:
            return self.mesh.links[(s, d, kind)].port

        names = [f"REPLICATION_{s}" for s in ids]
        protocol_map = ",".join(f"{name}:PLAINTEXT" for name in ["PLAINTEXT", "CONTROLLER", *names])
        self.nodes = []
        for i in ids:
            voters = ",".join(f"{d}@127.0.0.1:{self.controller_ports[d - 1] if d == i else via(i, d, 'controller')}"
                              for d in ids)
            listeners = [f"PLAINTEXT://127.0.0.1:{self.client_ports[i - 1]}",  # first: the one BrokerProcess reads
                         f"CONTROLLER://127.0.0.1:{self.controller_ports[i - 1]}"]
            listeners += [f"REPLICATION_{s}://127.0.0.1:{self.replication_ports[i - 1][s - 1]}" for s in ids]
            advertised = [f"PLAINTEXT://127.0.0.1:{self.client_ports[i - 1]}"]
            advertised += [f"REPLICATION_{s}://127.0.0.1:"
                           f"{self.replication_ports[i - 1][s - 1] if s == i else via(s, i, 'replication')}"
                           for s in ids]
            o = {"node.id": str(i), "process.roles": self.roles[i - 1], "listeners": ",".join(listeners),
                 "advertised.listeners": ",".join(advertised), "listener.security.protocol.map": protocol_map,
                 "inter.broker.listener.name": f"REPLICATION_{i}",
                 "controller.listener.names": "CONTROLLER", "controller.quorum.voters": voters,
                 "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3", **FAST}
            o.update(overrides or {})
            self.nodes.append(ClusterNode(root / f"node{i}", o, self.cluster_id, self.client_ports[i - 1]))

    def node_ids(self) -> list[int]:
        return list(range(1, len(self.nodes) + 1))

    def stop(self) -> None:
        self.mesh.heal()  # controlled shutdown needs the controller
        super().stop()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.mesh.stop()

    def __exit__(self, *exc):
        self.close()
