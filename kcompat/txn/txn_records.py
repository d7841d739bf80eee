"""``__transaction_state`` records in Kafka's format (kafka-specs/transaction-coordinator).

A key is an int16 key version followed by the key struct: version 0 is a TransactionLogKey
(transactional id); other versions are record types this coordinator does not know, skipped as
Kafka skips them ("Unknown message key ... It could be a left over from an aborted upgrade"). A
value is an int16 value version followed by a TransactionLogValue, or null (a tombstone: the
transactional id expired).

Versions written, as Kafka 4.3: key v0; value v0, the highest non-flexible version, until
``transaction.version`` >= 1 is finalized, then the flexible v1 with its tagged fields (previous/next
producer id, client transaction version: what a TV2 transaction needs back after a restart). The
caller picks the value version (:meth:`kcompat.txn.shard.TxnShard.write`). Both are read; Kafka
4.3.1's NextProducerEpoch (tag 3, KIP-939) is kept as an unknown tagged field. An Empty
value carries a null partition array; every other state an array (empty once completed).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kcompat.protocol.primitives import DecodeError
from kcompat.protocol.txn_records.transaction_log_key import TransactionLogKey
from kcompat.protocol.txn_records.transaction_log_value import TransactionLogValue
from kcompat.txn.state import TxnState

_I16 = struct.Struct(">h")

KEY_VERSION = 0
VALUE_VERSION = 0
NO_PRODUCER_ID = -1


class RecordFormatError(ValueError):
    """A ``__transaction_state`` key or value this coordinator cannot decode."""


@dataclass(frozen=True)
class TxnLogValue:
    """The content of a TransactionLogValue (Kafka's TxnTransitMetadata as written)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    txn_start_ms: int
    previous_producer_id: int = NO_PRODUCER_ID  # v1 only
    next_producer_id: int = NO_PRODUCER_ID  # v1 only
    client_transaction_version: int = 0  # v1 only


def _prefixed(version: int, struct_obj) -> bytes:
    out = bytearray(_I16.pack(version))
    struct_obj.write(out, version)
    return bytes(out)


def key_bytes(transactional_id: str) -> bytes:
    return _prefixed(KEY_VERSION, TransactionLogKey(transactional_id=transactional_id))


def value_bytes(value: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    if value.state is TxnState.EMPTY:
        if value.partitions:
            raise ValueError(f"an Empty transaction cannot have partitions: {value}")
        partitions = None
    elif value.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        raise ValueError(f"state {value.state} is never written to the transaction log")
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = [TransactionLogValue.PartitionsSchema(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
    return _prefixed(version, TransactionLogValue(
        producer_id=value.producer_id, previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id, producer_epoch=value.producer_epoch,
        transaction_timeout_ms=value.timeout_ms, transaction_status=value.state.id,
        transaction_partitions=partitions, transaction_last_update_timestamp_ms=value.last_update_ms,
        transaction_start_timestamp_ms=value.txn_start_ms,
        client_transaction_version=value.client_transaction_version))


def _read_version(data: bytes) -> tuple[memoryview, int]:
    if data is None or len(data) < 2:
        raise RecordFormatError("record shorter than its version prefix")
    buf = memoryview(data)
    return buf, _I16.unpack_from(buf, 0)[0]


def _read_struct(cls, buf: memoryview, version: int):
    try:
        obj, end = cls.read(buf, 2, version)
    except (DecodeError, struct.error, IndexError, ValueError) as e:
        raise RecordFormatError(f"bad {cls.__name__} v{version}: {e}") from e
    if end != len(buf):
        raise RecordFormatError(f"{len(buf) - end} trailing bytes after {cls.__name__} v{version}")
    return obj


def parse_key(key: bytes) -> str | None:
    """The transactional id; None for a key version this coordinator does not know."""
    buf, version = _read_version(key)
    if version != KEY_VERSION:
        return None
    return _read_struct(TransactionLogKey, buf, version).transactional_id


def parse_value(value: bytes | None) -> TxnLogValue | None:
    """The decoded value; None for a tombstone."""
    if value is None:
        return None
    buf, version = _read_version(value)
    lo, hi = TransactionLogValue.VALID_VERSIONS
    if not lo <= version <= hi:
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    v = _read_struct(TransactionLogValue, buf, version)
    try:
        state = TxnState.from_id(v.transaction_status)
    except ValueError as e:
        raise RecordFormatError(str(e)) from None
    partitions: frozenset[tuple[str, int]] = frozenset()
    if state is not TxnState.EMPTY and v.transaction_partitions:
        partitions = frozenset((p.topic, pid) for p in v.transaction_partitions for pid in p.partition_ids)
    return TxnLogValue(producer_id=v.producer_id, producer_epoch=v.producer_epoch,
                       timeout_ms=v.transaction_timeout_ms, state=state, partitions=partitions,
                       last_update_ms=v.transaction_last_update_timestamp_ms,
                       txn_start_ms=v.transaction_start_timestamp_ms,
                       previous_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
                       client_transaction_version=v.client_transaction_version)
