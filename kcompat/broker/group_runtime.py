"""Runs the group coordinator (:mod:`kcompat.group`) inside the broker over ``__consumer_offsets``.

See :mod:`kcompat.broker.coordinator_runtime` for the mechanics (topic creation on the first
FindCoordinator as Kafka does, chunked loading, records committed before replies, unloading when
leadership moves, timers).

Writes (offset commits, group metadata, tombstones) wait for replication up to
``offsets.commit.timeout.ms``, as Kafka's group coordinator; a reply without records waits for the
pending writes of its group's partition, because the coordinator applies group metadata (a
SyncGroup's assignment) before its record is committed. A failed write is handed to
:meth:`GroupCoordinator.write_failed`.

Transactional offsets (TxnOffsetCommit): records carrying a producer id are appended in a
transactional batch of that producer and epoch, and loading hands the coordinator their producer
id and the COMMIT/ABORT markers (:class:`kcompat.group.TxnMarker`) in log order.
"""

from __future__ import annotations

import asyncio
import itertools
import logging

from kcompat.broker.authz import TOPIC, Op, then
from kcompat.broker.coordinator_runtime import CoordinatorRuntime, CoordinatorServices
from kcompat.broker.share_group_admin import ShareGroupAdmin
from kcompat.group import GroupConfig, GroupCoordinator, TxnMarker
from kcompat.group.consumer_group import ConsumerProtocolConfig, TopicInfo
from kcompat.group.coordinator_types import TXN_GENERIC_ERROR_MIN_VERSION, TXN_VERIFY_ERRORS
from kcompat.group.share_groups import ShareProtocolConfig
from kcompat.group.streams_groups import StreamsProtocolConfig
from kcompat.group.streams_topology import MISSING_INTERNAL_TOPICS
from kcompat.kraft.controller import NewTopic
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError, txn_abortable_error
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from kcompat.protocol.topic_names import GROUP_METADATA_TOPIC_NAME as OFFSETS_TOPIC

log = logging.getLogger("kcompat.group")

TXN_OFFSET_COMMIT_ADD_VERSION = 5   # TxnOffsetCommit adds the offsets partition itself (KIP-890 part 2)


def group_config(cfg) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=cfg.get("group.min.session.timeout.ms"),
        max_session_timeout_ms=cfg.get("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=cfg.get("group.initial.rebalance.delay.ms"),
        max_size=cfg.get("group.max.size"),
        offsets_retention_ms=cfg.get("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=cfg.get("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=cfg.get("offset.metadata.max.bytes"),
        num_partitions=cfg.get("offsets.topic.num.partitions"))


def consumer_protocol_config(cfg) -> ConsumerProtocolConfig:
    """The KIP-848 broker configs (``group.consumer.*``, ``group.coordinator.rebalance.protocols``)."""
    return ConsumerProtocolConfig(
        enabled="consumer" in [p.strip().lower() for p in cfg.get("group.coordinator.rebalance.protocols")],
        heartbeat_interval_ms=cfg.get("group.consumer.heartbeat.interval.ms"),
        session_timeout_ms=cfg.get("group.consumer.session.timeout.ms"),
        max_size=cfg.get("group.consumer.max.size"),
        assignors=ConsumerProtocolConfig.assignor_names(cfg.get("group.consumer.assignors")),
        migration_policy=cfg.get("group.consumer.migration.policy").lower(),
        classic_max_size=cfg.get("group.max.size"))


def share_protocol_config(cfg) -> ShareProtocolConfig:
    """The KIP-932 broker configs (``group.share.*``)."""
    return ShareProtocolConfig(
        enabled=True,
        heartbeat_interval_ms=cfg.get("group.share.heartbeat.interval.ms"),
        session_timeout_ms=cfg.get("group.share.session.timeout.ms"),
        max_size=cfg.get("group.share.max.size"))


def streams_protocol_config(cfg) -> StreamsProtocolConfig:
    """The KIP-1071 broker configs (``group.streams.*``)."""
    return StreamsProtocolConfig(
        enabled="streams" in [p.strip().lower() for p in cfg.get("group.coordinator.rebalance.protocols")],
        heartbeat_interval_ms=cfg.get("group.streams.heartbeat.interval.ms"),
        session_timeout_ms=cfg.get("group.streams.session.timeout.ms"),
        max_size=cfg.get("group.streams.max.size"),
        num_standby_replicas=cfg.get("group.streams.num.standby.replicas"),
        initial_rebalance_delay_ms=cfg.get("group.streams.initial.rebalance.delay.ms"),
        assignment_interval_ms=cfg.get("group.streams.assignment.interval.ms"))


def _add_to_status(resp, detail: str, separator: str | None):
    """``detail`` added to the MISSING_INTERNAL_TOPICS status of a StreamsGroupHeartbeat answer
    (after ``separator`` when that status has a detail already); a new such status with
    ``detail`` if there is none and ``separator`` is given."""
    missing = next((s for s in resp.status or () if s.status_code == MISSING_INTERNAL_TOPICS), None)
    if missing is not None:
        missing.status_detail = (missing.status_detail + separator + detail if separator and missing.status_detail
                                 else (missing.status_detail or "") + detail)
    elif separator is not None and resp.error_code == 0:
        resp.status = [*(resp.status or ()), type(resp).Status(status_code=MISSING_INTERNAL_TOPICS,
                                                                status_detail=detail)]
    return resp


class ImageTopics:
    """The broker's metadata image as KIP-848 consumer groups see it (:class:`TopicsView`): the
    racks of a partition are those of the brokers holding its replicas."""

    def __init__(self, image) -> None:
        self._image = image

    def version(self) -> int:
        return self._image.offset

    def topic_names(self):
        return self._image.topics.keys()

    def topic(self, name: str) -> TopicInfo | None:
        t = self._image.topics.get(name)
        if t is None:
            return None
        brokers = self._image.brokers
        racks = {}
        for p, pi in t.partitions.items():
            racks[p] = frozenset(brokers[r].rack for r in pi.replicas if r in brokers and brokers[r].rack)
        return TopicInfo(t.topic_id, name, len(t.partitions), racks)

    def name_of(self, topic_id) -> str | None:
        t = self._image.topics_by_id.get(topic_id)
        return None if t is None else t.name


class GroupRuntime(CoordinatorRuntime):
    """The broker's group coordinator service, over the broker's :class:`CoordinatorServices`."""

    TOPIC = OFFSETS_TOPIC
    REPLIES_WAIT_FOR_WRITES = True

    def __init__(self, services: CoordinatorServices) -> None:
        self.config = group_config(services.config)
        super().__init__(services, GroupCoordinator(self.config, partition_exists=services.image.has_partition,
                                                    txn_verifier=self._verify_txn, topics=ImageTopics(services.image),
                                                    consumer_config=consumer_protocol_config(services.config),
                                                    share_config=share_protocol_config(services.config),
                                                    streams_config=streams_protocol_config(services.config),
                                                    group_overrides=self._group_overrides))
        self.share_admin = ShareGroupAdmin(self)   # the share-group admin APIs (KIP-932)
        self._streams_topics_creating: set[str] = set()   # streams internal topics being created (KIP-1071)
        self._streams_topic_errors: dict[str, tuple[str, int]] = {}   # topic -> (creation error, until ms)

    def _group_overrides(self, group_id: str) -> dict[str, str]:
        """A group's dynamic GROUP configs (KIP-848/KIP-932) from the metadata image."""
        lookup = getattr(self.services.image, "group_config", None)
        return lookup(group_id) if lookup is not None else {}

    def _verify_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, partition: int) -> int:
        """KIP-890 verification of a TxnOffsetCommit, as the produce path does it
        (``transaction.partition.verification.enable``)."""
        verifier = self.services.replica_manager.txn_verifier
        if verifier is None:
            return 0
        return verifier(transactional_id, producer_id, producer_epoch, self.TOPIC, partition)

    def write_timeout_ms(self, records) -> int:
        """``offsets.commit.timeout.ms``: Kafka's group coordinator waits this long for every write."""
        return self.services.config.get("offsets.commit.timeout.ms")

    def append_records(self, p, records: list, now: int) -> None:
        """One batch per run of records of the same producer, in order: transactional offset
        commits in a transactional batch of their producer id and epoch (base sequence 0, as
        Kafka's GroupMetadataManager.storeOffsets). Each record learns its log offset."""
        for (producer_id, producer_epoch), run in itertools.groupby(
                records, key=lambda r: (r.producer_id, r.producer_epoch)):
            run = list(run)
            entries = [(now, r.key, r.value, ()) for r in run]
            if producer_id >= 0:
                batch = rb.build_batch(entries, producer_id=producer_id, producer_epoch=producer_epoch,
                                       base_sequence=0, transactional=True)
            else:
                batch = rb.build_batch(entries)
            base = p.append_internal(batch, now)
            for i, r in enumerate(run):
                r.offset = base + i

    def on_write_failure(self, result, failed: list, error: ErrorCode):
        return self.coordinator.write_failed(result, failed, int(error), self.services.now_ms())

    def load_entry(self, rec: rb.Record, header: rb.BatchHeader):
        if rec.key is None:
            return None
        if header.is_transactional and header.producer_id >= 0:
            return (rec.offset, rec.key, rec.value, header.producer_id)
        return (rec.offset, rec.key, rec.value)

    def load_control(self, partition: int, header: rb.BatchHeader, rec: rb.Record, entries: list) -> None:
        try:
            kind = rb.control_type(rec)
        except rb.CorruptRecordError:
            return
        if kind in (rb.CONTROL_COMMIT, rb.CONTROL_ABORT):
            entries.append(TxnMarker(rec.offset, header.producer_id, kind == rb.CONTROL_COMMIT))

    def topic_spec(self) -> tuple[int, str, dict[str, str]]:
        return (self.config.num_partitions, "offsets.topic.replication.factor",
                {"cleanup.policy": "compact", "compression.type": "producer",
                 "segment.bytes": str(self.services.config.get("offsets.topic.segment.bytes"))})

    # -- the group APIs (one method per API; handlers decode, call one of these, encode) ---------

    def _partitions(self, group_ids) -> set[int]:
        """The ``__consumer_offsets`` partitions of ``group_ids``: a reply waits for their
        pending writes (the coordinator applies a SyncGroup's assignment before it is committed)."""
        return {self.coordinator.partition_for(g) for g in group_ids if isinstance(g, str)}

    @staticmethod
    def _client(ctx) -> tuple[str, str]:
        """(client id, client host) as Kafka records them for members: ``/host``."""
        return ctx.client_id or "", "/" + ctx.peer.rsplit(":", 1)[0]

    def join_group(self, ctx, req) -> asyncio.Future:
        client_id, host = self._client(ctx)
        return self.run(lambda reply_to, now: self.coordinator.join_group(
            reply_to, req, ctx.api_version, client_id, host, now), self._partitions([req.group_id]))

    def sync_group(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.sync_group(reply_to, req, ctx.api_version, now),
                        self._partitions([req.group_id]))

    def heartbeat(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.heartbeat(reply_to, req, ctx.api_version, now),
                        self._partitions([req.group_id]))

    def leave_group(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.leave_group(reply_to, req, ctx.api_version, now),
                        self._partitions([req.group_id]))

    def offset_commit(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.offset_commit(reply_to, req, ctx.api_version, now),
                        self._partitions([req.group_id]))

    def txn_offset_commit(self, ctx, req):
        """Write transactional offsets (KIP-98/447); with ``transaction.partition.verification.enable``
        (KIP-890 part 1), when this broker coordinates the group and the transaction's coordinator
        is another broker, first ask that one (AddPartitionsToTxn ``verify_only``) whether the
        group's ``__consumer_offsets`` partition is in the transaction (Kafka's
        ``GroupCoordinatorService.commitTransactionalOffsets``, verifying through the
        ReplicaManager); the local coordinator is asked on the append path (:meth:`_verify_txn`).
        A refusal answers every partition with ``TXN_VERIFY_ERRORS`` of the code
        (UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist). v5 (a TV2 client, KIP-890
        part 2) has the transaction coordinator, local or remote, add the partition instead
        (:meth:`TxnRuntime.add_partitions`), whatever the verification config says."""
        tid = req.transactional_id
        services = self.services
        if not (tid and req.group_id and any(services.image.has_partition(t.name, p.partition_index)
                                             for t in req.topics for p in t.partitions)):
            return self._txn_offset_commit(ctx, req)
        partition = self.coordinator.partition_for(req.group_id)
        if not self.coordinator.owns(partition):   # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS: no round trip
            return self._txn_offset_commit(ctx, req)
        rm = services.replica_manager
        adder, remote = rm.txn_partition_adder, rm.remote_txn_verification
        if ctx.api_version >= TXN_OFFSET_COMMIT_ADD_VERSION and adder is not None:
            # v5 (KIP-890 part 2): the offsets partition is added to the transaction first
            return self._txn_offset_commit_after_verification(
                ctx, req, partition, lambda partitions, timeout_s: adder.add_partitions(
                    tid, req.producer_id, req.producer_epoch, partitions, timeout_s))
        node = remote.remote_coordinator(tid) if remote is not None and rm.txn_verifier is not None else None
        if node is not None:
            return self._txn_offset_commit_after_verification(
                ctx, req, partition, lambda partitions, timeout_s: remote.verify_remote(
                    node, tid, req.producer_id, req.producer_epoch, partitions, timeout_s))
        return self._txn_offset_commit(ctx, req)

    def _txn_offset_commit(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.txn_offset_commit(
            reply_to, req, ctx.api_version, now), self._partitions([req.group_id]))

    async def _txn_offset_commit_after_verification(self, ctx, req, partition: int, ask):
        """``ask(partitions, timeout_s)``: the transaction coordinator verifies (v0-4) or adds (v5)
        the offsets partition; then the offsets are written, or every partition gets the refusal."""
        image = self.services.image
        timeout_s = self.services.config.get("request.timeout.ms") / 1000.0
        codes = await ask([(self.TOPIC, partition)], timeout_s)
        code = codes.get((self.TOPIC, partition), 0)
        if not code:
            return await self._txn_offset_commit(ctx, req)
        error = ErrorCode(txn_abortable_error(TXN_VERIFY_ERRORS.get(ErrorCode(code), ErrorCode(code)),
                                              ctx.api_version >= TXN_GENERIC_ERROR_MIN_VERSION))
        # partitions that do not exist are UNKNOWN_TOPIC_OR_PARTITION whatever the verification
        # says, as the coordinator answers them before verifying
        R = TxnOffsetCommitResponse
        return R(throttle_time_ms=0, topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            R.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index,
                error_code=int(error if image.has_partition(t.name, p.partition_index)
                               else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            for p in t.partitions]) for t in req.topics])

    def offset_fetch(self, ctx, req) -> asyncio.Future:
        ids = [g.group_id for g in req.groups] if ctx.api_version >= 8 else [req.group_id]
        return self.run(lambda reply_to, now: self.coordinator.offset_fetch(reply_to, req, ctx.api_version, now),
                        self._partitions(ids))

    def offset_delete(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.offset_delete(reply_to, req, ctx.api_version, now),
                        self._partitions([req.group_id]))

    def describe_groups(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.describe_groups(
            reply_to, req, ctx.api_version, now), self._partitions(req.groups))

    def list_groups(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.list_groups(reply_to, req, ctx.api_version, now))

    def delete_groups(self, ctx, req) -> asyncio.Future:
        """Empty share groups have their share state deleted first (:mod:`.share_group_admin`)."""
        return asyncio.ensure_future(self.share_admin.delete_groups(ctx, req))

    def consumer_group_heartbeat(self, ctx, req) -> asyncio.Future:
        client_id, host = self._client(ctx)
        return self.run(lambda reply_to, now: self.coordinator.consumer_group_heartbeat(
            reply_to, req, ctx.api_version, client_id, host, now), self._partitions([req.group_id]))

    def consumer_group_describe(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.consumer_group_describe(
            reply_to, req, ctx.api_version, now), self._partitions(req.group_ids))

    def share_group_heartbeat(self, ctx, req) -> asyncio.Future:
        client_id, host = self._client(ctx)
        return self.run(lambda reply_to, now: self.coordinator.share_group_heartbeat(
            reply_to, req, ctx.api_version, client_id, host, now), self._partitions([req.group_id]))

    def share_group_describe(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.share_group_describe(
            reply_to, req, ctx.api_version, now), self._partitions(req.group_ids))

    def streams_group_heartbeat(self, ctx, req):
        """StreamsGroupHeartbeat (KIP-1071), as Kafka's KafkaApis.handleStreamsGroupHeartbeat: the
        internal topics the coordinator found missing are created in the background (the member
        learns of them at a later heartbeat, MISSING_INTERNAL_TOPICS until then) when the principal
        may CREATE them (else "Unauthorized to CREATE on topics ..." and none is created); a failed
        creation is remembered for two heartbeat intervals, neither retried nor left unsaid
        ("; Creation failed: <topic> (<error>)"), as its AutoTopicCreationManager does."""
        client_id, host = self._client(ctx)
        fut = self.run(lambda reply_to, now: self.coordinator.streams_group_heartbeat(
            reply_to, req, ctx.api_version, client_id, host, now), self._partitions([req.group_id]))
        wanted = self.coordinator.streams_groups.take_topics_to_create()
        if not wanted:
            return fut
        unauthorized = [] if ctx.authorize_cluster(Op.CREATE) else [
            n for n in wanted if not ctx.authorize(Op.CREATE, TOPIC, n)]
        if unauthorized:
            return then(fut, lambda resp: _add_to_status(
                resp, f"Unauthorized to CREATE on topics {', '.join(unauthorized)}.", "; "))
        now = self.services.now_ms()
        errors = self._streams_topic_errors
        for name in [n for n, (_, expiry) in errors.items() if expiry <= now]:
            del errors[name]
        create = {n: spec for n, spec in wanted.items() if n not in errors and n not in self._streams_topics_creating}
        if create:
            self._streams_topics_creating.update(create)
            ttl = 2 * self.coordinator.streams_groups.heartbeat_interval_ms(req.group_id)
            asyncio.ensure_future(self._create_internal_topics(create, ttl))
        failed = [(n, errors[n][0]) for n in wanted if n in errors]
        if not failed:
            return fut
        listed = ", ".join(f"{n} ({e})" for n, e in failed[:3]) + (
            f" and {len(failed) - 3} more" if len(failed) > 3 else "")
        return then(fut, lambda resp: _add_to_status(resp, f"; Creation failed: {listed}.", None))

    async def _create_internal_topics(self, wanted: dict, ttl_ms: int) -> None:
        try:
            results = await self.services.create_topics([
                NewTopic(name, partitions, replication, configs=dict(configs))
                for name, (partitions, replication, configs) in sorted(wanted.items())])
            for r in results:
                if r.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    log.warning("creating streams internal topic %s failed: %s %s", r.name, r.error.name, r.message)
                    self._streams_topic_errors[r.name] = (r.message or r.error.name,
                                                          self.services.now_ms() + ttl_ms)
                else:
                    log.info("created streams internal topic %s", r.name)
        except Exception as e:
            log.exception("creating streams internal topics %s failed", sorted(wanted))
            for name in wanted:
                self._streams_topic_errors[name] = (str(e) or type(e).__name__, self.services.now_ms() + ttl_ms)
        finally:
            self._streams_topics_creating.difference_update(wanted)

    def streams_group_describe(self, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: self.coordinator.streams_group_describe(
            reply_to, req, ctx.api_version, now), self._partitions(req.group_ids))

    def stop(self) -> None:
        self.share_admin.close()
        super().stop()

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        self.apply(self.coordinator.on_partitions_deleted(partitions, self.services.now_ms()))

    def write_txn_marker(self, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool, transaction_version: int = 0) -> asyncio.Future:
        """A transaction marker for ``__consumer_offsets``-``partition``: appended to the log now
        (raises KafkaError as :meth:`Partition.append_marker` does, NOT_LEADER_OR_FOLLOWER if this
        broker does not lead the partition); once it is committed (the HW passed it, at once on a
        single replica) the producer's transactional offsets there become committed (COMMIT) or
        are dropped (ABORT), as Kafka's ``onTransactionCompleted`` after the acks=-1 append.

        Returns a future resolving to the ErrorCode of that wait: NONE, NOT_LEADER_OR_FOLLOWER,
        REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND (markers are then sent again by
        their coordinator); it is already resolved when the marker committed at once."""
        p = self.leader_partition(partition)
        if p is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {self.TOPIC}-{partition}")
        offset = p.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, self.services.now_ms(),
                                 transaction_version)
        fut = asyncio.get_running_loop().create_future()

        def done(code: ErrorCode, _records) -> None:
            if code == ErrorCode.NONE and partition not in self._loads:  # a load reads the marker itself
                self.apply(self.coordinator.complete_txn(partition, producer_id, commit, self.services.now_ms()))
            if not fut.done():
                fut.set_result(code)

        self.when_committed(partition, offset + 1, self.services.config.get("request.timeout.ms"), done)
        return fut
