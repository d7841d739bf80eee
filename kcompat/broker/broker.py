"""The broker process: wires configuration, metadata, logs, partitions and listeners together.

Start-up order (as Kafka's ``BrokerServer``/``ControllerServer`` in combined mode):

1. read or create the cluster id (``meta.properties``), open and replay ``__cluster_metadata``
   into the metadata image (the single-node controller is a one-voter quorum: a record durable on
   local disk is committed);
2. load every partition log (recovering from the recovery point after an unclean shutdown);
3. host the partitions the image assigns to this node; logs of topics the image does not know are
   renamed ``-stray`` and kept, never deleted;
4. open the listeners and log ``started listener <host>:<port>`` for each.

:meth:`Broker.stop` (SIGTERM) stops accepting, answers in-flight requests (long-polling fetches
return at once), writes producer snapshots, flushes and closes every log and marks a clean shutdown.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import time
import uuid
from pathlib import Path

from kcompat.broker.connection import KafkaConnection
from kcompat.broker.group_runtime import OFFSETS_TOPIC, GroupRuntime
from kcompat.broker.txn_runtime import TRANSACTION_STATE_TOPIC, TxnRuntime
from kcompat.config import describe_topic, log_config_for, validate_topic_configs
from kcompat.isr.partition import AppendPolicy
from kcompat.isr.replica_manager import ReplicaManager
from kcompat.kraft.controller import Controller, NewTopic, TopicResult
from kcompat.kraft.image import (
    CONFIG_RECORD, PARTITION_CHANGE_RECORD, PARTITION_RECORD, REMOVE_TOPIC_RECORD, RESOURCE_BROKER,
    RESOURCE_TOPIC, MetadataImage, record_type_of,
)
from kcompat.kraft.metadata_log import METADATA_TOPIC, MetadataLog
from kcompat.log import LogCleaner, LogConfig, LogManager, read_meta_properties, remove_tree
from kcompat.protocol.errors import ErrorCode
from kcompat.txn.producer_id_manager import ProducerIdManager

log = logging.getLogger("kcompat.broker")

SHUTDOWN_GRACE_S = 10.0
PERIODIC_INTERVAL_S = 1.0


def new_cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` prints it (url-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def now_ms() -> int:
    return int(time.time() * 1000)


def _background_io(plans, removals) -> None:
    for plan in plans:
        plan.sync()
    for path in removals:
        remove_tree(path)


class Broker:
    """A combined broker + controller node. ``config`` is a :class:`kcompat.config.BrokerConfig`."""

    def __init__(self, config) -> None:
        self.config = config
        self.node_id: int = config.node_id
        self.connections: set[KafkaConnection] = set()
        self.fetch_waiters: set = set()
        self.shutting_down = False
        self.cluster_id = ""
        self.bound: dict[str, tuple[str, int]] = {}  # listener name -> bound (host, port)
        self._servers: list = []
        self._periodic_task = None
        self._last_producer_expiry = 0
        self.stopped = asyncio.Event()

    def now_ms(self) -> int:
        return now_ms()

    # -- start-up --------------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        t0 = time.monotonic()
        log_dirs = [Path(d) for d in cfg.log_dirs]
        for d in log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._find_cluster_id(log_dirs) or new_cluster_id()
        metadata_dir = Path(cfg.get("metadata.log.dir") or log_dirs[0])
        now = self.now_ms()

        self.image = MetadataImage()
        self.metadata_log = MetadataLog(metadata_dir, now)
        replayed = self.metadata_log.replay(self.image)
        self._apply_dynamic_broker_configs()

        self.log_manager = LogManager(log_dirs, self.log_config_for)
        self.log_manager.startup(now, self.cluster_id, self.node_id)
        self.replica_manager = ReplicaManager(self.log_manager, self.node_id, log_config_for=self.log_config_for,
                                              policy_for=self.policy_for, now_ms=self.now_ms)
        self.log_manager.high_watermark_of = self._high_watermark_of
        self.controller = Controller(
            self.image, self.metadata_log, node_id=self.node_id,
            defaults=lambda: (cfg.get("num.partitions"), cfg.get("default.replication.factor")),
            validate_topic_configs=validate_topic_configs,
            live_brokers=self.live_broker_ids,
            delete_topic_enable=lambda: cfg.get("delete.topic.enable"),
            publish=self._publish)
        self.controller.bootstrap(now)
        self._host_partitions()
        self.cleaner = None
        if cfg.get("log.cleaner.enable"):
            self.cleaner = LogCleaner(threads=cfg.get("log.cleaner.threads"),
                                      dedupe_buffer_size=cfg.get("log.cleaner.dedupe.buffer.size"),
                                      io_buffer_load_factor=cfg.get("log.cleaner.io.buffer.load.factor"),
                                      backoff_ms=cfg.get("log.cleaner.backoff.ms"))
            self.cleaner.prestart_workers()
        self.groups = GroupRuntime(self)
        self.txn = TxnRuntime(self)
        if cfg.get("transaction.partition.verification.enable"):
            self.replica_manager.txn_verifier = self.txn.verify
            for p in self.replica_manager.partitions.values():
                p.txn_verifier = self.txn.verify
        self.producer_id_manager = ProducerIdManager(
            lambda: self.controller.allocate_producer_ids(self.node_id, self.now_ms()))

        loop = asyncio.get_running_loop()
        for name, host, port in cfg.listeners:
            server = await loop.create_server(lambda n=name: KafkaConnection(self, n), host or None, port,
                                              reuse_address=True, backlog=1024)
            self._servers.append(server)
            sock = server.sockets[0]
            bhost, bport = sock.getsockname()[:2]
            self.bound[name] = (bhost, bport)
            log.info("started listener %s:%d", host or bhost, bport)
        self.groups.start()
        self.txn.start()
        self._periodic_task = asyncio.ensure_future(self._periodic())
        log.info("kcompat broker %d started: cluster id %s, %d partitions, %d metadata records replayed, "
                 "log dirs %s, in %.0f ms", self.node_id, self.cluster_id, len(self.replica_manager.partitions),
                 replayed, ",".join(str(d.resolve()) for d in log_dirs), (time.monotonic() - t0) * 1000)

    def _find_cluster_id(self, log_dirs: list[Path]) -> str | None:
        for d in log_dirs:
            props = read_meta_properties(d / "meta.properties")
            if props and props.get("cluster.id"):
                return props["cluster.id"]
        return None

    def _host_partitions(self) -> None:
        """Host every partition the image assigns to this node; set aside logs it does not know."""
        known = set()
        for t in self.image.topics.values():
            for pid, p in t.partitions.items():
                if self.node_id in p.replicas:
                    known.add((t.name, pid))
                    existing = self.log_manager.get(t.name, pid)
                    stored_id = self.log_manager.topic_id_of(t.name, pid) if existing is not None else None
                    if stored_id is not None and stored_id != t.topic_id:
                        log.warning("log %s-%d belongs to an older topic of that name (id %s, now %s); "
                                    "setting it aside as stray", t.name, pid, stored_id, t.topic_id)
                        self.log_manager.mark_stray(t.name, pid)
                    self.replica_manager.ensure_partition(t.name, pid, t.topic_id, p.leader_epoch)
        for key in list(self.log_manager.logs):
            if key not in known and key[0] != METADATA_TOPIC:
                log.warning("log %s-%d is not in the cluster metadata; renaming it -stray and keeping it", *key)
                self.log_manager.mark_stray(*key)

    # -- metadata publishing ---------------------------------------------------------------------

    def _publish(self, records: list) -> None:
        """React to committed metadata records (Kafka's BrokerMetadataPublisher)."""
        refresh_all = False
        for r in records:
            kind = record_type_of(r)
            if kind == PARTITION_RECORD:
                t = self.image.topics_by_id.get(r.topic_id)
                if t is not None and self.node_id in r.replicas:
                    self.replica_manager.ensure_partition(t.name, r.partition_id, t.topic_id, r.leader_epoch)
                    if r.leader == self.node_id:
                        if t.name == OFFSETS_TOPIC and hasattr(self, "groups"):
                            self.groups.on_partition_hosted(r.partition_id)
                        elif t.name == TRANSACTION_STATE_TOPIC and hasattr(self, "txn"):
                            self.txn.on_partition_hosted(r.partition_id)
            elif kind == PARTITION_CHANGE_RECORD:
                t = self.image.topics_by_id.get(r.topic_id)
                if t is not None:
                    p = self.replica_manager.get(t.name, r.partition_id)
                    if p is not None:
                        p.leader_epoch = t.partitions[r.partition_id].leader_epoch
            elif kind == REMOVE_TOPIC_RECORD:
                names = {p.topic for p in self.replica_manager.partitions.values() if p.topic_id == r.topic_id}
                for name in names:
                    removed = [(name, p.partition_id) for p in self.replica_manager.topic_partitions(name)]
                    n = self.replica_manager.remove_topic(name)
                    log.info("deleted topic %s (%d partitions)", name, n)
                    self.groups.on_partitions_deleted(removed)
            elif kind == CONFIG_RECORD:
                if r.resource_type == RESOURCE_TOPIC:
                    self.replica_manager.update_topic_config(r.resource_name)
                elif r.resource_type == RESOURCE_BROKER:
                    refresh_all = True
        if refresh_all:
            self._apply_dynamic_broker_configs()
            for topic in {p.topic for p in self.replica_manager.partitions.values()}:
                self.replica_manager.update_topic_config(topic)

    def _apply_dynamic_broker_configs(self) -> None:
        self.config.set_dynamic(cluster_default=self.image.broker_configs(""),
                                per_broker=self.image.broker_configs(str(self.node_id)))

    # -- topic configuration ---------------------------------------------------------------------

    def topic_values(self, topic: str) -> dict:
        """Effective typed topic config values of ``topic`` (overrides over broker defaults)."""
        return log_config_for(self.image.topic_configs(topic), self.config)

    def log_config_for(self, topic: str) -> LogConfig:
        v = self.topic_values(topic)
        return LogConfig(
            segment_bytes=v["segment.bytes"], segment_ms=v["segment.ms"], segment_jitter_ms=v["segment.jitter.ms"],
            segment_index_bytes=v["segment.index.bytes"], index_interval_bytes=v["index.interval.bytes"],
            retention_ms=v["retention.ms"], retention_bytes=v["retention.bytes"],
            flush_messages=v["flush.messages"], flush_ms=v["flush.ms"],
            file_delete_delay_ms=v["file.delete.delay.ms"],
            cleanup_policy=",".join(v["cleanup.policy"]),
            delete_retention_ms=v["delete.retention.ms"], min_compaction_lag_ms=v["min.compaction.lag.ms"],
            max_compaction_lag_ms=v["max.compaction.lag.ms"],
            min_cleanable_dirty_ratio=v["min.cleanable.dirty.ratio"])

    def policy_for(self, topic: str) -> AppendPolicy:
        v = self.topic_values(topic)
        return AppendPolicy(
            max_message_bytes=v["max.message.bytes"],
            log_append_time=v["message.timestamp.type"] == "LogAppendTime",
            timestamp_before_max_ms=v["message.timestamp.before.max.ms"],
            timestamp_after_max_ms=v["message.timestamp.after.max.ms"],
            compact="compact" in v["cleanup.policy"])

    def describe_topic_configs(self, overrides: dict, keys=None, include_synonyms=False,
                               include_documentation=False):
        return describe_topic(overrides, self.config, include_synonyms=include_synonyms, keys=keys,
                              include_documentation=include_documentation)

    def _high_watermark_of(self, topic: str, partition: int) -> int | None:
        p = self.replica_manager.get(topic, partition)
        return p.high_watermark if p is not None else None

    def _stable_offset_of(self, tp) -> int | None:
        p = self.replica_manager.get(*tp)
        return p.last_stable_offset if p is not None else None

    def _producer_last_offsets_of(self, tp) -> dict[int, int]:
        """Last offset written by each producer id (the cleaner keeps that batch, as Kafka)."""
        p = self.replica_manager.get(*tp)
        if p is None:
            return {}
        return {pid: e.batches[-1].last_offset for pid, e in p.producer_state.producers.items() if e.batches}

    def isr_size_and_min(self, topic: str, partition: int) -> tuple[int, int]:
        """(ISR size, effective min.insync.replicas) of a partition, for acks=-1."""
        t = self.image.topics.get(topic)
        isr = len(t.partitions[partition].isr) if t is not None and partition in t.partitions else 0
        return isr, self.topic_values(topic)["min.insync.replicas"]

    def auto_create_topic(self, name: str) -> TopicResult:
        """Create ``name`` with the broker defaults (auto.create.topics.enable)."""
        result = self.controller.create_topics([NewTopic(name)], validate_only=False, now_ms=self.now_ms())[0]
        if result.error == ErrorCode.NONE:
            log.info("auto-created topic %s with %d partition(s)", name, result.num_partitions)
        return result

    # -- endpoints -------------------------------------------------------------------------------

    def advertised_endpoint(self, listener_name: str) -> tuple[str, int]:
        """(host, port) clients should use for ``listener_name`` (advertised.listeners, with a
        bound port filled in for port 0 and the bound or local host for an empty host)."""
        adv = {n: (h, p) for n, h, p in self.config.advertised_listeners}
        bhost, bport = self.bound.get(listener_name, ("", 0))
        host, port = adv.get(listener_name, ("", 0))
        if port == 0:
            port = bport
        if not host:
            host = bhost if bhost not in ("0.0.0.0", "::", "") else socket.gethostname()
        return host, port

    def endpoint_of(self, node_id: int, listener_name: str) -> tuple[str, int] | None:
        """(host, port) of broker ``node_id`` on ``listener_name``; None if unknown."""
        for node, host, port, _rack in self.live_broker_endpoints(listener_name):
            if node == node_id:
                return host, port
        return None

    def live_broker_ids(self) -> list[int]:
        """Brokers that can host replicas (a single node: this one)."""
        return [self.node_id]

    def live_broker_endpoints(self, listener_name: str) -> list[tuple[int, str, int, str | None]]:
        host, port = self.advertised_endpoint(listener_name)
        return [(self.node_id, host, port, self.config.get("broker.rack"))]

    # -- periodic work ---------------------------------------------------------------------------

    async def _periodic(self) -> None:
        """Log maintenance off the request path: retention and checkpoints are quick bookkeeping
        on the loop; fsyncs and directory removals run on a worker thread (DESIGN.md section 5)."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        while not self.shutting_down:
            await asyncio.sleep(PERIODIC_INTERVAL_S)
            try:
                now = self.now_ms()
                plans = self.log_manager.flush_plans(now, flush_check_ms=cfg.get("log.flush.scheduler.interval.ms"))
                _deleted, removals = self.log_manager.maintain(
                    now, retention_check_interval_ms=cfg.get("log.retention.check.interval.ms"),
                    checkpoint_interval_ms=cfg.get("log.flush.offset.checkpoint.interval.ms"))
                for p in self.replica_manager.partitions.values():
                    if p.log.log_start_offset > 0:
                        p.log.delete_snapshots_before(p.log.log_start_offset)
                if now - self._last_producer_expiry >= cfg.get("producer.id.expiration.check.interval.ms"):
                    self._last_producer_expiry = now
                    expiration = cfg.get("producer.id.expiration.ms")
                    expired = sum(p.producer_state.remove_expired(now, expiration)
                                  for p in self.replica_manager.partitions.values())
                    if expired:
                        log.info("expired %d idle producer id(s) (producer.id.expiration.ms=%d)", expired, expiration)
                if self.cleaner is not None:
                    for outcome in self.cleaner.tick(self.log_manager.logs, now,
                                                     stable_offset_of=self._stable_offset_of,
                                                     producer_last_offsets_of=self._producer_last_offsets_of):
                        if outcome.error:
                            log.warning("cleaning %s-%d failed: %s", *outcome.tp, outcome.error)
                if plans or removals:
                    await loop.run_in_executor(None, _background_io, plans, removals)
                    for plan in plans:
                        if not plan.log.closed:
                            plan.log.complete_flush(plan)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic log maintenance failed")

    # -- shutdown --------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Graceful shutdown: in-flight requests are answered, then logs are flushed and closed."""
        if self.shutting_down:
            return
        self.shutting_down = True
        log.info("shutting down")
        for server in self._servers:
            server.close()
        for wake in list(self.fetch_waiters):
            wake()
        for conn in list(self.connections):
            conn.stop_reading()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while any(c.in_flight() for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        if self._periodic_task is not None:
            self._periodic_task.cancel()
        self.txn.stop()
        self.groups.stop()
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self.replica_manager.shutdown()
        self.log_manager.shutdown()
        self.metadata_log.close()
        log.info("shutdown complete")
        self.stopped.set()
