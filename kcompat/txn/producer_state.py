"""Per-partition producer state for idempotent producers (KIP-98), as Kafka's ProducerStateManager.

For each producer id the partition remembers the producer epoch and the metadata of its last five
batches (sequence range, offsets, max timestamp). Before an append, :meth:`check` classifies the
batch header:

- a retry of one of those five batches -> the cached :class:`BatchMetadata` (the broker answers
  success with the original offsets and does not write the batch again);
- an older epoch -> INVALID_PRODUCER_EPOCH;
- a newer epoch whose first sequence is not 0 -> OUT_OF_ORDER_SEQUENCE_NUMBER;
- a sequence gap -> OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer id never seen on this partition starts its state there with any sequence (Kafka
  accepts it; rejecting it broke franz-go's kfake users).

State is rebuilt after a restart from the latest snapshot (Kafka's ``.snapshot`` format,
``kafka-specs/storage/ProducerSnapshot.json``) plus the batch headers written after it.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import NamedTuple

import crc32c

from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from kcompat.protocol.storage_records.producer_snapshot import ProducerSnapshot

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_VERSION = 1
_INT32_MAX = 0x7FFFFFFF
_VERSION = struct.Struct(">h")
_U32 = struct.Struct(">I")


class BatchMetadata(NamedTuple):
    """One appended batch of a producer: sequence range, offset range, max timestamp (ms)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: its producer and offset range [first, last]
    (``last_offset`` is the marker's offset)."""

    producer_id: int
    first_offset: int
    last_offset: int


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Kafka's ``ProducerStateManager.inSequence``: next = last + 1, wrapping at 2**31 - 1."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateEntry:
    """What a partition knows about one producer id."""

    __slots__ = ("producer_id", "producer_epoch", "batches", "coordinator_epoch",
                 "current_txn_first_offset", "last_timestamp")

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = -1
        self.current_txn_first_offset = -1
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerStateManager:
    """Producer id -> :class:`ProducerStateEntry` for one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """True if ``producer_id`` at ``producer_epoch`` has an open transaction in this log (Kafka
        ``UnifiedLog.hasOngoingTransaction``): its later batches need no KIP-890 verification."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.producer_epoch == producer_epoch and entry.current_txn_first_offset >= 0

    def check(self, h: BatchHeader) -> BatchMetadata | None:
        """Validate an idempotent batch header before it is appended.

        Returns the cached metadata if the batch is a duplicate (do not append), None if it may be
        appended. Raises KafkaError(INVALID_PRODUCER_EPOCH | OUT_OF_ORDER_SEQUENCE_NUMBER).
        """
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return None
        if h.producer_epoch < entry.producer_epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"Epoch of producer {h.producer_id} is {h.producer_epoch}, "
                             f"which is smaller than the last seen epoch {entry.producer_epoch}")
        first_seq = h.base_sequence
        dup = entry.find_duplicate(h.producer_epoch, first_seq, h.last_sequence)
        if dup is not None:
            return dup
        if not h.is_transactional and entry.current_txn_first_offset >= 0:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"Expected a transactional write from producer {h.producer_id}, whose "
                             f"transaction is ongoing")
        if h.producer_epoch > entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Invalid sequence number for new epoch of producer {h.producer_id} "
                                 f"(request epoch {h.producer_epoch}, server epoch {entry.producer_epoch}): "
                                 f"{first_seq} (expected 0)")
        elif entry.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(entry.last_seq, first_seq):
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"Out of order sequence number for producer {h.producer_id}: {first_seq} "
                             f"(incoming seq. number), {entry.last_seq} (current end sequence number)")
        return None

    def update(self, h: BatchHeader, first_offset: int, max_timestamp: int) -> None:
        """Record an appended batch (``first_offset`` is its assigned base offset)."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id, h.producer_epoch)
        elif h.producer_epoch > entry.producer_epoch:
            entry.producer_epoch = h.producer_epoch
            entry.batches.clear()
        if h.is_control:
            entry.last_timestamp = max_timestamp
            return
        if h.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[h.producer_id] = first_offset
        last_offset = first_offset + h.last_offset_delta
        entry.batches.append(BatchMetadata(h.base_sequence, h.last_sequence, first_offset, last_offset,
                                           max_timestamp))
        entry.last_timestamp = max_timestamp

    def replay(self, h: BatchHeader) -> None:
        """Apply a data batch header read back from the log (rebuild after a restart); control
        batches go through :meth:`complete_txn` (their header does not say commit or abort)."""
        if h.producer_id < 0:
            return
        self.update(h, h.base_offset, h.max_timestamp)

    # -- transactions (KIP-98) -------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest ongoing transaction, or None: the LSO is
        min(this, high watermark)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> None:
        """Validate a COMMIT/ABORT marker before it is appended (Kafka
        ``ProducerAppendInfo.appendEndTxnMarker``): an older producer epoch is
        INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED. A
        ``transaction_version`` 2 marker carries the epoch its EndTxn bumped, so it must be newer
        than the producer's epoch here (KIP-1228), unless it is the same epoch with no transaction
        open: a marker sent again after it was written (KAFKA-19999), accepted."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if transaction_version >= 2 and producer_epoch <= entry.producer_epoch and not (
                producer_epoch == entry.producer_epoch and entry.current_txn_first_offset < 0):
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"Transaction marker epoch {producer_epoch} of producer {producer_id} (transaction "
                             f"version {transaction_version}) is not newer than its current epoch "
                             f"{entry.producer_epoch}")
        if producer_epoch < entry.producer_epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"Transaction marker epoch {producer_epoch} of producer {producer_id} is older "
                             f"than its current epoch {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                             f"Coordinator epoch {coordinator_epoch} of the marker for producer {producer_id} "
                             f"is older than {entry.coordinator_epoch}")

    def complete_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     marker_offset: int, timestamp: int) -> CompletedTxn | None:
        """A marker at ``marker_offset`` ends the producer's transaction; returns what it ended
        (None if the producer had no ongoing transaction on this partition)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id, producer_epoch)
        if producer_epoch > entry.producer_epoch:
            entry.producer_epoch = producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(producer_id, None)
        if first < 0:
            return None
        return CompletedTxn(producer_id, first, marker_offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` without an ongoing transaction
        (Kafka ``removeExpiredProducers``); returns how many."""
        doomed = [pid for pid, e in self.producers.items()
                  if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    def truncate_and_reload(self, snapshot: bytes | None) -> None:
        """Reset to the contents of a snapshot (or empty)."""
        self.producers.clear()
        self.ongoing.clear()
        if snapshot:
            self.load_snapshot(snapshot)

    # -- snapshots (Kafka's .snapshot file format) -----------------------------------------------

    def snapshot(self) -> bytes:
        """Encode the state: int16 version, uint32 CRC32C of what follows, the entries array.

        Only the last batch of each producer is kept, as in Kafka.
        """
        entries = []
        for e in self.producers.values():
            if e.batches:
                b = e.batches[-1]
                entries.append(ProducerSnapshot.ProducerEntry(
                    producer_id=e.producer_id, epoch=e.producer_epoch, last_sequence=b.last_seq,
                    last_offset=b.last_offset, offset_delta=b.last_offset - b.first_offset,
                    timestamp=b.timestamp, coordinator_epoch=e.coordinator_epoch,
                    current_txn_first_offset=e.current_txn_first_offset))
            else:
                entries.append(ProducerSnapshot.ProducerEntry(
                    producer_id=e.producer_id, epoch=e.producer_epoch, last_sequence=NO_SEQUENCE,
                    last_offset=-1, offset_delta=0, timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_first_offset=e.current_txn_first_offset))
        out = bytearray(_VERSION.pack(SNAPSHOT_VERSION))
        ProducerSnapshot(crc=0, producer_entries=entries).write(out, SNAPSHOT_VERSION)
        _U32.pack_into(out, 2, crc32c.crc32c(memoryview(out)[6:]))
        return bytes(out)

    def load_snapshot(self, data: bytes) -> None:
        """Load a snapshot written by :meth:`snapshot` (or by Kafka). Raises ValueError if corrupt."""
        if len(data) < 6:
            raise ValueError("producer snapshot too short")
        (version,) = _VERSION.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unknown producer snapshot version {version}")
        (crc,) = _U32.unpack_from(data, 2)
        if crc32c.crc32c(memoryview(data)[6:]) != crc:
            raise ValueError("producer snapshot CRC mismatch")
        try:
            snap, _ = ProducerSnapshot.read(memoryview(data), 2, SNAPSHOT_VERSION)
        except struct.error as e:  # a fixed-size field cut short (DecodeError is a ValueError already)
            raise ValueError(f"producer snapshot truncated: {e}") from None
        for pe in snap.producer_entries:
            e = ProducerStateEntry(pe.producer_id, pe.epoch)
            e.coordinator_epoch = pe.coordinator_epoch
            e.current_txn_first_offset = pe.current_txn_first_offset
            if pe.current_txn_first_offset >= 0:
                self.ongoing[pe.producer_id] = pe.current_txn_first_offset
            e.last_timestamp = pe.timestamp
            if pe.last_sequence != NO_SEQUENCE:
                first_seq = (pe.last_sequence - pe.offset_delta) & _INT32_MAX
                e.batches.append(BatchMetadata(first_seq, pe.last_sequence, pe.last_offset - pe.offset_delta,
                                               pe.last_offset, pe.timestamp))
            self.producers[pe.producer_id] = e
