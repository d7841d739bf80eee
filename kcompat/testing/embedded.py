"""A kcompat broker or cluster for a test suite or a script: ``with Broker() as b:`` / ``with Cluster(n=3) as c:``.

Both start real kcompat nodes on 127.0.0.1 ports of their own (below the ephemeral range, a slice per
process: :mod:`kcompat.testing.ports`), data in a temporary directory removed when they stop. A
:class:`Broker` and each node of a :class:`Cluster` run in a child process by default (a crash or
``os._exit`` of the calling code cannot leave their data half written) or, with
``in_process=True``, on event loop threads of the calling process (no interpreter start; faults like
``kill``/``pause`` need child processes).

Configuration uses Kafka's broker property names: a mapping (``Broker({"num.partitions": 3})``) or
keyword arguments with ``_`` for ``.`` (``Broker(num_partitions=3)``); values are converted with
``str`` (booleans as ``true``/``false``). An unknown name or a bad value fails the start with the
broker's own message, as ``kcompat serve`` does.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from kcompat.testing import admin
from kcompat.testing import cluster as process_cluster
from kcompat.testing.ports import free_ports
from kcompat.testing.process import BrokerProcess

START_TIMEOUT_S = 120.0   # bounds a hung start only: a loaded machine can take many seconds


def broker_properties(config: Mapping[str, object] | None, keywords: Mapping[str, object]) -> dict[str, str]:
    """Broker properties from a mapping of Kafka names and keyword arguments whose ``_`` stand for
    ``.``; values as strings (``True`` -> ``"true"``)."""
    props: dict[str, str] = {}
    for key, value in [*(config or {}).items(), *((k.replace("_", "."), v) for k, v in keywords.items())]:
        props[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return props


class _Admin:
    """Topic and group helpers shared by :class:`Broker` and :class:`Cluster` (over
    :mod:`kcompat.testing.admin`, against ``bootstrap_servers``)."""

    bootstrap_servers: str

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     config: Mapping[str, object] | None = None) -> str:
        """Create topic ``name`` and wait until every broker knows its leaders; returns ``name``.
        Raises :class:`kcompat.testing.admin.AdminError` (e.g. TOPIC_ALREADY_EXISTS)."""
        admin.create_topic(self.bootstrap_servers, name, partitions, replication_factor,
                           broker_properties(config, {}))
        return name

    def delete_topics(self, *names: str) -> None:
        """Delete topics (one already gone is not an error). Raises
        :class:`kcompat.testing.admin.AdminError`."""
        admin.delete_topics(self.bootstrap_servers, list(names))

    def list_topics(self) -> list[str]:
        """Non-internal topic names."""
        return admin.list_topics(self.bootstrap_servers)

    def reset(self) -> dict[str, int]:
        """Delete every group and non-internal topic; returns the groups that could not be deleted
        with their error codes (NON_EMPTY_GROUP while consumers are still in them)."""
        return admin.reset(self.bootstrap_servers)


class Broker(_Admin):
    """A single kcompat node (broker and controller) on ``host``:``port`` (default: a free port).

    ``bootstrap_servers`` is ``"host:port"`` once started. ``data_dir`` keeps the data there (never
    removed); by default it lives in a temporary directory that :meth:`stop` removes. In a child
    process (the default) :meth:`restart`, :meth:`kill`, :meth:`pause` and :meth:`resume` act on
    the process (:meth:`heal` undoes them); they raise RuntimeError for an in-process broker.
    """

    def __init__(self, config: Mapping[str, object] | None = None, /, *, in_process: bool = False,
                 data_dir: str | Path | None = None, host: str = "127.0.0.1", port: int = 0,
                 **configs: object) -> None:
        self.properties = broker_properties(config, configs)
        self.in_process = in_process
        self.host = host
        self.port = port or free_ports(1, host)[0]
        self._owned_root = None if data_dir is not None else Path(tempfile.mkdtemp(prefix="kcompat-"))
        self.data_dir = Path(data_dir) if data_dir is not None else self._owned_root / "data"
        self._process: BrokerProcess | None = None
        self._thread: _BrokerThread | None = None
        self._paused = False

    @property
    def bootstrap_servers(self) -> str:
        """``"host:port"`` for clients."""
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> "Broker":
        """Start the broker and return once it serves clients. Raises RuntimeError with the
        broker's last log lines if it cannot start (a bad property, a port in use...)."""
        props = {"listeners": f"PLAINTEXT://{self.host}:{self.port}", "log.dirs": str(self.data_dir),
                 **self.properties}
        if self.in_process:
            thread = _BrokerThread(props)
            thread.start(timeout_s)
            self._thread = thread
        else:
            if self._process is None:
                log = (self._owned_root or self.data_dir.parent) / f"{self.data_dir.name}-broker.log"
                self._process = BrokerProcess(self.data_dir, props, host=self.host, port=self.port, log_path=log)
            self._process.start(timeout_s)
        return self

    def stop(self) -> None:
        """Shut the broker down cleanly (SIGTERM for a child process) and remove its data if it
        lives in the temporary directory of this object."""
        try:
            if self._thread is not None:
                self._thread.stop()
                self._thread = None
            if self._process is not None and self._process.proc is not None:
                try:
                    if self._paused:            # a stopped process would not see the SIGTERM
                        self.resume()
                    self._process.stop()
                except RuntimeError:
                    self._process.kill9()
        finally:
            if self._owned_root is not None:
                shutil.rmtree(self._owned_root, ignore_errors=True)

    def _child(self) -> BrokerProcess:
        if self.in_process or self._process is None:
            raise RuntimeError("restart, kill, pause and resume need a broker in a child process")
        return self._process

    def restart(self) -> None:
        """Stop (SIGTERM; resumed first if paused) and start again over the same data and port;
        a killed broker is only started."""
        child = self._child()
        if child.proc is not None:
            if self._paused:
                self.resume()
            child.stop()
        child.start()

    def kill(self) -> None:
        """SIGKILL the broker process; :meth:`start` (or :meth:`heal`) brings it back over its data."""
        self._child().kill9()
        self._paused = False

    def pause(self) -> None:
        """SIGSTOP: the broker keeps its connections but answers nothing until :meth:`resume`."""
        self._child().pause()
        self._paused = True

    def resume(self) -> None:
        """SIGCONT a paused broker."""
        self._child().resume()
        self._paused = False

    def heal(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Undo :meth:`pause` and :meth:`kill`: resume a paused broker, start a killed one over its
        data. Nothing to do for a running or an in-process broker."""
        if self.in_process or self._process is None:
            return
        if self._paused:
            self.resume()
        if self._process.proc is None:
            self._process.start(timeout_s)

    def log_text(self) -> str:
        """What a child-process broker logged (empty for an in-process one, which logs through the
        calling process's ``logging``)."""
        return self._process.log_text() if self._process is not None else ""

    def __enter__(self) -> "Broker":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


class _BrokerThread:
    """A kcompat broker on an event loop of its own, in a daemon thread of this process;
    ``cluster_id`` formats a new log directory for a cluster, as ``kcompat serve --cluster-id``."""

    def __init__(self, props: dict[str, str], cluster_id: str | None = None) -> None:
        self.props = props
        self.cluster_id = cluster_id
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker = None
        self.error: BaseException | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kcompat-broker", daemon=True)

    def start(self, timeout_s: float) -> None:
        """Start the thread and return once the broker serves; RuntimeError if it cannot."""
        from kcompat.config import BrokerConfig, ConfigError

        try:
            config = BrokerConfig.load(None, [f"{k}={v}" for k, v in self.props.items()])
        except ConfigError as e:
            raise RuntimeError(f"invalid configuration: {e}") from None
        self._config = config
        self._thread.start()
        if not self._started.wait(timeout_s):
            try:
                self.stop(10)
            except Exception:
                pass
            raise RuntimeError(f"in-process broker did not start within {timeout_s:.0f} s")
        if self.error is not None:
            self._thread.join(10)
            raise RuntimeError(f"broker did not start: {self.error}") from self.error

    def _run(self) -> None:
        try:
            import uvloop
            factory = uvloop.new_event_loop
        except ImportError:   # pragma: no cover - uvloop is a dependency
            factory = None
        # the Runner, as asyncio.run: tasks left are cancelled, async generators and the default
        # executor's threads shut down, the loop closed
        with asyncio.Runner(loop_factory=factory) as runner:
            self.loop = runner.get_loop()
            runner.run(self._serve())

    async def _serve(self) -> None:
        from kcompat.broker.broker import Broker as KcompatBroker

        self.broker = KcompatBroker(self._config, cluster_id=self.cluster_id)
        try:
            await self.broker.start()
        except BaseException as e:   # reported by start() in the calling thread
            self.error = e
            try:   # close what the failed start opened (listeners, logs); best effort
                await self.broker.stop()
            except Exception:
                pass
            self._started.set()
            return
        self._started.set()
        await self.broker.stopped.wait()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Shut the broker down cleanly and wait for its thread to end."""
        if self.loop is not None and self._thread.is_alive() and self.broker is not None:
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(timeout_s)
        if self._thread.ident is not None:
            self._thread.join(timeout_s)


class Cluster(process_cluster.Cluster, _Admin):
    """``n`` kcompat nodes, each a broker and a controller voter, in child processes (with
    ``in_process=True``: each on an event loop thread of this process).

    Defaults for a replicated cluster (any of them can be overridden): RF ``min(3, n)`` for new
    topics and the internal topics, ``min.insync.replicas`` ``min(2, RF)``, and fast failure
    detection (:data:`kcompat.testing.cluster.FAST`). Node ids are 1..n; :meth:`kill`,
    :meth:`pause`, :meth:`resume`, :meth:`restart` take a node id, :meth:`heal` undoes them all
    (in-process nodes can only be restarted: the others raise RuntimeError).
    Data lives in ``root`` (kept) or a temporary directory removed by :meth:`stop`.
    """

    def __init__(self, n: int = 3, config: Mapping[str, object] | None = None, *,
                 root: str | Path | None = None, in_process: bool = False, **configs: object) -> None:
        rf = min(3, n)
        isr = min(2, rf)
        defaults = {"default.replication.factor": rf, "min.insync.replicas": isr,
                    "offsets.topic.replication.factor": rf, "transaction.state.log.replication.factor": rf,
                    "transaction.state.log.min.isr": isr}
        self._owned_root = None if root is not None else Path(tempfile.mkdtemp(prefix="kcompat-cluster-"))
        super().__init__(Path(root) if root is not None else self._owned_root, n,
                         broker_properties({**defaults, **(config or {})}, configs))
        self.in_process = in_process
        if in_process:
            self.nodes = [_ThreadNode(node) for node in self.nodes]

    @property
    def bootstrap_servers(self) -> str:
        """Every node's client address (also those of stopped nodes: clients skip them)."""
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """Node id of the partition's leader (-1 while it has none)."""
        for t in admin.metadata(self.bootstrap, [topic]).topics:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p.leader_id
        return -1

    def heal(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Resume paused nodes, start stopped or killed ones, and wait until every node lists every
        broker: the cluster is whole again."""
        for node_id in list(self._paused):
            self.resume(node_id)
        down = [n for n in self.nodes if n.proc is None]
        if down:
            self.start(down, timeout_s)
        else:
            self.wait_for_brokers(timeout_s)

    def start(self, nodes=None, timeout: float = START_TIMEOUT_S) -> "Cluster":
        """Start the nodes (default all) and wait until every node lists every broker. A full
        start also creates ``__consumer_offsets`` and ``__transaction_state`` while every broker is
        up: Kafka creates them on first use with their full replication factor, which a test that
        kills a node before its first consumer group would otherwise find impossible."""
        try:
            super().start(nodes, timeout)
            if nodes is None:
                for key_type in (0, 1):
                    admin.wait_for_coordinator(self.bootstrap_servers, key_type, timeout)
            return self
        except BaseException:
            if nodes is None:
                self.stop()
            raise

    def stop(self) -> None:
        """Stop every node cleanly and remove the data if it lives in this object's temporary
        directory."""
        try:
            super().stop()
        finally:
            if self._owned_root is not None:
                shutil.rmtree(self._owned_root, ignore_errors=True)


class _ThreadNode:
    """A cluster node on an event loop thread of this process, in place of the child process of a
    :class:`kcompat.testing.cluster.ClusterNode` (same data directory, properties, cluster id and
    ports): what :class:`kcompat.testing.cluster.Cluster` calls of a node. ``proc`` is the running
    broker thread, None while stopped."""

    def __init__(self, node) -> None:
        self.data_dir, self.overrides, self.cluster_id = node.data_dir, node.overrides, node.cluster_id
        self.host, self.port = node.host, node.port
        self.proc: _BrokerThread | None = None

    @property
    def bootstrap(self) -> str | None:
        """``host:port`` while running."""
        return f"{self.host}:{self.port}" if self.proc is not None else None

    def start(self, timeout: float = START_TIMEOUT_S) -> "_ThreadNode":
        """Start the node's broker thread over its data; RuntimeError if it cannot start."""
        thread = _BrokerThread({"log.dirs": str(self.data_dir), **self.overrides}, self.cluster_id)
        thread.start(timeout)
        self.proc = thread
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """Shut the broker down cleanly (a controlled shutdown first, as on SIGTERM)."""
        if self.proc is not None:
            self.proc.stop(timeout)
            self.proc = None
        return 0

    def _fault(self, *_args) -> None:
        raise RuntimeError("kill, pause and resume need the cluster's nodes in child processes "
                           "(Cluster(in_process=False))")

    kill9 = pause = resume = signal = _fault

    def log_text(self) -> str:
        """Empty: an in-process node logs through this process's ``logging``."""
        return ""
