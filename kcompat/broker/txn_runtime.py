"""Runs the transaction coordinator (:mod:`kcompat.txn.coordinator`) inside the broker over
``__transaction_state``, and writes its transaction markers.

Mechanics are :class:`kcompat.broker.coordinator_runtime.CoordinatorRuntime`'s: a record is
appended with acks=-1 as Kafka's TransactionStateManager does (NOT_ENOUGH_REPLICAS before the
append if the ISR is below ``min.insync.replicas``), replayed once committed, and its request
answered then; the wait is bounded by the transaction timeout of the id. A failed write goes to
:meth:`TransactionCoordinator.append_failed`. The coordinator epoch is the leader epoch of the
``__transaction_state`` partition; a new epoch of a partition this broker still leads reloads it.

After a result's records are committed, its :class:`MarkerRequest`\\ s are carried out, Kafka's
WriteTxnMarkers: partitions this broker leads get the COMMIT/ABORT control batch appended here
(``__consumer_offsets`` partitions through the group runtime so that transactional offsets become
visible or are dropped) and the marker counts once replicated (acks=-1, ``request.timeout.ms``);
partitions led by other brokers get a WriteTxnMarkers request. The outcome is reported with
``markers_written``, which completes the transaction or retries what failed. A coordinator
restart resumes transactions found in Prepare* states, so no partition stays blocked behind an
open transaction.
"""

from __future__ import annotations

import asyncio
import logging

from kcompat.broker.coordinator_runtime import CoordinatorRuntime, CoordinatorServices
from kcompat.broker.group_runtime import OFFSETS_TOPIC, GroupRuntime
from kcompat.broker.inter_broker import inter_broker_clients
from kcompat.broker.node_client import NodeClients
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kcompat.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kcompat.protocol.topic_names import TRANSACTION_STATE_TOPIC_NAME as TRANSACTION_STATE_TOPIC
from kcompat.txn.coordinator import TransactionCoordinator, TxnConfig
from kcompat.txn.coordinator_types import produce_verify_error

log = logging.getLogger("kcompat.txn")

WRITE_TXN_MARKERS_VERSION = 1
WRITE_TXN_MARKERS_TV2_VERSION = 2  # with each marker's TransactionVersion (KIP-1228)
ADD_PARTITIONS_TO_TXN_VERSION = 5  # the broker-to-coordinator form with verify_only (KIP-890)
TRANSACTION_VERSION = "transaction.version"


def txn_config(cfg) -> TxnConfig:
    return TxnConfig(
        max_timeout_ms=cfg.get("transaction.max.timeout.ms"),
        transactional_id_expiration_ms=cfg.get("transactional.id.expiration.ms"),
        abort_timed_out_interval_ms=cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        remove_expired_interval_ms=cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
        num_partitions=cfg.get("transaction.state.log.num.partitions"))


class TxnRuntime(CoordinatorRuntime):
    """The broker's transaction coordinator service, over the broker's
    :class:`CoordinatorServices` and its group coordinator ``groups`` (transactional offsets:
    their ``__consumer_offsets`` partition, and the markers written there)."""

    TOPIC = TRANSACTION_STATE_TOPIC

    def __init__(self, services: CoordinatorServices, groups: GroupRuntime) -> None:
        self.config = txn_config(services.config)
        self.groups = groups
        coordinator = TransactionCoordinator(
            self.config, allocate_producer_id=services.producer_id_manager.generate,
            partition_exists=services.image.has_partition,
            group_partition_for=groups.coordinator.partition_for,
            transaction_version=lambda: services.image.features.get(TRANSACTION_VERSION, 0))
        super().__init__(services, coordinator)
        self._marker_tasks: dict[int, set[asyncio.Task]] = {}  # by __transaction_state partition
        self._clients: NodeClients | None = None
        self._stopping = False

    # -- the transaction APIs (one method per API; handlers decode, call one of these, encode) ---

    def _call(self, op, ctx, req) -> asyncio.Future:
        return self.run(lambda reply_to, now: op(reply_to, req, ctx.api_version, now))

    def init_producer_id(self, ctx, req) -> asyncio.Future:
        return self._call(self.coordinator.init_producer_id, ctx, req)

    def add_partitions_to_txn(self, ctx, req) -> asyncio.Future:
        return self._call(self.coordinator.add_partitions_to_txn, ctx, req)

    def add_offsets_to_txn(self, ctx, req) -> asyncio.Future:
        return self._call(self.coordinator.add_offsets_to_txn, ctx, req)

    def end_txn(self, ctx, req) -> asyncio.Future:
        return self._call(self.coordinator.end_txn, ctx, req)

    def describe_transactions(self, ctx, req) -> asyncio.Future:
        return self._call(self.coordinator.describe_transactions, ctx, req)

    def list_transactions(self, ctx, req) -> asyncio.Future:
        return self._call(self.coordinator.list_transactions, ctx, req)

    def topic_spec(self) -> tuple[int, str, dict[str, str]]:
        """Kafka's ``TransactionStateManager.transactionTopicConfigs``: compacted, uncompressed,
        unclean leader election always off, the configured min ISR and segment size."""
        cfg = self.services.config
        rf = min(cfg.get("transaction.state.log.replication.factor"), len(self.services.live_broker_ids()))
        return (self.config.num_partitions, "transaction.state.log.replication.factor",
                {"unclean.leader.election.enable": "false", "cleanup.policy": "compact",
                 "compression.type": "uncompressed",
                 "min.insync.replicas": str(max(1, min(cfg.get("transaction.state.log.min.isr"), rf))),
                 "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes"))})

    def _request_timeout_ms(self) -> int:
        return self.services.config.get("request.timeout.ms")

    def write_timeout_ms(self, records) -> int:
        """The longest transaction timeout of the ids written (Kafka's appendTransactionToLog
        waits the transaction timeout), else ``request.timeout.ms``."""
        return max((r.timeout_ms for r in records if r.timeout_ms > 0), default=self._request_timeout_ms())

    def append_records(self, p, records: list, now: int) -> None:
        """acks=-1: NOT_ENOUGH_REPLICAS before appending if the ISR is below ``min.insync.replicas``."""
        rs = p.replica_state
        if rs is not None:
            p.check_min_isr(-1, rs.min_insync_replicas)
        super().append_records(p, records, now)

    def _leader_epoch(self, partition: int) -> int:
        return self.services.image.topics[self.TOPIC].partitions[partition].leader_epoch

    def on_partition_hosted(self, partition: int) -> None:
        """As the base; a partition loaded at an older leader epoch is unloaded and loaded again
        (Kafka's TransactionStateManager reloads on every election: markers carry the epoch)."""
        owned_epoch = self.coordinator.coordinator_epoch(partition)
        if owned_epoch is not None and owned_epoch != self._leader_epoch(partition):
            self.on_partition_unhosted(partition)
        super().on_partition_hosted(partition)

    def load_coordinator(self, partition: int, entries: list):
        # markers carry the coordinator epoch: the leader epoch of the __transaction_state partition
        return self.coordinator.load(partition, entries, self.services.now_ms(),
                                     coordinator_epoch=self._leader_epoch(partition))

    def on_write_failure(self, result, failed: list, error: ErrorCode):
        return self.coordinator.append_failed(result, int(error), self.services.now_ms())

    def before_unload(self, partition: int) -> None:
        for task in self._marker_tasks.pop(partition, ()):
            task.cancel()

    def stop(self) -> None:
        self._stopping = True
        for tasks in self._marker_tasks.values():
            for task in tasks:
                task.cancel()
        self._marker_tasks.clear()
        super().stop()
        if self._clients is not None:
            self._clients.close()

    # -- transaction markers ---------------------------------------------------------------------

    def after_append(self, result) -> None:
        for marker in result.markers:
            self._write_markers(marker)

    def _write_markers(self, m) -> None:
        """WriteTxnMarkers for one transaction. Local partitions are written now; when every one
        of them committed at once and none is remote, the outcome is reported right away, else
        once the replication waits and remote requests are answered."""
        if self._stopping:
            return
        txn_partition = self.coordinator.partition_for(m.transactional_id)
        if self.leader_partition(txn_partition) is None:
            # leadership of its __transaction_state partition moved: the next coordinator sends them
            log.info("not writing the markers of %s: this broker no longer leads %s-%d", m.transactional_id,
                     self.TOPIC, txn_partition)
            return
        now = self.services.now_ms()
        errors: dict[tuple[str, int], int] = {}
        waits: list = []  # (tp, Partition, required offset) or (tp, future of the group runtime)
        remote: dict[int, list[tuple[str, int]]] = {}
        for tp in m.partitions:
            topic, partition = tp
            try:
                leader = self._leader_of(topic, partition)
                if leader is not None and leader != self.services.node_id:
                    remote.setdefault(leader, []).append(tp)
                    continue
                wait = self._write_local_marker(m, topic, partition, now)
                if wait is None:
                    errors[tp] = 0
                else:
                    waits.append((tp, *wait))
            except KafkaError as e:
                errors[tp] = int(e.code)
            except Exception:
                log.exception("writing the %s marker of %s to %s-%d failed",
                              "COMMIT" if m.commit else "ABORT", m.transactional_id, topic, partition)
                errors[tp] = int(ErrorCode.UNKNOWN_SERVER_ERROR)
        if not waits and not remote:
            self._markers_done(m, errors)
            return
        task = asyncio.ensure_future(self._finish_markers(m, errors, waits, remote))
        tasks = self._marker_tasks.setdefault(txn_partition, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def _leader_of(self, topic: str, partition: int) -> int | None:
        """The leader of a partition as the metadata says (None: unknown topic or partition, the
        local write reports it). Raises KafkaError(NOT_LEADER_OR_FOLLOWER) without a leader."""
        leader = self.services.metadata_cache.leader_of(topic, partition)
        if leader is not None and leader < 0:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} has no leader")
        return leader

    def _write_local_marker(self, m, topic: str, partition: int, now: int):
        """Append the marker to a partition this broker leads: None if committed already, else
        what to wait for. Raises KafkaError."""
        if topic == OFFSETS_TOPIC:
            fut = self.groups.write_txn_marker(partition, m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                               m.commit, m.transaction_version)
            if fut.done():
                code = fut.result()
                if code != ErrorCode.NONE:
                    raise KafkaError(code)
                return None
            return (fut,)
        p = self.services.replica_manager.get(topic, partition)
        if p is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not p.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        offset = p.append_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit, now,
                                 m.transaction_version)
        if p.high_watermark > offset:
            return None
        return (p, offset + 1)

    async def _finish_markers(self, m, errors: dict, waits: list, remote: dict) -> None:
        timeout_ms = self._request_timeout_ms()
        jobs = [self._await_local(w, timeout_ms) for w in waits]
        jobs += [self._send_markers(node, m, tps, timeout_ms) for node, tps in remote.items()]
        for codes in await asyncio.gather(*jobs):
            errors.update(codes)
        self._markers_done(m, errors)

    @staticmethod
    async def _await_local(wait, timeout_ms: int) -> dict:
        if len(wait) == 2:  # (tp, future of GroupRuntime.write_txn_marker)
            tp, fut = wait
            return {tp: int(await fut)}
        tp, p, required = wait
        return {tp: int(await p.wait_for_replication(required, timeout_ms))}

    async def _send_markers(self, node: int, m, tps: list[tuple[str, int]], timeout_ms: int) -> dict:
        """WriteTxnMarkers to broker ``node`` for ``tps``: {tp: error code}; a request that fails
        counts as REQUEST_TIMED_OUT (retried), as Kafka re-enqueues markers after a disconnection.
        A TV2 transaction's markers go as v2 with their TransactionVersion (KIP-1228: every broker
        supports it once transaction.version 2 could be finalized), others as v1."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)
        R = WriteTxnMarkersRequest
        req = R(markers=[R.WritableTxnMarker(
            producer_id=m.producer_id, producer_epoch=m.producer_epoch, transaction_result=m.commit,
            coordinator_epoch=m.coordinator_epoch, transaction_version=m.transaction_version,
            topics=[R.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])])
        codes = {tp: int(ErrorCode.REQUEST_TIMED_OUT) for tp in tps}
        version = WRITE_TXN_MARKERS_TV2_VERSION if m.transaction_version >= 2 else WRITE_TXN_MARKERS_VERSION
        try:
            resp = await self._node_clients().send(node, req, version, timeout_ms / 1000.0)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("WriteTxnMarkers to node %d for %s failed: %s", node, m.transactional_id, e)
            return codes
        for result in resp.markers:
            for t in result.topics:
                for pr in t.partitions:
                    if (t.name, pr.partition_index) in codes:
                        codes[(t.name, pr.partition_index)] = pr.error_code
        return codes

    def _node_clients(self) -> NodeClients:
        if self._clients is None:
            services = self.services
            self._clients = inter_broker_clients(services.config, services.image, f"kcompat-txn-{services.node_id}")
        return self._clients

    def _markers_done(self, m, errors: dict) -> None:
        self.apply(self.coordinator.markers_written(m.transactional_id, m.producer_id, m.producer_epoch, errors,
                                                    self.services.now_ms(), coordinator_epoch=m.coordinator_epoch))

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
               partition: int) -> int:
        """KIP-890 check, on the append path, that the partition is in the producer's open
        transaction; 0 or the Kafka error code for the batch.

        Answered here where this broker is the transaction's coordinator. When the coordinator is
        another broker, ``ReplicaManager.handle_produce_append`` has already asked it
        (:meth:`verify_remote`) for the batch that opens the transaction in the partition, and
        later batches need no check, so this accepts; so it does for a TxnOffsetCommit
        (``__consumer_offsets``), which :meth:`GroupRuntime.txn_offset_commit` has verified with
        the remote coordinator already."""
        if self.remote_coordinator(transactional_id) is not None:
            return 0
        return self.coordinator.verify(transactional_id, producer_id, producer_epoch, topic, partition)

    def remote_coordinator(self, transactional_id: str) -> int | None:
        """Node id of the coordinator of ``transactional_id`` (the leader of its
        ``__transaction_state`` partition) when that is another live broker; None when it is this
        one or there is none (the local coordinator then answers NOT_COORDINATOR)."""
        leader = self.services.metadata_cache.leader_of(self.TOPIC, self.coordinator.partition_for(transactional_id))
        if leader is None or leader < 0 or leader == self.services.node_id:
            return None
        return leader

    async def verify_remote(self, node: int, transactional_id: str, producer_id: int, producer_epoch: int,
                            partitions: list[tuple[str, int]], timeout_s: float) -> dict[tuple[str, int], int]:
        """Ask the coordinator on ``node`` whether ``partitions`` are in the producer's open
        transaction: one AddPartitionsToTxn v5 with ``verify_only`` (KIP-890 part 1, Kafka's
        ``AddPartitionsToTxnManager``). Returns ``{(topic, partition): error code}`` with the
        errors mapped as for a local check; an unreachable coordinator is NOT_ENOUGH_REPLICAS,
        which producers retry."""
        return await self._ask_remote(node, transactional_id, producer_id, producer_epoch, partitions, timeout_s,
                                      verify_only=True)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]], timeout_s: float) -> dict[tuple[str, int], int]:
        """Add ``partitions`` to the producer's transaction for a TV2 client's Produce v12 or
        TxnOffsetCommit v5 (KIP-890 part 2, Kafka's ``AddPartitionsToTxnManager`` with
        ``addPartition``): AddPartitionsToTxn v5 without ``verify_only``, to this broker's
        coordinator or to the one on another broker. ``{(topic, partition): error code}``, mapped
        as for verification (fenced: INVALID_PRODUCER_EPOCH; busy, loading, moved or unreachable:
        NOT_ENOUGH_REPLICAS)."""
        node = self.remote_coordinator(transactional_id)
        if node is not None:
            return await self._ask_remote(node, transactional_id, producer_id, producer_epoch, partitions,
                                          timeout_s, verify_only=False)
        req = _add_request(transactional_id, producer_id, producer_epoch, partitions, verify_only=False)
        resp = await self._call(self.coordinator.add_partitions_to_txn, _Version(ADD_PARTITIONS_TO_TXN_VERSION), req)
        return _mapped_codes(resp, partitions)

    async def _ask_remote(self, node: int, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[tuple[str, int]], timeout_s: float, *, verify_only: bool
                          ) -> dict[tuple[str, int], int]:
        req = _add_request(transactional_id, producer_id, producer_epoch, partitions, verify_only=verify_only)
        try:
            resp = await self._node_clients().send(node, req, ADD_PARTITIONS_TO_TXN_VERSION, timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("asking the transaction coordinator on node %d about %s failed: %s", node, transactional_id, e)
            return {tp: int(ErrorCode.NOT_ENOUGH_REPLICAS) for tp in partitions}
        return _mapped_codes(resp, partitions)


class _Version:
    """The ``api_version`` of a request the broker makes to its own coordinator."""

    def __init__(self, api_version: int) -> None:
        self.api_version = api_version


def _add_request(transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]],
                 *, verify_only: bool) -> AddPartitionsToTxnRequest:
    """AddPartitionsToTxn v4+ for one transaction (the broker-to-coordinator form)."""
    Q = AddPartitionsToTxnRequest
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return Q(transactions=[Q.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        verify_only=verify_only, topics=[Q.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])


def _mapped_codes(resp, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The AddPartitionsToTxn answer per partition, as the produce path maps it."""
    if resp.error_code:
        return {tp: int(produce_verify_error(ErrorCode(resp.error_code))) for tp in partitions}
    codes = {tp: int(ErrorCode.NOT_ENOUGH_REPLICAS) for tp in partitions}
    for result in resp.results_by_transaction:
        for t in result.topic_results:
            for pr in t.results_by_partition:
                if (t.name, pr.partition_index) in codes:
                    codes[(t.name, pr.partition_index)] = int(produce_verify_error(ErrorCode(pr.partition_error_code)))
    return codes
