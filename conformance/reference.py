"""The reference broker: Apache Kafka in KRaft single-node mode, started by the suite (no Docker).

The jars come from :mod:`conformance.maven`. Start-up: write ``server.properties`` (broker and
controller in one process on ``host`` with two free ports, ``log.dirs`` in the work directory), format
the storage with ``kafka.tools.StorageTool format`` and a fresh cluster id, then run ``kafka.Kafka``.
Restarts (``clean``: SIGTERM; ``kill``: SIGKILL) keep the ports and the data.

Settings beyond Kafka's defaults are only those a single-node cluster needs (replication factor 1
for the internal topics) and ``group.initial.rebalance.delay.ms=0``, the value Kafka's own sample
``server.properties`` uses for development.
"""

from __future__ import annotations

from pathlib import Path

from conformance import procs
from conformance.targets import ProcessTarget

LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.controller=INFO
log4j.logger.state.change.logger=WARN
"""


def java_command(lib: Path, main: str, args: list[str], *, heap: str = "512m", log4j: Path | None = None,
                 quick: bool = True, jvm_opts: tuple[str, ...] = ()) -> list[str]:
    """``java -cp <lib>/* main args``; ``quick`` picks JVM flags that start fast for short-lived tools;
    ``jvm_opts`` are further JVM flags (e.g. the GC settings of Kafka's ``kafka-run-class.sh``)."""
    cmd = ["java", f"-Xmx{heap}", *jvm_opts]
    if quick:
        cmd += ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
    if log4j is not None:
        cmd.append(f"-Dlog4j.configuration=file:{log4j}")
    return cmd + ["-cp", f"{lib}/*", main] + list(args)


class ReferenceKafka(ProcessTarget):
    """Apache Kafka ``version`` (KRaft, broker+controller) on ``host``.

    ``cluster_id``: format the storage with this cluster id (nodes of one cluster share it) instead
    of a fresh one from ``StorageTool random-uuid``. ``jvm_opts``: extra JVM flags for the broker.
    Subclasses may override :meth:`properties` (e.g. a node of a multi-node cluster)."""

    kind = "reference"

    def __init__(self, lib: Path, version: str, workdir: Path, *, host: str = "127.0.0.1",
                 heap: str = "1g", start_timeout: float = 120.0, cluster_id: str | None = None,
                 jvm_opts: tuple[str, ...] = ()) -> None:
        self.cluster_id = cluster_id
        self.jvm_opts = tuple(jvm_opts)
        self.lib = Path(lib)
        self.version = version
        self.label = f"Kafka {version}"
        self.workdir = Path(workdir)
        self.host = host
        self.heap = heap
        self.start_timeout = start_timeout
        self.port = procs.free_port(host)
        self.controller_port = procs.free_port(host)
        self.bootstrap = f"{host}:{self.port}"
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "server.log"
        self.stdout_path = self.workdir / "stdout.log"
        self._formatted = False

    def server_properties(self) -> dict[str, str]:
        """``server.properties`` of this single KRaft node (broker and controller), as a dict."""
        h = self.host
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{h}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{h}:{self.port},CONTROLLER://{h}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{h}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }

    def properties(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.server_properties().items())

    def _java(self, main: str, args: list[str], heap: str = "512m", quick: bool = True,
              jvm_opts: tuple[str, ...] = ()) -> list[str]:
        return java_command(self.lib, main, args, heap=heap, log4j=self.workdir / "log4j.properties", quick=quick,
                            jvm_opts=jvm_opts)

    def _format(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "server.properties").write_text(self.properties())
        (self.workdir / "log4j.properties").write_text(LOG4J.format(log=self.log_path))
        cluster_id = self.cluster_id
        if cluster_id is None:
            uuid = procs.run(self._java("kafka.tools.StorageTool", ["random-uuid"]), timeout=60)
            if not uuid.ok:
                raise RuntimeError(f"StorageTool random-uuid failed: {uuid.summary()}")
            cluster_id = uuid.stdout.strip().splitlines()[-1]
        fmt = procs.run(self._java("kafka.tools.StorageTool", ["format", "-t", cluster_id, "-c",
                                                                str(self.workdir / "server.properties")]), timeout=120)
        if not fmt.ok:
            raise RuntimeError(f"StorageTool format failed: {fmt.summary()}")
        self._formatted = True

    def launch(self) -> tuple[list[str], Path, dict]:
        if not self._formatted:
            self._format()
        cmd = self._java("kafka.Kafka", [str(self.workdir / "server.properties")], heap=self.heap, quick=False,
                         jvm_opts=self.jvm_opts)
        return cmd, self.stdout_path, {}

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": self.version, "mode": "KRaft single node (broker+controller)",
                  "workdir": str(self.workdir), "log": str(self.log_path)})
        return d

    def log_tail(self, lines: int = 40) -> str:
        text = ""
        for p in (self.stdout_path, self.log_path):
            try:
                text += p.read_text(errors="replace")
            except OSError:
                pass
        return procs.tail(text, lines)
