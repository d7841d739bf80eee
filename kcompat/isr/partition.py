"""A topic-partition replica hosted by this broker: its log, producer state, and watermarks.

The replication role (leader or follower, high watermark, acks=all waits, ISR changes) comes
from :mod:`kcompat.isr.partition_replication`; a partition with this broker as its only replica has
HW = LEO. The append path follows Kafka's ``UnifiedLog.appendAsLeader`` + ``LogValidator`` for
RecordBatch v2, without decoding records (DESIGN.md section 4); steps 1-3 and the offset
rewrite are the pure :mod:`kcompat.log.validation`:

1. exactly one batch per partition per request, complete, magic 2, CRC32C valid
   (else INVALID_RECORD / CORRUPT_MESSAGE);
2. size <= ``max.message.bytes`` (else MESSAGE_TOO_LARGE); no control batches from clients;
3. record-level rules (keys on compacted topics, CreateTime timestamps within
   ``message.timestamp.before/after.max.ms``), every offending record reported by its index
   (:mod:`kcompat.log.validation`, KIP-467); LogAppendTime stamped by the broker (CRC
   recomputed);
4. idempotent producers: duplicate / epoch / sequence checks (ProducerStateManager);
5. baseOffset and partitionLeaderEpoch rewritten in place, appended, waiters woken.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from kcompat.isr.broker_topic_stats import BrokerTopicStats
from kcompat.isr.partition_replication import ReplicationMixin
from kcompat.isr.storage_errors import STORAGE_ERRORS, storage_kafka_error
from kcompat.log import FileRecords, Log, LogStorageError, OffsetOutOfRangeError
from kcompat.log.validation import assign_offsets, stamp_log_append_time, validate_batch, validate_records
from kcompat.protocol import records as rb
from kcompat.protocol.errors import BatchRefusedError, ErrorCode, KafkaError
from kcompat.txn.producer_state import ProducerStateManager

log = logging.getLogger("kcompat.isr")

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass
class AppendInfo:
    """Result of a successful append: ``base_offset`` / ``last_offset`` of the batch (the
    original ones for a retried duplicate), ``log_append_time`` (-1 unless LogAppendTime),
    ``log_start_offset``."""

    base_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False
    last_offset: int = -1


@dataclass(frozen=True)
class AppendPolicy:
    """Topic settings the append path enforces (topic configs of the same names, with their
    defaults: Kafka 4.x's timestamp bounds, KIP-937)."""

    max_message_bytes: int = 1048588
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    timestamp_before_max_ms: int = 2**63 - 1   # ms; Long.MAX_VALUE: no lower bound
    timestamp_after_max_ms: int = 3_600_000    # ms; one hour ahead of the broker's clock
    compact: bool = False  # cleanup.policy contains "compact": every record needs a key


class Partition(ReplicationMixin):
    """Replica of ``topic``-``partition_id`` over ``log`` on broker ``local_id``; leader until the
    metadata says otherwise (:meth:`make_leader` / :meth:`make_follower`). ``high_watermark``: the
    checkpointed HW to start from (None: the LEO)."""

    def __init__(self, topic: str, partition_id: int, topic_id, log_: Log, *, leader_epoch: int = 0,
                 policy: AppendPolicy | None = None, local_id: int = 1, high_watermark: int | None = None) -> None:
        self.topic = topic
        self.partition_id = partition_id
        self.topic_id = topic_id
        self.log = log_
        self.leader_epoch = leader_epoch
        self.policy = policy or AppendPolicy()
        self.producer_state = ProducerStateManager()
        # (transactional id, producer id, epoch, topic, partition) -> error code or 0 (KIP-890)
        self.txn_verifier: Callable[[str, int, int, str, int], int] | None = None
        self._waiters: set[Callable[[], None]] = set()
        # record bytes served to consumers while leading / while following (KIP-392 reads)
        self.consumer_bytes_as_leader = 0
        self.consumer_bytes_as_follower = 0
        # the broker's counters (BrokerTopicStats): ISR shrinks and expands are counted here
        self.stats: BrokerTopicStats | None = None
        # (partition, error) -> None: an I/O error (not a full disk) of the log: its log dir fails
        # (Kafka's LogDirFailureChannel); set by the ReplicaManager
        self.storage_failure_listener: Callable[["Partition", LogStorageError], None] | None = None
        # the log dir failed: every operation answers KAFKA_STORAGE_ERROR (Kafka HostedPartition.Offline)
        self.offline = False
        self._load_producer_state()
        self.log.on_roll = self._on_roll
        self._init_replication(local_id, high_watermark)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition_id})"

    # -- storage failures ------------------------------------------------------------------------

    def storage_error(self, e: Exception) -> KafkaError:
        """The KafkaError for one of STORAGE_ERRORS raised by the log; an I/O error other than a
        full disk is reported to ``storage_failure_listener`` first (the log dir goes offline)."""
        if isinstance(e, LogStorageError) and not e.disk_full and self.storage_failure_listener is not None:
            self.storage_failure_listener(self, e)
        return storage_kafka_error(e)

    def check_online(self) -> None:
        """Raise KafkaError(KAFKA_STORAGE_ERROR) if the partition's log dir is offline."""
        if self.offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"Partition {self.topic}-{self.partition_id} is in an offline log directory")

    def go_offline(self) -> None:
        """The log dir failed (its log is closed): from now on KAFKA_STORAGE_ERROR, also for the
        acks=all produces waiting for replication."""
        self.offline = True
        self._complete_replication_waiters(ErrorCode.KAFKA_STORAGE_ERROR)
        self._wake()

    def replace_log(self, new_log: Log) -> None:
        """Serve from ``new_log``, the same records in another log dir (AlterReplicaLogDirs swap,
        Kafka ``Partition.maybeReplaceCurrentWithFutureReplica``); a producer snapshot is written
        there at the log end so that a restart need not replay the log."""
        self.log = new_log
        new_log.on_roll = self._on_roll
        try:
            self.write_snapshot()
        except OSError as e:
            log.warning("%s: no producer snapshot in the new log dir (rebuilt from the log at restart): %s", self, e)
        self._wake()

    # -- watermarks ------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """LSO: the first offset of the oldest open transaction, or the high watermark if lower
        or if no transaction is open (KIP-98). read_committed consumers read only below it."""
        unstable = self.producer_state.first_unstable_offset()
        hw = self.high_watermark
        return hw if unstable is None else min(unstable, hw)

    # -- append ----------------------------------------------------------------------------------

    def append(self, records, now_ms: int, transactional_id: str | None = None, *,
               txn_verified: bool = False) -> AppendInfo:
        """Validate and append one producer batch. ``records`` must be a *writable* buffer
        (memoryview of a bytearray) holding exactly one batch; baseOffset etc. are rewritten in it.
        ``txn_verified``: the transaction coordinator already confirmed (KIP-890) that this
        partition is in the producer's transaction, so ``txn_verifier`` is not asked.

        Raises KafkaError with INVALID_RECORD, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP,
        INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER; record-level rejections are a
        :class:`~kcompat.protocol.errors.RecordValidationError` naming every bad record.
        """
        self.check_online()
        policy = self.policy
        h = validate_batch(records, max_message_bytes=policy.max_message_bytes)
        if h.is_transactional:
            self._verify_transaction(h, transactional_id, txn_verified)
        validate_records(records, h, topic_partition=f"{self.topic}-{self.partition_id}", now_ms=now_ms,
                         compact=policy.compact, log_append_time=policy.log_append_time,
                         timestamp_before_max_ms=policy.timestamp_before_max_ms,
                         timestamp_after_max_ms=policy.timestamp_after_max_ms)

        if policy.log_append_time:
            stamp_log_append_time(records, h, now_ms)
            max_ts = now_ms
            append_time = now_ms
        else:
            max_ts = h.max_timestamp
            append_time = -1

        if h.producer_id >= 0:
            if h.base_sequence < 0:
                raise KafkaError(ErrorCode.INVALID_RECORD,
                                 f"Idempotent batch from producer {h.producer_id} has no sequence number")
            dup = self.producer_state.check(h)
            if dup is not None:
                return AppendInfo(dup.first_offset, append_time, self.log.log_start_offset, duplicate=True,
                                  last_offset=dup.last_offset)

        base = self.log.log_end_offset
        last = assign_offsets(records, h, base, self.leader_epoch)
        # The record holding the max timestamp is known without decoding only for a single record
        # or LogAppendTime (every record has it: the first). Otherwise -1: the log finds it by
        # decoding that one batch if ListOffsets MAX_TIMESTAMP asks (KIP-734, KAFKA-16310).
        exact = base if h.records_count == 1 or self.policy.log_append_time else -1
        try:
            self.log.append(records, last_offset=last, max_timestamp=max_ts, offset_of_max_timestamp=exact,
                            now_ms=now_ms)
        except STORAGE_ERRORS as e:   # disk full...: nothing appended, KAFKA_STORAGE_ERROR (retriable)
            raise self.storage_error(e) from e
        if h.producer_id >= 0:
            self.producer_state.update(h, base, max_ts)
        if not self._solo:
            self.after_leader_append(now_ms)
        self._wake()
        return AppendInfo(base, append_time, self.log.log_start_offset, last_offset=last)

    def transaction_to_verify(self, records) -> tuple[int, int] | None:
        """``(producer id, producer epoch)`` of a transactional batch that opens the producer's
        transaction in this partition and so must be verified with the coordinator first
        (KIP-890; Kafka ``UnifiedLog.maybeStartTransactionVerification``), else None (not
        transactional, already in an open transaction, or unparseable: append reports that)."""
        try:
            h = rb.parse_header(records, 0)
        except (rb.CorruptRecordError, TypeError, ValueError):
            return None
        if not h.is_transactional or h.producer_id < 0 or \
                self.producer_state.has_ongoing_transaction(h.producer_id, h.producer_epoch):
            return None
        return h.producer_id, h.producer_epoch

    def _verify_transaction(self, h: rb.BatchHeader, transactional_id: str | None, verified: bool = False) -> None:
        """Transactional batches must belong to an ongoing transaction that includes this
        partition (KIP-890 part 1 verification, ``transaction.partition.verification.enable``)."""
        if h.producer_id < 0 or transactional_id is None:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             "Transactional records need a producer id and a transactional id")
        if self.txn_verifier is not None and not verified:
            code = self.txn_verifier(transactional_id, h.producer_id, h.producer_epoch, self.topic,
                                     self.partition_id)
            if code:
                raise BatchRefusedError(ErrorCode(code), f"Transactional id {transactional_id} has no ongoing "
                                                         f"transaction with {self.topic}-{self.partition_id}",
                                        custom_message=True)

    def append_as_follower(self, records, now_ms: int) -> tuple[int, int] | None:
        """Append batches fetched from the leader as they are: offsets, partition leader epochs
        and timestamps kept, no client validation beyond framing and CRC32C (Kafka
        ``Partition.appendRecordsToFollowerOrFutureReplica`` / ``UnifiedLog.appendAsFollower``).

        ``records``: bytes-like, complete v2 batches with increasing offsets, the first at or
        above the LEO (a gap is allowed: the leader's log may be compacted); a trailing partial
        batch is ignored. If the log is empty at its start offset and the first batch straddles it
        (the leader's log start lies inside that batch after DeleteRecords), the log restarts at
        the batch's base offset, as Kafka does. The log assigns each higher leader epoch at its
        batch's base offset; producer state and aborted transactions follow the batches. Returns
        ``(first offset, last offset)`` appended, or None if ``records`` held no complete batch.
        Raises KafkaError(CORRUPT_MESSAGE) for a bad header or CRC (nothing appended), ValueError
        for offsets that go backwards or start below the LEO.
        """
        self.check_online()
        mv = memoryview(records).cast("B") if records is not None else memoryview(b"")
        headers = []
        end = 0
        try:
            for pos, h in rb.iter_batches(mv):
                if not rb.crc_valid(mv, pos, h):
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record batch at offset {h.base_offset} is corrupt "
                                                                f"(CRC mismatch) in {self.topic}-{self.partition_id}")
                if h.base_offset < 0 or h.next_offset > 2**63 - 1:
                    # Kafka's long offsets would wrap: "Out of order offsets" (OffsetsOutOfOrderException)
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record batch offsets {h.base_offset}+"
                                                                f"{h.last_offset_delta} are out of range")
                if h.is_control and h.producer_id >= 0:
                    # the marker _replay_batch reads after the append must decode: check before
                    # appending (Kafka reads it in analyzeAndValidateProducerState, before too)
                    for rec in rb.iter_records(mv[pos:pos + h.size]):
                        rb.control_type(rec)
                        break
                headers.append(h)
                end = pos + h.size
        except rb.CorruptRecordError as e:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(e)) from None
        if not headers:
            return None
        first, last = headers[0].base_offset, headers[-1].last_offset
        leo = self.log.log_end_offset
        if first < leo and leo == self.log.log_start_offset and last >= leo:
            log.info("%s: first fetched offset %d is below the log start %d of the empty log; restarting it there",
                     self, first, leo)
            self.log.truncate_fully_and_start_at(first, now_ms=now_ms)
            self.producer_state.truncate_and_reload(None)
        try:
            self.log.append(mv[:end], last_offset=last, max_timestamp=max(h.max_timestamp for h in headers),
                            offset_of_max_timestamp=-1, now_ms=now_ms, allow_gap=True)
        except STORAGE_ERRORS as e:
            raise self.storage_error(e) from e
        for h in headers:
            self._replay_batch(h)
        self._wake()
        return first, last

    def append_internal(self, batch: bytes, now_ms: int) -> int:
        """Append a batch written by a coordinator of this broker (group or transaction state,
        control markers): no client validation, offsets and leader epoch assigned here (Kafka's
        ``appendAsLeader`` with origin COORDINATOR). Returns the base offset."""
        self.check_online()
        buf = bytearray(batch)
        h = rb.parse_header(buf, 0)
        base = self.log.log_end_offset
        rb.set_base_offset(buf, 0, base)
        rb.set_partition_leader_epoch(buf, 0, self.leader_epoch)
        last = base + h.last_offset_delta
        try:
            self.log.append(buf, last_offset=last, max_timestamp=h.max_timestamp,
                            offset_of_max_timestamp=base if h.records_count == 1 else -1, now_ms=now_ms)
        except STORAGE_ERRORS as e:
            raise self.storage_error(e) from e
        if h.producer_id >= 0:
            self.producer_state.update(h, base, h.max_timestamp)
        if not self._solo:
            self.after_leader_append(now_ms)
        self._wake()
        return base

    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      now_ms: int, transaction_version: int = 0) -> int:
        """Write a COMMIT or ABORT control batch ending the producer's transaction here (Kafka's
        WriteTxnMarkers on the leader). An aborted transaction is added to the ``.txnindex``.
        ``transaction_version``: the marker's (WriteTxnMarkers v2, KIP-1228; 2 asks for a bumped
        epoch). Returns the marker's offset; raises KafkaError(INVALID_PRODUCER_EPOCH |
        TRANSACTION_COORDINATOR_FENCED)."""
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch, transaction_version)
        kind = rb.CONTROL_COMMIT if commit else rb.CONTROL_ABORT
        offset = self.append_internal(rb.build_control_batch(kind, producer_id, producer_epoch, coordinator_epoch,
                                                             now_ms), now_ms)
        self._complete_txn(producer_id, producer_epoch, coordinator_epoch, commit, offset, now_ms)
        self._wake()
        return offset

    def _complete_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      marker_offset: int, timestamp: int) -> None:
        done = self.producer_state.complete_txn(producer_id, producer_epoch, coordinator_epoch, marker_offset,
                                                timestamp)
        if done is not None and not commit:
            unstable = self.producer_state.first_unstable_offset()
            lso = marker_offset + 1 if unstable is None else unstable
            self.log.append_aborted_txn(producer_id, done.first_offset, done.last_offset, lso)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of aborted transactions overlapping
        [fetch_offset, upper_bound): what a read_committed fetch returns with its records."""
        return [(a.producer_id, a.first_offset) for a in self.log.collect_aborted_txns(fetch_offset, upper_bound)]

    # -- read ------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, isolation_level: int = READ_UNCOMMITTED,
             min_one_batch: bool = True, zero_copy: bool = False) -> bytes | FileRecords:
        """Whole batches from ``offset`` below the HW (LSO for read_committed), at most
        ``max_bytes`` unless the first batch alone is larger and ``min_one_batch``.

        Raises KafkaError(OFFSET_OUT_OF_RANGE) outside [log start offset, LEO]; between the HW and
        the LEO (a new leader whose HW has not caught up yet) the read is empty, as Kafka's.
        ``zero_copy``: the records may be a FileRecords range (:meth:`kcompat.log.Log.read`)."""
        self.check_online()
        hw = self.high_watermark
        limit = self.last_stable_offset if isolation_level == READ_COMMITTED else hw
        if offset > hw:
            if offset > self.log.log_end_offset:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"Fetch offset {offset} is above the log end offset {self.log.log_end_offset}")
            return b""
        try:
            return self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch,
                                 zero_copy=zero_copy)
        except OffsetOutOfRangeError as e:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, str(e)) from None
        except STORAGE_ERRORS as e:   # a damaged batch on disk (CORRUPT_MESSAGE) or an I/O error
            raise self.storage_error(e) from e

    def count_consumer_bytes(self, n: int) -> None:
        """Count ``n`` bytes of records served to a consumer, as leader or as a follower."""
        if self.is_leader:
            self.consumer_bytes_as_leader += n
        else:
            self.consumer_bytes_as_follower += n

    # -- fetch waiters (delayed fetch, DESIGN.md section 8) --------------------------------------

    def add_waiter(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after the next append (or truncation) of this partition."""
        self._waiters.add(callback)

    def remove_waiter(self, callback: Callable[[], None]) -> None:
        self._waiters.discard(callback)

    def _wake(self) -> None:
        if self._waiters:
            waiters = list(self._waiters)
            for cb in waiters:
                cb()

    # -- producer state persistence --------------------------------------------------------------

    def _load_producer_state(self) -> None:
        """Latest snapshot at or below the LEO, then the batch headers written after it."""
        snap = self.log.latest_snapshot(self.log.log_end_offset)
        start = self.log.log_start_offset
        if snap is not None:
            offset, data = snap
            try:
                self.producer_state.truncate_and_reload(data)
                start = max(offset, start)
            except ValueError as e:
                log.warning("%s: ignoring corrupt producer snapshot at %d: %s", self, offset, e)
                self.producer_state.truncate_and_reload(None)
        # aborted-transaction entries from the replayed range are rebuilt with the replay
        self.log.truncate_aborted_txns(start)
        for h in self.log.iter_batch_headers(start):
            self._replay_batch(h)

    def _replay_batch(self, h: rb.BatchHeader) -> None:
        """Producer state (and aborted transactions) after a stored batch: recovery and followers."""
        if h.producer_id < 0:
            return
        if h.is_control:
            commit, coordinator_epoch = self._read_marker(h)
            self._complete_txn(h.producer_id, h.producer_epoch, coordinator_epoch, commit, h.base_offset,
                               h.max_timestamp)
        else:
            self.producer_state.replay(h)

    def _read_marker(self, h: rb.BatchHeader) -> tuple[bool, int]:
        """(is COMMIT, coordinator epoch) of the control batch ``h`` (its record says which)."""
        data = self.log.read(h.base_offset, h.size)
        for rec in rb.iter_records(memoryview(data)[:h.size]):
            epoch = int.from_bytes(rec.value[2:6], "big", signed=True) if rec.value and len(rec.value) >= 6 else -1
            return rb.control_type(rec) == rb.CONTROL_COMMIT, epoch
        return False, -1

    def _on_roll(self, new_base_offset: int) -> None:
        self.log.write_snapshot(new_base_offset, self.producer_state.snapshot())

    def write_snapshot(self) -> None:
        """Snapshot producer state at the LEO (clean shutdown)."""
        self.log.write_snapshot(self.log.log_end_offset, self.producer_state.snapshot())

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: offset -1 means the high watermark. Returns the new low watermark.
        Raises KafkaError(OFFSET_OUT_OF_RANGE) above the high watermark."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Cannot delete records before offset {offset}: the high watermark is "
                             f"{self.high_watermark}")
        if offset <= self.log.log_start_offset:
            return self.log.log_start_offset
        return self.log.delete_records_before(offset)
