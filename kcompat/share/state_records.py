"""The records of ``__share_group_state`` and the share-partition keys (KIP-932; Kafka 4.3's
``ShareCoordinatorRecordHelpers``, ``SharePartitionKey``, ``ShareGroupOffset`` and
``ShareCoordinatorOffsetsManager``), for :mod:`kcompat.share.state_coordinator`.

- :class:`ShareKey` and its coordinator key string ``"groupId:topicId:partition"`` (Kafka's url-safe
  base64 topic id), parsed as Kafka's FindCoordinator does, and :func:`partition_for` (Java
  ``String.hashCode``, ``Utils.abs`` modulo the partition count);
- ``ShareSnapshot`` (key type 0) and ``ShareUpdate`` (key type 1) encoded and decoded, and folded
  into a :class:`ShareState` by :func:`apply_record` (updates merged with the batch combiner);
- :class:`OffsetsTracker`: the offset below which a partition's records are redundant (pruning);
- the error texts the share coordinator answers with.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import uuid
from dataclasses import dataclass, replace
from typing import NamedTuple

from kcompat.coordinator.java_strings import java_string_hash
from kcompat.protocol.primitives import DecodeError
from kcompat.protocol.share_records import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue
from kcompat.share.state_batches import PersistedStateBatch, combine_state_batches

SNAPSHOT_KEY_TYPE = 0  # ShareSnapshotKey's record type (the key's int16 prefix)
UPDATE_KEY_TYPE = 1
VALUE_VERSION = 0

UNINITIALIZED_START_OFFSET = -1          # PartitionFactory / ShareGroupOffset
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0
UNINITIALIZED_EPOCH = 0
NO_TIMESTAMP = 0

# Kafka's messages (ShareCoordinatorShard's exceptions; Errors.*.message() is protocol.errors.default_message)
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
# ShareCoordinatorService's prefix of an operation that failed in the runtime, per API
OPERATION_FAILED = {
    "initialize": "Unable to initialize share group state: ",
    "read": "Unable to read share group state: ",
    "write": "Unable to write share group state: ",
    "delete": "Unable to delete share group state: ",
    "summary": "Unable to read share group state summary: ",
}

_I16 = struct.Struct(">h")


# ----------------------------------------------------------------------------------------------
# keys
# ----------------------------------------------------------------------------------------------

class ShareKey(NamedTuple):
    """A share-partition key (Kafka's SharePartitionKey)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def kafka_uuid_parse(s: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: at most 24 characters of URL-safe base64 decoding to 16 bytes.
    Raises ValueError."""
    if len(s) > 24:
        raise ValueError(f"Input string with prefix `{s[:24]}` is too long to be decoded as a base64 UUID")
    body = s.rstrip("=")
    if "=" in body or len(s) - len(body) > 2 or (len(s) != len(body) and len(s) % 4):
        raise ValueError(f"Illegal base64 padding in `{s}`")
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"Input string `{s}` is not base64: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"Input string `{s}` decoded as {len(raw)} bytes, which is not equal to the expected "
                         f"16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=raw)


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``"%s:%s:%d"`` of group, topic id, partition."""
    return f"{group_id}:{kafka_uuid_str(topic_id)}:{partition}"


_JAVA_WS = "".join(chr(c) for c in range(0x21))  # what Java's String.trim() strips
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _java_split(s: str, sep: str) -> list[str]:
    """Java's ``String.split`` with a one-character literal: trailing empty strings removed."""
    parts = s.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_share_key(key: str) -> ShareKey:
    """Kafka's ``SharePartitionKey.validate`` + ``getInstance(String)`` for a FindCoordinator key
    ``groupId:topicId:partition``. Raises ValueError with Kafka's reason."""
    if key is None:
        raise ValueError("Share partition key cannot be null")
    if not key:
        raise ValueError("Share partition key cannot be empty")
    tokens = _java_split(key, ":")
    if len(tokens) != 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found -  {key}")
    group = tokens[0].strip(_JAVA_WS)
    if not group:
        raise ValueError("GroupId must be alphanumeric string")
    try:
        topic_id = kafka_uuid_parse(tokens[1])
    except ValueError:
        raise ValueError(f"Invalid topic ID: {tokens[1]}") from None
    if not _JAVA_INT.fullmatch(tokens[2]) or not -2**31 <= int(tokens[2]) < 2**31:
        raise ValueError(f"Invalid partition: {tokens[2]}")
    return ShareKey(group, topic_id, int(tokens[2]))


def partition_for(key: ShareKey | str, num_partitions: int) -> int:
    """Kafka's ``ShareCoordinatorService.partitionFor``: ``Utils.abs(asCoordinatorKey().hashCode())
    % share.coordinator.state.topic.num.partitions``. A string key is parsed (and so normalized:
    group id trimmed, topic id re-encoded) as Kafka's FindCoordinator does; raises ValueError."""
    if isinstance(key, str):
        key = parse_share_key(key)
    h = java_string_hash(coordinator_key(*key))
    return (0 if h == -(2**31) else abs(h)) % num_partitions


# ----------------------------------------------------------------------------------------------
# records
# ----------------------------------------------------------------------------------------------

class RecordFormatError(ValueError):
    """A ``__share_group_state`` key or value that cannot be decoded."""


@dataclass(eq=False)
class ShareRecord:
    """One ``__share_group_state`` record: ``key``/``value`` bytes in Kafka's format (value None:
    tombstone) for ``partition`` of the topic, and the decoded form. ``offset`` is set by the
    runtime when it appends the record (pruning needs the offset of every snapshot)."""

    partition: int
    key: bytes
    value: bytes | None
    share_key: ShareKey
    snapshot: bool
    value_obj: ShareSnapshotValue | ShareUpdateValue | None
    offset: int = -1


def encode_key(snapshot: bool, key: ShareKey) -> bytes:
    cls = ShareSnapshotKey if snapshot else ShareUpdateKey
    out = bytearray(_I16.pack(SNAPSHOT_KEY_TYPE if snapshot else UPDATE_KEY_TYPE))
    cls(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition).write(out, 0)
    return bytes(out)


def encode_value(value) -> bytes:
    out = bytearray(_I16.pack(VALUE_VERSION))
    value.write(out, VALUE_VERSION)
    return bytes(out)


def decode_record(key: bytes, value: bytes | None) -> tuple[bool, ShareKey, object] | None:
    """``(is snapshot, key, decoded value or None)``; None for a record type this coordinator does
    not know (Kafka's replay ignores those). Raises RecordFormatError."""
    try:
        view = memoryview(key)
        if len(view) < 2:
            raise RecordFormatError("key shorter than its type")
        kind = _I16.unpack_from(view, 0)[0]
        if kind not in (SNAPSHOT_KEY_TYPE, UPDATE_KEY_TYPE):
            return None
        snapshot = kind == SNAPSHOT_KEY_TYPE
        k, _ = (ShareSnapshotKey if snapshot else ShareUpdateKey).read(view, 2, 0)
        skey = ShareKey(k.group_id, k.topic_id, k.partition)
        if value is None:
            return snapshot, skey, None
        vview = memoryview(value)
        if len(vview) < 2:
            raise RecordFormatError("value shorter than its version")
        version = _I16.unpack_from(vview, 0)[0]
        if version != VALUE_VERSION:
            return None  # Kafka: UnsupportedVersionException, ignored by replay
        v, _ = (ShareSnapshotValue if snapshot else ShareUpdateValue).read(vview, 2, version)
        return snapshot, skey, v
    except DecodeError as e:
        raise RecordFormatError(str(e)) from None


# ----------------------------------------------------------------------------------------------
# state
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShareState:
    """The stored state of one share-partition key (Kafka's ShareGroupOffset), with the side maps
    of ShareCoordinatorShard: the highest leader and state epochs replayed for the key (what
    requests are fenced against) and the number of updates since its last snapshot (None: the
    key has none counted, Kafka's absent snapshotUpdateCount entry)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp: int
    write_timestamp: int
    batches: tuple[PersistedStateBatch, ...]
    fence_leader_epoch: int
    fence_state_epoch: int | None
    updates_since_snapshot: int | None = None


def _batches_of(value) -> tuple[PersistedStateBatch, ...]:
    return tuple(PersistedStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                 for b in value.state_batches)


def apply_record(states: dict[ShareKey, ShareState], snapshot: bool, key: ShareKey, value,
                 updates_per_snapshot: int) -> None:
    """Fold one record into ``states`` (Kafka's ShareCoordinatorShard.replay)."""
    prev = states.get(key)
    if snapshot:
        if value is None:  # tombstone
            states.pop(key, None)
            return
        count = prev.updates_since_snapshot if prev is not None else None
        if count is not None and count >= updates_per_snapshot:
            count = 0
        states[key] = ShareState(
            snapshot_epoch=value.snapshot_epoch, state_epoch=value.state_epoch, leader_epoch=value.leader_epoch,
            start_offset=value.start_offset, delivery_complete_count=value.delivery_complete_count,
            create_timestamp=value.create_timestamp, write_timestamp=value.write_timestamp,
            batches=_batches_of(value),
            fence_leader_epoch=value.leader_epoch if prev is None else max(prev.fence_leader_epoch, value.leader_epoch),
            fence_state_epoch=value.state_epoch if prev is None or prev.fence_state_epoch is None
            else max(prev.fence_state_epoch, value.state_epoch),
            updates_since_snapshot=count)
        return
    if value is None:
        return  # Kafka writes no update tombstones
    count = 0 if prev is None or prev.updates_since_snapshot is None else prev.updates_since_snapshot + 1
    if prev is None:  # ShareGroupOffset.fromRecord(ShareUpdateValue)
        states[key] = ShareState(
            snapshot_epoch=value.snapshot_epoch, state_epoch=UNINITIALIZED_EPOCH, leader_epoch=value.leader_epoch,
            start_offset=value.start_offset, delivery_complete_count=value.delivery_complete_count,
            create_timestamp=NO_TIMESTAMP, write_timestamp=NO_TIMESTAMP, batches=_batches_of(value),
            fence_leader_epoch=value.leader_epoch, fence_state_epoch=None, updates_since_snapshot=count)
        return
    start = prev.start_offset if value.start_offset == -1 else value.start_offset
    states[key] = replace(
        prev, start_offset=start,
        leader_epoch=prev.leader_epoch if value.leader_epoch == -1 else value.leader_epoch,
        delivery_complete_count=value.delivery_complete_count,
        batches=tuple(combine_state_batches(prev.batches, _batches_of(value), start)),
        fence_leader_epoch=max(prev.fence_leader_epoch, value.leader_epoch),
        updates_since_snapshot=count)


def snapshot_value(*, snapshot_epoch: int, state_epoch: int, leader_epoch: int, start_offset: int,
                    delivery_complete_count: int, create_timestamp: int, write_timestamp: int,
                    batches) -> ShareSnapshotValue:
    return ShareSnapshotValue(
        snapshot_epoch=snapshot_epoch, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        delivery_complete_count=delivery_complete_count, create_timestamp=create_timestamp,
        write_timestamp=write_timestamp,
        state_batches=[ShareSnapshotValue.StateBatch(first_offset=b[0], last_offset=b[1], delivery_state=b[2],
                                                     delivery_count=b[3]) for b in batches])


class OffsetsTracker:
    """Kafka's ShareCoordinatorOffsetsManager for one partition: the offset of the latest snapshot
    (or tombstone) of every key, and the offset below which every record is redundant."""

    def __init__(self) -> None:
        self._offsets: dict[ShareKey, int] = {}
        self._last_redundant = 2**63 - 1

    def update(self, key: ShareKey, offset: int, delete: bool) -> None:
        self._last_redundant = min(self._last_redundant, offset)
        self._offsets[key] = offset
        self._last_redundant = min(self._offsets.values())
        if delete:
            del self._offsets[key]

    def last_redundant_offset(self) -> int | None:
        v = self._last_redundant
        return None if v <= 0 or v == 2**63 - 1 else v


# ----------------------------------------------------------------------------------------------
# the coordinator
# ----------------------------------------------------------------------------------------------
