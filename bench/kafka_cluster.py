"""A 3-node Apache Kafka KRaft cluster on 127.0.0.1 for side-by-side benchmarks (every node a broker
and a controller voter), the counterpart of ``tests.support.cluster.Cluster``.

The jars come from the conformance suite's Maven cache (:func:`conformance.maven.resolve_kafka`:
``~/.cache/kcompat-conformance/kafka-<version>/lib``, resolved once with Maven if missing); each node
is a :class:`conformance.reference.ReferenceKafka` (storage formatted with ``StorageTool format`` and
one shared cluster id, ``kafka.Kafka`` started in a process group of its own) with the properties of
a cluster node instead of a single node's. JVM flags: ``-Xmx<heap> -Xms<heap>`` and the GC settings
of Kafka's ``bin/kafka-run-class.sh`` (G1, ``MaxGCPauseMillis=20``, ...).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from conformance import maven, procs
from conformance.reference import ReferenceKafka
from kcompat.broker.cluster_id import new_cluster_id

# KAFKA_JVM_PERFORMANCE_OPTS of Kafka's bin/kafka-run-class.sh
KAFKA_JVM_OPTS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                  "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")


class KafkaClusterNode(ReferenceKafka):
    """Node ``node_id`` of a :class:`KafkaCluster`; ``voters`` is ``controller.quorum.voters``."""

    def __init__(self, lib: Path, version: str, workdir: Path, node_id: int, cluster_id: str,
                 overrides: dict[str, str], heap: str) -> None:
        super().__init__(lib, version, workdir, heap=heap, cluster_id=cluster_id,
                         jvm_opts=(f"-Xms{heap}", *KAFKA_JVM_OPTS))
        self.node_id = node_id
        self.label = f"Kafka {version} node {node_id}"
        self.overrides = dict(overrides)
        self.voters = ""

    def server_properties(self) -> dict[str, str]:
        """The reference node's properties as a voter of this cluster: its own id, the cluster's
        voters, the internal topics at Kafka's default replication, and ``overrides``."""
        props = super().server_properties()
        for single_node_only in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                                 "transaction.state.log.min.isr"):
            del props[single_node_only]
        props.update({"node.id": str(self.node_id), "controller.quorum.voters": self.voters, **self.overrides})
        return props


class KafkaCluster:
    """``n`` Kafka nodes (ids 1..n) under ``root``; ``overrides`` are server properties of every
    node (e.g. ``min.insync.replicas``). ``start()`` formats and starts them in parallel (a quorum
    needs a majority before any node serves) and returns once each answers Metadata with brokers
    and every node is listed (registered and unfenced, as ``kcompat.testing.cluster.Cluster``
    waits for its brokers): a node's port opens before its registration is done;
    ``stop()`` sends SIGTERM (controlled shutdown) and waits."""

    def __init__(self, root: Path, version: str = "3.9.2", n: int = 3, overrides: dict[str, str] | None = None,
                 heap: str = "768m") -> None:
        lib = maven.resolve_kafka(version)
        cluster_id = new_cluster_id()
        self.nodes = [KafkaClusterNode(lib, version, Path(root) / f"kafka{i + 1}", i + 1, cluster_id,
                                       overrides or {}, heap) for i in range(n)]
        voters = ",".join(f"{node.node_id}@{node.host}:{node.controller_port}" for node in self.nodes)
        for node in self.nodes:
            node.voters = voters

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def pids(self) -> list[int]:
        """The JVM of each node (its process group leader), in node order."""
        return [node.proc.pid for node in self.nodes if node.proc is not None]

    def start(self) -> "KafkaCluster":
        errors: list[Exception] = []

        def run(node: KafkaClusterNode) -> None:
            try:
                node.start()
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=run, args=(node,)) for node in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.stop()
            raise errors[0]
        try:
            self._wait_for_brokers()
        except Exception:
            self.stop()
            raise
        return self

    def _wait_for_brokers(self, timeout: float = 60.0) -> None:
        """Until Metadata lists every node as a broker (RuntimeError after ``timeout`` seconds)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        want = {node.node_id for node in self.nodes}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if set(admin.list_topics(timeout=10).brokers) == want:
                return
            time.sleep(0.1)
        raise RuntimeError(f"Kafka cluster: not every node registered as a broker within {timeout:.0f} s")

    def stop(self) -> None:
        """SIGTERM every node at once (one at a time, the last ones would wait for a quorum that
        is gone); SIGKILL a node that has not exited within 60 s."""
        def run(node: KafkaClusterNode) -> None:
            try:
                node.stop()
            except Exception:
                node.kill()
        threads = [threading.Thread(target=run, args=(node,)) for node in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(procs.tail(node.log_tail(lines), lines) for node in self.nodes)
