"""A kcompat cluster of real processes on 127.0.0.1: every node a broker and a controller voter
(``process.roles=broker,controller``), each with a PLAINTEXT listener for clients and a
CONTROLLER listener for the Raft quorum and forwarded requests, all formatted with one cluster id.

Nodes keep their ports across restarts, so a test can ``kill`` (SIGKILL), ``pause`` (SIGSTOP),
``resume`` and ``restart`` a node and its clients reconnect to it as to a Kafka broker that came back.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from kcompat.broker.cluster_id import new_cluster_id
from kcompat.protocol.messages.describe_quorum import DescribeQuorumRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire
from kcompat.testing.ports import free_ports
from kcompat.testing.process import BrokerProcess, wait_for

# fast failure detection for tests (Kafka's defaults: 9000 / 2000 / 1000 / 2000)
FAST = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "300",
        "controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000"}


class ClusterNode(BrokerProcess):
    """One node; ``--cluster-id`` formats its new log directory for the cluster. A controller-only
    node counts as started once its controller listener is open."""

    def __init__(self, data_dir: Path, overrides: dict[str, str], cluster_id: str, port: int) -> None:
        super().__init__(data_dir, overrides, port=port)
        self.cluster_id = cluster_id
        if "broker" not in overrides.get("process.roles", "broker"):
            self.LISTENER_RE = re.compile(r"started controller listener \S+ on (\S+):(\d+)")

    def args(self) -> list[str]:
        """The command line of :class:`BrokerProcess` with the cluster id."""
        return super().args() + [f"--cluster-id={self.cluster_id}"]


class Cluster:
    """``n`` voters; ``nodes[i]`` has node id ``i + 1``."""

    def __init__(self, root: Path, n: int = 3, overrides: dict[str, str] | None = None,
                 roles: list[str] | None = None) -> None:
        """``roles[i]``: process.roles of node i + 1 (default broker,controller for all); nodes
        with the controller role are the voters; a controller-only node has no client listener."""
        ports = free_ports(2 * n)
        self.client_ports, self.controller_ports = ports[:n], ports[n:]
        self.roles = roles or ["broker,controller"] * n
        voters = ",".join(f"{i + 1}@127.0.0.1:{self.controller_ports[i]}" for i in range(n)
                          if "controller" in self.roles[i])
        self.cluster_id = new_cluster_id()
        self.nodes: list[ClusterNode] = []
        for i in range(n):
            listeners = []
            if "broker" in self.roles[i]:
                listeners.append(f"PLAINTEXT://127.0.0.1:{self.client_ports[i]}")
            if "controller" in self.roles[i]:
                listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_ports[i]}")
            o = {"node.id": str(i + 1), "process.roles": self.roles[i], "listeners": ",".join(listeners),
                 "controller.listener.names": "CONTROLLER", "controller.quorum.voters": voters,
                 "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3", **FAST}
            o.update(overrides or {})
            self.nodes.append(ClusterNode(root / f"node{i + 1}", o, self.cluster_id, self.client_ports[i]))

    def start(self, nodes=None, timeout: float = 120.0) -> "Cluster":
        """Start nodes in parallel (a quorum needs a majority up before any node serves)."""
        errors = []

        def run(node):
            try:
                node.start(timeout)
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=run, args=(n,)) for n in (nodes or self.nodes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        if all("broker" in r for r in self.roles):
            self.wait_for_brokers(timeout)
        return self

    def broker_ids(self, node_id: int) -> list[int]:
        """The brokers node ``node_id`` lists in Metadata."""
        resp = wire.call(f"127.0.0.1:{self.client_ports[node_id - 1]}",
                         MetadataRequest(topics=[], allow_auto_topic_creation=False), 9)
        return sorted(b.node_id for b in resp.brokers)

    def wait_for_brokers(self, timeout: float = 10.0) -> None:
        """Until every running node lists every running node (followers learn commits a moment
        after the controller, as in Kafka; a node resumed after its session expired registers
        again). ``timeout`` bounds a hang only."""
        live = [i + 1 for i, n in enumerate(self.nodes) if n.proc is not None]
        wait_until(lambda: all(self.broker_ids(i) == live for i in live), timeout, "all brokers in Metadata")

    @property
    def bootstrap(self) -> str:
        """Client addresses of the running nodes, comma-separated."""
        return ",".join(f"127.0.0.1:{p}" for p, n in zip(self.client_ports, self.nodes) if n.proc is not None)

    def node(self, node_id: int) -> ClusterNode:
        """The node with id ``node_id`` (``nodes[node_id - 1]``)."""
        return self.nodes[node_id - 1]

    def quorum(self, via: int | None = None):
        """DescribeQuorum partition data (leader id, epoch, high watermark, voters) from a live node,
        or None if no node answers with a leader."""
        candidates = [via] if via else [i + 1 for i, n in enumerate(self.nodes) if n.proc is not None]
        for node_id in candidates:
            try:
                resp = wire.call(f"127.0.0.1:{self.client_ports[node_id - 1]}", DescribeQuorumRequest(
                    topics=[DescribeQuorumRequest.TopicData(topic_name="__cluster_metadata", partitions=[
                        DescribeQuorumRequest.PartitionData(partition_index=0)])]), 1)
            except OSError:
                continue
            if resp.error_code == 0 and resp.topics and resp.topics[0].partitions[0].error_code == 0:
                return resp.topics[0].partitions[0]
        return None

    def leader_id(self) -> int | None:
        """Node id of the metadata quorum's leader (the active controller), None without one."""
        q = self.quorum()
        return q.leader_id if q is not None and q.leader_id >= 0 else None

    def kill(self, node_id: int) -> None:
        """SIGKILL node ``node_id`` (and its worker processes), as a crash of its machine would."""
        self.node(node_id).kill9()
        self._paused.discard(node_id)

    kill9 = kill

    def restart(self, node_id: int, timeout: float = 120.0) -> None:
        """Restart node ``node_id`` over its data and port: a running node (resumed first if
        paused) is stopped cleanly with SIGTERM (a controlled shutdown moves its leaderships
        away), a stopped or killed one is only started."""
        node = self.node(node_id)
        if node.proc is not None:
            if node_id in self._paused:
                self.resume(node_id)
            node.stop()
        self.start([node], timeout)

    def pause(self, node_id: int) -> None:
        """SIGSTOP the node (and its worker processes)."""
        self.node(node_id).pause()
        self._paused.add(node_id)

    def resume(self, node_id: int) -> None:
        """SIGCONT a paused node."""
        self.node(node_id).resume()
        self._paused.discard(node_id)

    @property
    def _paused(self) -> set[int]:
        if not hasattr(self, "_paused_set"):
            self._paused_set: set[int] = set()
        return self._paused_set

    def stop(self) -> None:
        """Stop every running node with SIGTERM (a paused one is resumed first to see it);
        broker-only nodes before the controllers, as Kafka's operations guide orders it: a broker's
        controlled shutdown needs the quorum, and without it waits out its grace period."""
        for node_id in list(self._paused):
            try:
                self.resume(node_id)
            except (RuntimeError, ProcessLookupError):
                self._paused.discard(node_id)
        for n in sorted(self.nodes, key=lambda n: "controller" in n.overrides.get("process.roles", "")):
            if n.proc is not None:
                try:
                    n.stop()
                except Exception:
                    n.kill9()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    """:func:`kcompat.testing.process.wait_for` with the argument order the cluster tests use."""
    return wait_for(predicate, timeout, interval, what)
