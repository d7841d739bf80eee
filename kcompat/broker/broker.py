"""The broker process: wires configuration, metadata, logs, partitions and listeners together.

Start-up order (as Kafka's ``BrokerServer``/``ControllerServer``; one code path for a single
node and for a cluster, DESIGN.md section 7):

1. read or create the cluster id (``meta.properties``; ``--cluster-id`` for a new cluster);
2. load every partition log (recovering from the recovery point after an unclean shutdown);
3. start this node's replica of the ``__cluster_metadata`` Raft quorum (a voter of
   ``controller.quorum.voters`` or an observer) and open the controller listeners; wait until the
   committed metadata is applied to the image (hosting the partitions it places here); the
   active controller finalizes ``metadata.version`` on a new cluster; logs of topics the image
   does not know are renamed ``-stray`` and kept, never deleted;
4. register with the active controller and heartbeat; once unfenced, open the broker listeners
   and log ``started listener <host>:<port>`` for each.

A single node is a one-voter quorum in the same process (committed = durable on its disk).
:meth:`Broker.stop` (SIGTERM) moves leadership to other brokers first (controlled shutdown),
stops accepting, answers in-flight requests (long-polling fetches return at once), writes
producer snapshots, flushes and closes every log and marks a clean shutdown.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from pathlib import Path

from kcompat.broker.api_services import ApiServices, MetadataCache
from kcompat.broker.broker_context import BrokerContext
from kcompat.broker.cleaner_driver import CleanerDriver
from kcompat.broker.cluster_id import new_cluster_id  # noqa: F401 - also imported from here
from kcompat.broker.connection import KafkaConnection
from kcompat.broker.listeners import ConnectionServices, KafkaListeners
from kcompat.broker.tls import controller_ssl, reload_listener_contexts
from kcompat.security.sasl_server import SaslListeners
from kcompat.security.sasl_client import controller_sasl
from kcompat.broker.http.listener import HttpListener, parse_http_listeners
from kcompat.broker.http.services import HttpServices
from kcompat.broker.request_stats import RequestStats
from kcompat.broker.controller_service import ControllerService
from kcompat.broker.lifecycle import BrokerLifecycle
from kcompat.broker.log_dir_runtime import LogDirRuntime
from kcompat.broker.log_maintenance import LogMaintenance, guarded, guarded_call
from kcompat.broker.isr_updates import IsrUpdates
from kcompat.broker.metadata_loader import MetadataLoader
from kcompat.broker.metadata_publisher import MetadataPublisher
from kcompat.broker.quorum import QuorumRuntime
from kcompat.broker.remote_log import RemoteLogManager
from kcompat.broker.remote_log_metadata import RemoteLogMetadataManager
from kcompat.broker.quota.client_quota import QuotaManagers
from kcompat.broker.quota.connections import ConnectionQuotas
from kcompat.broker.replica_fetcher import ReplicaFetcherManager
from kcompat.broker.group_runtime import GroupRuntime
from kcompat.broker.txn_runtime import TxnRuntime
from kcompat.broker.coordinator_runtime import CoordinatorServices
from kcompat.broker.share.service import ShareService
from kcompat.broker.share_persister import SharePersister
from kcompat.broker.share_state_runtime import ShareStateRuntime
from kcompat.broker.topic_configs import TopicConfigs
from kcompat.config import validate_topic_configs
from kcompat.config.topic import segment_size
from kcompat.isr.fetch_session import FetchSessions
from kcompat.isr.replica_manager import ReplicaManager
from kcompat.broker.quota.replication import ReplicationQuotas
from kcompat.kraft.cluster_control import ClusterControl
from kcompat.kraft.controller import Controller, NewTopic, TopicResult
from kcompat.kraft.image import MetadataImage
from kcompat.kraft.metadata_log import METADATA_TOPIC
from kcompat.tiered.backends import storage_from_config
from kcompat.log import LogCleaner, LogManager, read_meta_properties
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.security.authorizer import StandardAuthorizer
from kcompat.txn.producer_id_manager import ProducerIdManager

log = logging.getLogger("kcompat.broker")

SHUTDOWN_GRACE_S = 10.0
PERIODIC_INTERVAL_S = 1.0
FENCE_CHECK_INTERVAL_S = 0.2


def now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    """A combined broker + controller node. ``config`` is a :class:`kcompat.config.BrokerConfig`."""

    def __init__(self, config, *, cluster_id: str | None = None) -> None:
        self.config = config
        self.requested_cluster_id = cluster_id
        self._controller_active = False
        self._quorum_leader: int | None = None
        self._producer_id_blocks: list[tuple[int, int]] = []
        self._producer_id_fetch = None
        self.quorum = None
        self.lifecycle = None
        self.node_id: int = config.node_id
        self.connections: set[KafkaConnection] = set()
        # client quotas (KIP-13/55/124/599, following the image) and connection limits
        self.quotas = QuotaManagers(config.get)
        self.connection_quotas = ConnectionQuotas(config.get, config.controller_listener_names,
                                                  config.inter_broker_listener_name if "broker" in config.process_roles
                                                  else None)
        self.request_stats = RequestStats()   # per-API request metrics (kcompat.broker.http.metrics)
        self.http = HttpListener()            # http.listeners: /metrics, console, REST proxy
        # authorizer.class.name: a StandardAuthorizer over the metadata image's ACLs, or None
        self.authorizer = StandardAuthorizer.from_config(lambda: self.image.acls, config.get)
        self.shutting_down = False
        self.cluster_id = ""
        self.kafka_listeners = KafkaListeners()   # the Kafka listeners' sockets and bound addresses
        self._periodic_tasks: list[asyncio.Task] = []
        self.stopped = asyncio.Event()

    def now_ms(self) -> int:
        return now_ms()

    def broker_epoch(self) -> int:
        """This broker's epoch from its registration with the controller; -1 before it registers."""
        return self.lifecycle.broker_epoch if self.lifecycle is not None else -1

    # -- start-up --------------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        t0 = time.monotonic()
        log_dirs = [Path(d) for d in cfg.log_dirs]
        for d in log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._find_cluster_id(log_dirs) or self.requested_cluster_id or new_cluster_id()
        if self.requested_cluster_id and self.cluster_id != self.requested_cluster_id:
            raise RuntimeError(f"log directories belong to cluster {self.cluster_id}, not {self.requested_cluster_id}")
        metadata_dir = Path(cfg.get("metadata.log.dir") or log_dirs[0])
        now = self.now_ms()
        self.is_broker = "broker" in cfg.process_roles

        # cluster metadata: the image is built only from records the quorum commits (logs are
        # recovered with the broker defaults; topic configs reach them as ConfigRecords replay)
        self.image = MetadataImage()
        self.metadata_cache = MetadataCache(self.image)   # brokers and leaders, for handlers and the broker
        self.topic_configs = TopicConfigs(self.image, cfg)   # a topic's config over the broker's defaults
        QuorumRuntime.check_storage(metadata_dir)   # a damaged metadata dir refuses before any log is touched
        self.log_manager = LogManager(log_dirs, self.topic_configs.log_config_for)
        self.log_manager.startup(now, self.cluster_id, self.node_id)
        self.replica_manager = ReplicaManager(self.log_manager, self.node_id,
                                              log_config_for=self.topic_configs.log_config_for,
                                              policy_for=self.topic_configs.policy_for, now_ms=self.now_ms,
                                              leader_of=self.metadata_cache.leader_of,
                                              topic_exists=lambda name: name in self.image.topics)
        self.log_manager.high_watermark_of = self._high_watermark_of
        # replication throttles (KIP-73): the topic configs reach them through the publisher
        self.replication_quotas = ReplicationQuotas(self.node_id, self.config.get)
        self.replica_manager.leader_quota = self.replication_quotas.leader
        self.broker_context = BrokerContext(node_id=self.node_id, config=cfg, image=self.image, now_ms=self.now_ms,
                                            is_shutting_down=lambda: self.shutting_down)
        self.publisher = MetadataPublisher(
            self.broker_context, log_manager=self.log_manager, replica_manager=self.replica_manager,
            replication_quotas=self.replication_quotas, client_quotas=self.quotas,
            topic_values=self.topic_configs.topic_values,
            apply_dynamic_broker_configs=self._apply_dynamic_broker_configs)
        self.replica_fetchers = ReplicaFetcherManager(self.broker_context, broker_epoch=self.broker_epoch,
                                                      follower_quota=self.replication_quotas.follower)
        self.replica_manager.follower_listener = self.replica_fetchers.on_partition_role

        self.controller_service = ControllerService(self.broker_context, is_active=lambda: self.controller_active,
                                                    topic_values=self.topic_configs.topic_values,
                                                    wait_for_topics=self.wait_for_topics)
        self.log_dir_runtime = LogDirRuntime(self.broker_context, replica_manager=self.replica_manager,
                                             log_manager=self.log_manager, metadata_dir=metadata_dir,
                                             controller_service=self.controller_service)
        self.isr_updates = IsrUpdates(self.broker_context, broker_epoch=self.broker_epoch,
                                      controller_service=self.controller_service)
        self.replica_manager.isr_change_listener = self.isr_updates.submit
        self.controller = Controller(
            self.image, self.controller_service.sink, node_id=self.node_id,
            defaults=lambda: (cfg.get("num.partitions"), cfg.get("default.replication.factor")),
            validate_topic_configs=functools.partial(
                validate_topic_configs,
                remote_storage_system_enabled=cfg.get("remote.log.storage.system.enable")),
            delete_topic_enable=lambda: cfg.get("delete.topic.enable"))
        self.cluster_control = ClusterControl(self.image, self.controller_service.sink, cluster_id=self.cluster_id,
                                              session_timeout_ms=lambda: cfg.get("broker.session.timeout.ms"),
                                              unclean_enabled=self.controller_service.unclean_election_enabled)
        self.loader = MetadataLoader(self.image, cfg, now_ms=self.now_ms, on_metadata=self.on_metadata,
                                     on_metadata_snapshot=self.on_metadata_snapshot,
                                     on_quorum_leader=self.on_quorum_leader)
        voters = {v.node_id: (v.host, v.port) for v in cfg.controller_quorum_voters}
        self.quorum = QuorumRuntime(
            node_id=self.node_id, voters=voters, cluster_id=self.cluster_id, directory=metadata_dir,
            now_ms=self.now_ms, on_event=self.loader.on_event, on_delivered=self.loader.publish,
            election_timeout_ms=cfg.get("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms=cfg.get("controller.quorum.fetch.timeout.ms"),
            request_timeout_ms=cfg.get("controller.quorum.request.timeout.ms"),
            retry_backoff_ms=cfg.get("controller.quorum.retry.backoff.ms"),
            segment_bytes=segment_size(cfg.get("metadata.log.segment.bytes"),   # as Kafka's KafkaRaftLog
                                       cfg.get("internal.metadata.log.segment.bytes")),
            # the marker covers the metadata log when it lives in a log dir: stop() flushes and
            # closes the quorum's log before the log manager writes the marker
            clean_shutdown=self.log_manager.had_clean_shutdown.get(metadata_dir, False))
        self.controller_service.attach(controller=self.controller, cluster_control=self.cluster_control,
                                       quorum=self.quorum)
        self.quorum.clients.ssl_context = controller_ssl(cfg)   # TLS to the voters' controller listener
        self.quorum.clients.sasl = controller_sasl(cfg)   # SASL on it (kcompat.security.sasl_client)
        self.quorum.start()
        self.api_services = ApiServices(
            node_id=self.node_id, cluster_id=self.cluster_id, config=cfg, image=self.image,
            metadata_cache=self.metadata_cache, now_ms=self.now_ms, authorizer=self.authorizer, quotas=self.quotas,
            describe_topic_configs=self.topic_configs.describe, controller_service=self.controller_service,
            controller=self.controller, cluster_control=self.cluster_control, quorum=self.quorum,
            is_shutting_down=lambda: self.shutting_down)
        self.isr_updates.api_services = self.log_dir_runtime.api_services = self.api_services
        controller_names = set(cfg.controller_listener_names)
        # what every client connection shares (kcompat.broker.listeners), for all listeners
        self.connection_services = ConnectionServices(
            api_services=self.api_services, config=cfg, request_stats=self.request_stats,
            connection_quotas=self.connection_quotas, connections=self.connections,
            sasl=SaslListeners(cfg, self.image))
        await self.kafka_listeners.open(self.connection_services,
                                        [lst for lst in cfg.listeners if lst[0] in controller_names])
        await self._wait_for_metadata()
        await self._write_bootstrap_records()
        self._apply_dynamic_broker_configs()
        self._set_aside_unknown_logs()
        self.cleaner = self.cleaner_driver = None
        if cfg.get("log.cleaner.enable"):
            self.cleaner = LogCleaner(threads=cfg.get("log.cleaner.threads"),
                                      dedupe_buffer_size=cfg.get("log.cleaner.dedupe.buffer.size"),
                                      io_buffer_load_factor=cfg.get("log.cleaner.io.buffer.load.factor"),
                                      backoff_ms=cfg.get("log.cleaner.backoff.ms"))
            self.cleaner.prestart_workers()
            self.cleaner_driver = CleanerDriver(self.cleaner, self.log_manager.logs, now_ms=self.now_ms,
                                                stable_offset_of=self._stable_offset_of,
                                                producer_last_offsets_of=self._producer_last_offsets_of)
            self.cleaner_driver.start()   # advances a cleaning as soon as its worker step finishes
        self.producer_id_manager = ProducerIdManager(self._take_producer_id_block)
        coordinator_services = CoordinatorServices(
            node_id=self.node_id, config=cfg, image=self.image, metadata_cache=self.metadata_cache,
            now_ms=self.now_ms, replica_manager=self.replica_manager, log_manager=self.log_manager,
            producer_id_manager=self.producer_id_manager, live_broker_ids=self.live_broker_ids,
            voter_count=lambda: len(self.quorum.voters), create_topics=self.controller_service.create_topics)
        self.groups = GroupRuntime(coordinator_services)
        self.txn = TxnRuntime(coordinator_services, self.groups)
        self.share_state = ShareStateRuntime(coordinator_services)   # the share coordinator (__share_group_state)
        self.share_persister = SharePersister(self.broker_context, self.share_state)   # its DefaultStatePersister
        self.groups.share_admin.persister = self.share_persister
        self.share = ShareService(image=self.image, replica_manager=self.replica_manager,
                                  persister=self.share_persister, group_config=self.image.group_config,
                                  config=cfg, now_ms=self.now_ms)   # ShareFetch / ShareAcknowledge
        self.replica_manager.txn_partition_adder = self.txn   # Produce v12, TxnOffsetCommit v5 (KIP-890 part 2)
        if cfg.get("transaction.partition.verification.enable"):
            self.replica_manager.txn_verifier = self.txn.verify
            self.replica_manager.remote_txn_verification = self.txn   # coordinators on other brokers
            for p in self.replica_manager.partitions.values():
                p.txn_verifier = self.txn.verify
        self.remote_log = None   # KIP-405 tiered storage, with remote.log.storage.system.enable
        if cfg.get("remote.log.storage.system.enable"):
            rlmm = RemoteLogMetadataManager(self.broker_context, live_broker_ids=self.live_broker_ids,
                                            voter_count=coordinator_services.voter_count,
                                            create_topics=self.controller_service.create_topics)
            self.remote_log = RemoteLogManager(self.broker_context, self.replica_manager,
                                               storage_from_config(cfg.get, log_dirs), rlmm)
            self.replica_manager.remote_reader = self.remote_log
            self.replica_fetchers.remote_log = self.remote_log
        self.publisher.attach_coordinators(groups=self.groups, txn=self.txn, share_state=self.share_state,
                                           remote_log=self.remote_log)
        self.fetch_sessions = FetchSessions(cfg.get("max.incremental.fetch.session.cache.slots"),
                                            lambda tid: getattr(self.image.topics_by_id.get(tid), "name", None))
        self.api_services.attach_broker_side(
            replica_manager=self.replica_manager, log_manager=self.log_manager, remote_log=self.remote_log,
            groups=self.groups, txn=self.txn, share_state=self.share_state, share=self.share,
            fetch_sessions=self.fetch_sessions, producer_id_manager=self.producer_id_manager,
            auto_create_topics=self.auto_create_topics)
        self.lifecycle = self.log_dir_runtime.lifecycle = BrokerLifecycle(
            self.broker_context, cluster_id=self.cluster_id, advertised_endpoint=self.advertised_endpoint,
            log_dir_runtime=self.log_dir_runtime, controller_service=self.controller_service,
            api_services=self.api_services)
        self.log_dir_runtime.start()
        maintenance = LogMaintenance(cfg, self.log_manager, self.replica_manager, self.now_ms,
                                     lambda: self.shutting_down)
        self._periodic_tasks = [asyncio.ensure_future(self._controller_periodic()),
                                asyncio.ensure_future(maintenance.run(PERIODIC_INTERVAL_S))]
        self.connection_quotas.start_idle_expiry(self.connections)
        # the HTTP listener is up before the Kafka listeners serve: whoever sees the broker can scrape it
        await self.http.start(parse_http_listeners(cfg.get("http.listeners")), HttpServices(
            node_id=self.node_id, cluster_id=self.cluster_id, config=cfg, image=self.image,
            controller_active=lambda: self.controller_active, quorum=self.quorum,
            replica_manager=self.replica_manager, log_manager=self.log_manager, groups=self.groups, txn=self.txn,
            remote_log=self.remote_log, fetch_sessions=self.fetch_sessions, request_stats=self.request_stats,
            connection_count=lambda: len(self.connections), topic_values=self.topic_configs.topic_values,
            leader_of=self.leader_of, live_broker_ids=self.live_broker_ids,
            create_topics=self.controller_service.create_topics, auto_create_topics=self.auto_create_topics,
            wait_for_topics=self.wait_for_topics))
        if self.is_broker:
            # bind first (the registration carries the bound ports), serve once unfenced
            await self.kafka_listeners.open(self.connection_services,
                                            [lst for lst in cfg.listeners if lst[0] not in controller_names],
                                            serve=False)
            self.lifecycle.start()
            await self._wait_unfenced()
            self._prefetch_producer_ids()
            try:  # the first InitProducerId must not find the block still on its way
                await asyncio.wait_for(asyncio.shield(self._producer_id_fetch), 10)
            except asyncio.TimeoutError:
                log.warning("no producer id block from the controller yet; InitProducerId answers "
                            "COORDINATOR_LOAD_IN_PROGRESS until it arrives")
            await self.kafka_listeners.serve()
            self.groups.start()
            self.txn.start()
            self.share_state.start()
            if self.remote_log is not None:
                self.remote_log.start()
            self.publisher.host_coordinators()
        log.info("kcompat node %d started (%s): cluster id %s, %d partitions, metadata at offset %d, "
                 "log dirs %s, in %.0f ms", self.node_id, ",".join(cfg.process_roles), self.cluster_id,
                 len(self.replica_manager.partitions), self.image.offset,
                 ",".join(str(d.resolve()) for d in log_dirs), (time.monotonic() - t0) * 1000)

    async def _wait_for_metadata(self) -> None:
        """Until this node has applied everything the quorum had committed when it learned the
        high watermark (Kafka: the broker waits to catch up before it serves)."""
        waited = time.monotonic()
        while not self.shutting_down:
            if self.quorum.caught_up() and (self.controller_active or self.quorum.leader_id != self.node_id):
                return
            if time.monotonic() - waited > 5:
                waited = time.monotonic()
                log.info("waiting for the metadata quorum: leader %s, high watermark %s, applied %d",
                         self.quorum.leader_id, self.quorum.raft.high_watermark, self.quorum.applied_offset)
            await asyncio.sleep(0.01)

    async def _write_bootstrap_records(self) -> None:
        """First start of a new cluster, on the active controller: finalize metadata.version
        (Kafka's bootstrap records, which the QuorumController writes on activation). Losing the
        quorum leadership before they commit is no error (Kafka's controller renounces and the
        next active one writes them): whichever node is active next writes them from
        :meth:`_controller_periodic`. Raises only errors other than NOT_CONTROLLER."""
        if not self.controller_active or "metadata.version" in self.image.features:
            return
        try:
            await self.controller_service.run(lambda: self.controller.bootstrap(self.now_ms()))
        except KafkaError as e:
            if e.code != ErrorCode.NOT_CONTROLLER:
                raise
            log.info("bootstrap records not written (%s); the next active controller writes them", e.message)

    async def _wait_unfenced(self) -> None:
        """Until the controller has unfenced this broker and this node's own image shows it (so
        its first Metadata responses list itself)."""
        waited = time.monotonic()
        while not self.lifecycle.unfenced.is_set():
            try:
                await asyncio.wait_for(self.lifecycle.unfenced.wait(), 5)
            except asyncio.TimeoutError:
                log.info("waiting to be unfenced by the controller (%.0f s)", time.monotonic() - waited)
        while self.node_id not in self.image.unfenced_brokers() and not self.shutting_down:
            await asyncio.sleep(0.005)

    # -- producer id blocks ----------------------------------------------------------------------

    def _take_producer_id_block(self) -> tuple[int, int]:
        """The next prefetched producer id block (Kafka ``RPCProducerIdManager``); while none is
        ready, COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""
        block = self._producer_id_blocks.pop(0) if self._producer_id_blocks else None
        self._prefetch_producer_ids()
        if block is None:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "Producer ID block is full. Waiting for next block")
        return block

    def _prefetch_producer_ids(self) -> None:
        if self._producer_id_blocks or (self._producer_id_fetch is not None and not self._producer_id_fetch.done()):
            return

        async def fetch():
            while not self.shutting_down:
                try:
                    self._producer_id_blocks.append(await self.lifecycle.allocate_producer_ids())
                    return
                except KafkaError as e:
                    log.debug("producer id block allocation failed: %s", e)
                    await asyncio.sleep(0.1)
        self._producer_id_fetch = asyncio.ensure_future(fetch())

    def _find_cluster_id(self, log_dirs: list[Path]) -> str | None:
        for d in log_dirs:
            props = read_meta_properties(d / "meta.properties")
            if props and props.get("cluster.id"):
                return props["cluster.id"]
        return None

    def _set_aside_unknown_logs(self) -> None:
        """Logs of topic-partitions the caught-up image does not place here are renamed -stray
        and kept, never deleted."""
        known = set(self.replica_manager.partitions)
        for key in list(self.log_manager.logs):
            if key not in known and key[0] != METADATA_TOPIC:
                log.warning("log %s-%d is not in the cluster metadata; renaming it -stray and keeping it", *key)
                self.log_manager.mark_stray(*key)

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The leader of a partition in the metadata image (None if unknown, -1 if none)."""
        return self.metadata_cache.leader_of(topic, partition)

    # -- quorum events ---------------------------------------------------------------------------

    @property
    def controller_active(self) -> bool:
        return self._controller_active and self.quorum.is_leader

    def on_quorum_leader(self, leader_id: int, epoch: int) -> None:
        """The metadata quorum has a new leader (announced once this node's image is complete)."""
        active = leader_id == self.node_id
        previous, self._quorum_leader = self._quorum_leader, leader_id
        if previous != leader_id:
            self.controller_service.on_leader_change(previous)
        if active and not self._controller_active:
            self.cluster_control.activate(self.now_ms())
            log.info("became the active controller (epoch %d)", epoch)
        elif not active and leader_id >= 0:
            log.info("the active controller is node %d (epoch %d)", leader_id, epoch)
        self._controller_active = active

    def on_metadata_snapshot(self) -> None:
        self.publisher.on_metadata_snapshot()

    def on_metadata(self, records: list) -> None:
        self.publisher.on_metadata(records)

    def _apply_dynamic_broker_configs(self) -> None:
        self.config.set_dynamic(cluster_default=self.image.broker_configs(""),
                                per_broker=self.image.broker_configs(str(self.node_id)))
        self.log_dir_runtime.refresh_cordoned()   # cordoned.log.dirs (KIP-1066)
        reload_listener_contexts(self.config)   # KIP-226: new ssl.* stores for new TLS connections

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

    async def auto_create_topics(self, names: list[str]) -> list[TopicResult]:
        """Create topics with the broker defaults (auto.create.topics.enable), through the active
        controller; returns once this node's image has them (or with the errors). An internal
        topic is created as its coordinator creates it, with its own partitions, replication factor
        and configs (Kafka's AutoTopicCreationManager.creatableTopic); UNKNOWN_TOPIC_OR_PARTITION
        while that cannot be done yet (too few brokers)."""
        runtimes = {r.TOPIC: r for r in (self.groups, self.txn, self.share_state)}
        plain = [n for n in names if n not in runtimes]
        results = await self.controller_service.create_topics([NewTopic(n) for n in plain]) if plain else []
        for r in results:
            if r.error == ErrorCode.NONE:
                log.info("auto-created topic %s with %d partition(s)", r.name, r.num_partitions)
        for name in names:
            if name in runtimes:
                created = await runtimes[name].ensure_topic()
                results.append(TopicResult(name, ErrorCode.NONE if created else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return results

    async def wait_for_topics(self, names: list[str], timeout_s: float = 10.0) -> None:
        """Until the local image has every topic in ``names`` (created through another node)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while any(n not in self.image.topics for n in names) and loop.time() < end:
            await asyncio.sleep(0.01)

    # -- endpoints -------------------------------------------------------------------------------

    def advertised_endpoint(self, listener_name: str) -> tuple[str, int]:
        """(host, port) clients should use for ``listener_name`` (advertised.listeners, with a
        bound port filled in for port 0 and the bound or local host for an empty host)."""
        adv = {n: (h, p) for n, h, p in self.config.advertised_listeners}
        bhost, bport = self.kafka_listeners.bound.get(listener_name, ("", 0))
        host, port = adv.get(listener_name, ("", 0))
        if port == 0:
            port = bport
        if not host:
            host = bhost if bhost not in ("0.0.0.0", "::", "") else socket.gethostname()
        return host, port

    def endpoint_of(self, node_id: int, listener_name: str) -> tuple[str, int] | None:
        """(host, port) of broker ``node_id`` on ``listener_name``; None if unknown."""
        return self.metadata_cache.endpoint_of(node_id, listener_name)

    def live_broker_ids(self) -> list[int]:
        """Registered, unfenced brokers (those that can host new replicas)."""
        return self.image.unfenced_brokers()

    def live_broker_endpoints(self, listener_name: str) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) on ``listener_name`` of every unfenced broker
        (:meth:`MetadataCache.live_broker_endpoints`)."""
        return self.metadata_cache.live_broker_endpoints(listener_name)

    # -- periodic work ---------------------------------------------------------------------------

    async def _controller_periodic(self) -> None:
        """The controller's timed work (Kafka's QuorumController periodic tasks): the bootstrap
        records if a controller that became active at start-up lost the quorum first, fence brokers
        whose session expired (every ``FENCE_CHECK_INTERVAL_S``), remove expired delegation tokens
        (every ``delegation.token.expiry.check.interval.ms``), leader elections and metadata
        snapshots (every ``PERIODIC_INTERVAL_S``). A task of its own: a controller operation that
        waits for the quorum never holds up log maintenance."""
        loop = asyncio.get_running_loop()
        last = 0.0
        while not self.shutting_down:
            await asyncio.sleep(FENCE_CHECK_INTERVAL_S)
            await guarded("bootstrap records", self._write_bootstrap_records())
            # a dead broker is fenced (and loses leadership) soon after its session expires
            await guarded("fencing stale brokers", self.controller_service.fence_stale_brokers())
            await guarded("expired delegation tokens", self.controller_service.sweep_expired_tokens())
            if loop.time() - last < PERIODIC_INTERVAL_S:
                continue
            last = loop.time()
            await guarded("leader elections", self.controller_service.maybe_elect_leaders())
            guarded_call("metadata snapshot", lambda: self.loader.maybe_snapshot(self.quorum, self.now_ms()))

    # -- shutdown --------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Graceful shutdown: in-flight requests are answered, then logs are flushed and closed."""
        if self.shutting_down:
            return
        log.info("shutting down")
        if self.lifecycle is not None and self.lifecycle.broker_epoch >= 0 and \
                any(b != self.node_id for b in self.live_broker_ids()):
            moved = await self.lifecycle.controlled_shutdown(SHUTDOWN_GRACE_S)
            log.info("controlled shutdown %s", "complete" if moved else "timed out; shutting down anyway")
        self.shutting_down = True
        await self.http.stop()
        self.kafka_listeners.close()
        replica_manager = getattr(self, "replica_manager", None)
        if replica_manager is not None:
            replica_manager.shutting_down = True
            replica_manager.wake_delayed_fetches()
        for conn in list(self.connections):
            conn.stop_reading()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while any(c.in_flight() for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for task in self._periodic_tasks:
            task.cancel()
        if hasattr(self, "log_dir_runtime"):
            self.log_dir_runtime.stop()
        self.connection_quotas.stop()
        if self.lifecycle is not None:
            self.lifecycle.stop()
        if hasattr(self, "share_state"):
            self.share.stop()
            self.share_persister.close()
            self.share_state.stop()
        if hasattr(self, "txn"):
            self.txn.stop()
            self.groups.stop()
        if getattr(self, "remote_log", None) is not None:
            await self.remote_log.stop()
        if getattr(self, "cleaner_driver", None) is not None:
            self.cleaner_driver.stop()
        if getattr(self, "cleaner", None) is not None:
            self.cleaner.shutdown()
        self.replica_fetchers.close()
        await self.quorum.stop()
        self.controller_service.close()
        self.replica_manager.shutdown()
        self.log_manager.shutdown()
        log.info("shutdown complete")
        self.stopped.set()
