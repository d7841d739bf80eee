"""The share coordinator (KIP-932): durable share-partition state in ``__share_group_state``
(Kafka 4.3's ``ShareCoordinatorShard`` and the per-key half of ``ShareCoordinatorService``,
share-coordinator module).

For every share-partition key ``(group id, topic id, partition)`` it keeps the state epoch (bumped
by the group coordinator when it initializes or alters the share partition's start), the leader
epoch of the share-partition leader that last read it, the share-partition start offset, the
delivery complete count (KIP-1226), create/write timestamps and the state batches (runs of
offsets with a delivery state and count, :mod:`kcompat.share.state_batches`).

A pure state machine (DESIGN.md section 6): no I/O, no clock (``now_ms`` arguments), no broker
imports. Each request call takes ``(reply_to, request, version, now_ms)`` and returns a
:class:`~kcompat.coordinator.result.CoordinatorResult` whose records go to ``__share_group_state``
and whose one reply is sent only once they are committed. Records, as Kafka writes them:

- ``ShareSnapshot`` (key type 0): the whole state of a key. Written by InitializeShareGroupState
  (a fresh state: new state epoch and start offset, no batches), by a write once
  ``share.coordinator.snapshot.update.records.per.snapshot`` updates followed the last snapshot,
  and for cold partitions (below). A snapshot key with a null value is the tombstone of
  DeleteShareGroupState.
- ``ShareUpdate`` (key type 1): what one WriteShareGroupState (or a ReadShareGroupState raising
  the leader epoch) changes; replay folds it into the state with the batch combiner.

Like Kafka's coordinators, which apply a record to their in-memory (timeline) state when it is
appended, a call sees the effect of earlier calls whose records are not committed yet: records are
applied to a *current* view at once and to the *committed* view when the runtime replays them after
the commit. If their write fails, :meth:`ShareStateCoordinator.write_failed` drops them, rebuilds
the current view from the committed one, and turns their keys' results into coordinator errors
(Kafka reverts its timeline to the last committed offset). Loading a partition after a restart or
a leader change is the same replay, of the stored records.

Pruning (Kafka's ``ShareCoordinatorOffsetsManager``): ``__share_group_state`` uses
``cleanup.policy=delete``, not compaction. Per owned partition the coordinator tracks the offset of
the latest snapshot of every key; everything below the smallest of them is redundant
(:meth:`ShareStateCoordinator.last_redundant_offset`), and the runtime deletes it with
DeleteRecords every ``share.coordinator.state.topic.prune.interval.ms``. A key only updated, or not
written at all, for ``share.coordinator.cold.partition.snapshot.interval.ms`` would hold that
offset back: :meth:`ShareStateCoordinator.poll` writes a fresh snapshot of such *cold* keys
(Kafka's ``snapshotColdPartitions``).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import struct
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, NamedTuple

from kcompat.coordinator.java_strings import java_string_hash
from kcompat.coordinator.result import CoordinatorResult
from kcompat.protocol.errors import ErrorCode, coordinator_error_for_append
from kcompat.protocol.messages.delete_share_group_state import DeleteShareGroupStateResponse
from kcompat.protocol.messages.initialize_share_group_state import InitializeShareGroupStateResponse
from kcompat.protocol.messages.read_share_group_state import ReadShareGroupStateResponse
from kcompat.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryResponse
from kcompat.protocol.messages.write_share_group_state import WriteShareGroupStateResponse
from kcompat.protocol.primitives import DecodeError
from kcompat.protocol.share_records import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue
from kcompat.share.state_batches import PersistedStateBatch, combine_state_batches

log = logging.getLogger("kcompat.share.coordinator")

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

SNAPSHOT_KEY_TYPE = 0  # ShareSnapshotKey's record type (the key's int16 prefix)
UPDATE_KEY_TYPE = 1
VALUE_VERSION = 0

UNINITIALIZED_START_OFFSET = -1          # PartitionFactory / ShareGroupOffset
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0
UNINITIALIZED_EPOCH = 0
NO_TIMESTAMP = 0

# Kafka's messages (Errors.*.message() and ShareCoordinatorShard's exceptions)
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
MESSAGES = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    ErrorCode.FENCED_STATE_EPOCH: "The share coordinator rejected the request because the share-group state "
                                  "epoch did not match.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
}
# ShareCoordinatorService's prefix of an operation that failed in the runtime, per API
_OPERATION_FAILED = {
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


def _snapshot_value(*, snapshot_epoch: int, state_epoch: int, leader_epoch: int, start_offset: int,
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

@dataclass(frozen=True)
class ShareStateConfig:
    """The share coordinator's configs (Kafka's ShareCoordinatorConfig)."""

    num_partitions: int = 50                                 # share.coordinator.state.topic.num.partitions
    snapshot_update_records_per_snapshot: int = 500          # share.coordinator.snapshot.update.records.per.snapshot
    cold_partition_snapshot_interval_ms: int = 300_000       # share.coordinator.cold.partition.snapshot.interval.ms


@dataclass
class _Partition:
    """One owned ``__share_group_state`` partition."""

    committed: dict[ShareKey, ShareState] = field(default_factory=dict)
    current: dict[ShareKey, ShareState] = field(default_factory=dict)
    pending: deque = field(default_factory=deque)  # ShareRecords applied to current, not committed
    offsets: OffsetsTracker = field(default_factory=OffsetsTracker)
    cold_check_at: int = 0


Result = CoordinatorResult


class ShareStateCoordinator:
    """The share coordinator of one broker over the ``__share_group_state`` partitions it leads.

    ``topic_partition_exists(topic_id, partition)`` tells whether the metadata image has that
    partition (Kafka answers UNKNOWN_TOPIC_OR_PARTITION otherwise)."""

    def __init__(self, config: ShareStateConfig,
                 topic_partition_exists: Callable[[uuid.UUID, int], bool] = lambda t, p: True) -> None:
        self.config = config
        self._exists = topic_partition_exists
        self._owned: dict[int, _Partition] = {}
        self._loading: set[int] = set()
        self._active = True

    # ------------------------------------------------------------------------------------------
    # partitions of __share_group_state
    # ------------------------------------------------------------------------------------------

    def partition_for(self, key: ShareKey | str) -> int:
        """The ``__share_group_state`` partition of a key (a FindCoordinator key string is parsed
        as Kafka does: raises ValueError if invalid)."""
        return partition_for(key, self.config.num_partitions)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def owned_partitions(self) -> list[int]:
        return list(self._owned)

    def begin_loading(self, partition: int) -> None:
        """Requests for keys of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS until :meth:`load`."""
        self._owned.pop(partition, None)
        self._loading.add(partition)

    def load(self, partition: int, records: Iterable[tuple[int, bytes, bytes | None]], now_ms: int) -> Result:
        """Replay the partition's stored records ``(offset, key, value)`` in log order and own it."""
        self._loading.discard(partition)
        part = _Partition(cold_check_at=now_ms + self.config.cold_partition_snapshot_interval_ms)
        n = 0
        for offset, key, value in records:
            try:
                decoded = decode_record(key, value)
            except RecordFormatError as e:
                log.warning("%s-%d: skipping a record at offset %d that cannot be read: %s",
                            SHARE_GROUP_STATE_TOPIC, partition, offset, e)
                continue
            if decoded is None:
                continue
            snapshot, skey, v = decoded
            apply_record(part.committed, snapshot, skey, v, self.config.snapshot_update_records_per_snapshot)
            if snapshot:
                part.offsets.update(skey, offset, v is None)
            n += 1
        part.current = dict(part.committed)
        self._owned[partition] = part
        log.info("loaded %s-%d: %d records, %d share partitions", SHARE_GROUP_STATE_TOPIC, partition, n,
                 len(part.committed))
        return Result()

    def unload(self, partition: int) -> Result:
        """Give the partition up: its state is dropped (reloaded from the log when led again)."""
        self._loading.discard(partition)
        self._owned.pop(partition, None)
        return Result()

    def shutdown(self) -> Result:
        """Forget everything; requests get COORDINATOR_NOT_AVAILABLE from now on."""
        self._active = False
        self._owned.clear()
        self._loading.clear()
        return Result()

    def replay(self, record: ShareRecord) -> None:
        """A record committed (the runtime appended it and the high watermark passed it): apply it
        to the committed view. One of ours was applied to the current view already."""
        part = self._owned.get(record.partition)
        if part is None:
            return
        limit = self.config.snapshot_update_records_per_snapshot
        mine = False
        for i, r in enumerate(part.pending):
            if r is record:
                del part.pending[i]
                mine = True
                break
        apply_record(part.committed, record.snapshot, record.share_key, record.value_obj, limit)
        if not mine:
            apply_record(part.current, record.snapshot, record.share_key, record.value_obj, limit)
        if record.snapshot and record.offset >= 0:
            part.offsets.update(record.share_key, record.offset, record.value_obj is None)

    def write_failed(self, result: Result, failed: list, error_code: int, now_ms: int) -> Result:
        """``failed`` records of ``result`` were not appended or not replicated: they are undone
        (the current view is rebuilt from the committed one and the records still pending), and
        the results of their keys in ``result``'s reply become the coordinator error of
        ``error_code`` (Kafka's CoordinatorRuntime write failure + handleOperationException)."""
        code = coordinator_error_for_append(error_code)
        failed_ids = {id(r) for r in failed}
        limit = self.config.snapshot_update_records_per_snapshot
        for p in {r.partition for r in failed}:
            part = self._owned.get(p)
            if part is None:
                continue
            part.pending = deque(r for r in part.pending if id(r) not in failed_ids)
            part.current = dict(part.committed)
            for r in part.pending:
                apply_record(part.current, r.snapshot, r.share_key, r.value_obj, limit)
        # a reply that only waited for earlier writes (a read of their keys): its answers are void
        keys = {(r.share_key.topic_id, r.share_key.partition) for r in failed}
        for _reply_to, response in result.replies:
            for t in getattr(response, "results", ()):
                for pr in t.partitions:
                    if (t.topic_id, pr.partition) in keys or (not failed and pr.error_code == 0):
                        _set_error(pr, code, _operation_message(response, code))
        return Result([], list(result.replies))

    # ------------------------------------------------------------------------------------------
    # time: cold partitions
    # ------------------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return min((p.cold_check_at for p in self._owned.values()), default=None)

    def poll(self, now_ms: int) -> Result:
        """Snapshot cold keys of every partition whose check is due (Kafka's
        snapshotColdPartitions, every ``share.coordinator.cold.partition.snapshot.interval.ms``)."""
        records: list[ShareRecord] = []
        interval = self.config.cold_partition_snapshot_interval_ms
        for p, part in self._owned.items():
            if part.cold_check_at > now_ms:
                continue
            part.cold_check_at = now_ms + interval
            states = part.current
            # every key cold-snapshotted already: nothing changes, nothing to gain
            if all(s.create_timestamp != s.write_timestamp for s in states.values()):
                continue
            for key, s in list(states.items()):
                if now_ms - s.write_timestamp > interval:
                    value = _snapshot_value(
                        snapshot_epoch=s.snapshot_epoch + 1, state_epoch=s.state_epoch, leader_epoch=s.leader_epoch,
                        start_offset=s.start_offset, delivery_complete_count=s.delivery_complete_count,
                        create_timestamp=s.create_timestamp, write_timestamp=now_ms, batches=s.batches)
                    records.append(self._emit(p, part, True, key, value))
        return Result(records)

    def on_topics_deleted(self, topic_ids: Iterable[uuid.UUID], now_ms: int) -> Result:
        """Tombstones for every key of deleted topics (Kafka's maybeCleanupShareState)."""
        ids = set(topic_ids)
        records = []
        if ids:
            for p, part in self._owned.items():
                for key in [k for k in part.current if k.topic_id in ids]:
                    records.append(self._emit(p, part, True, key, None))
        return Result(records)

    def last_redundant_offset(self, partition: int) -> int | None:
        """The offset below which every record of ``partition`` is redundant (None: nothing to
        prune, or not owned)."""
        part = self._owned.get(partition)
        return None if part is None else part.offsets.last_redundant_offset()

    # ------------------------------------------------------------------------------------------
    # introspection
    # ------------------------------------------------------------------------------------------

    def state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, committed: bool = False
              ) -> ShareState | None:
        """The state of a key (the current view, or the committed one), None if unknown here."""
        key = ShareKey(group_id, topic_id, partition)
        part = self._owned.get(self.partition_for(key))
        if part is None:
            return None
        return (part.committed if committed else part.current).get(key)

    def keys(self, partition: int) -> list[ShareKey]:
        part = self._owned.get(partition)
        return [] if part is None else list(part.current)

    # ------------------------------------------------------------------------------------------
    # the requests
    # ------------------------------------------------------------------------------------------

    def _owner_error(self, key: ShareKey) -> tuple[int, _Partition | None, ErrorCode | None]:
        p = self.partition_for(key)
        if not self._active:
            return p, None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        if p in self._loading:
            return p, None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        part = self._owned.get(p)
        if part is None:
            return p, None, ErrorCode.NOT_COORDINATOR
        return p, part, None

    def _emit(self, p: int, part: _Partition, snapshot: bool, key: ShareKey, value) -> ShareRecord:
        """A record applied to the current view now, pending until the runtime replays it."""
        rec = ShareRecord(p, encode_key(snapshot, key), None if value is None else encode_value(value), key,
                          snapshot, value)
        apply_record(part.current, snapshot, key, value, self.config.snapshot_update_records_per_snapshot)
        part.pending.append(rec)
        return rec

    def _each_key(self, req, api: str, reply_to, empty_response, result_cls, handle) -> Result:
        """ShareCoordinatorService's shape: an empty topic or partition list or an empty group id
        gets an empty response; otherwise every key is handled on its own (``handle(key, part,
        p, partition data) -> partition result``) and the results are grouped by topic id."""
        if not req.topics or any(not t.partitions for t in req.topics) or not req.group_id:
            return Result([], [(reply_to, empty_response)])
        records: list[ShareRecord] = []
        by_topic: dict[uuid.UUID, dict[int, object]] = {}
        for t in req.topics:
            results = by_topic.setdefault(t.topic_id, {})
            for pd in t.partitions:
                key = ShareKey(req.group_id, t.topic_id, pd.partition)
                p, part, error = self._owner_error(key)
                if error is not None:
                    results[pd.partition] = _error_result(result_cls, pd.partition, error,
                                                          _OPERATION_FAILED[api] + MESSAGES[error])
                    continue
                results[pd.partition] = handle(key, part, p, pd, records)
        response = empty_response
        response.results = [_topic_result(response, topic_id, list(parts.values()))
                            for topic_id, parts in by_topic.items()]
        return Result(records, [(reply_to, response)])

    def _unknown_partition(self, key: ShareKey) -> bool:
        return not self._exists(key.topic_id, key.partition)

    def initialize_state(self, reply_to, req, version: int, now_ms: int) -> Result:
        """InitializeShareGroupState: a fresh state (new state epoch and start offset, no batches)
        as a snapshot (Kafka's ShareCoordinatorShard.initializeState)."""
        R = InitializeShareGroupStateResponse

        def handle(key, part, p, pd, records):
            if pd.partition < 0:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
            cur = part.current.get(key)
            if pd.state_epoch != -1 and cur is not None and cur.fence_state_epoch is not None \
                    and cur.fence_state_epoch > pd.state_epoch:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.FENCED_STATE_EPOCH)
            if self._unknown_partition(key):
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            value = _snapshot_value(
                snapshot_epoch=0 if cur is None else cur.snapshot_epoch + 1, state_epoch=pd.state_epoch,
                leader_epoch=UNINITIALIZED_EPOCH, start_offset=pd.start_offset,
                delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT
                if pd.start_offset == UNINITIALIZED_START_OFFSET else 0,
                create_timestamp=now_ms, write_timestamp=now_ms, batches=())
            records.append(self._emit(p, part, True, key, value))
            return R.PartitionResult(partition=pd.partition, error_code=0, error_message=None)

        return self._each_key(req, "initialize", reply_to, R(results=[]), R.PartitionResult, handle)

    def _state_record(self, p: int, part: _Partition, key: ShareKey, cur: ShareState, *, leader_epoch: int,
                      update_leader_epoch: bool, start_offset: int, delivery_complete_count: int, batches,
                      now_ms: int) -> ShareRecord:
        """Kafka's generateShareStateRecord: a snapshot once the key had enough updates since its
        last one (the stored batches combined with the written ones), else an update (the written
        batches only, combined among themselves)."""
        new_leader = cur.leader_epoch
        if update_leader_epoch and leader_epoch != -1:
            new_leader = leader_epoch
        if (cur.updates_since_snapshot or 0) >= self.config.snapshot_update_records_per_snapshot:
            start = cur.start_offset if start_offset == -1 else start_offset
            value = _snapshot_value(
                snapshot_epoch=cur.snapshot_epoch + 1, state_epoch=cur.state_epoch, leader_epoch=new_leader,
                start_offset=start, delivery_complete_count=delivery_complete_count, create_timestamp=now_ms,
                write_timestamp=now_ms, batches=combine_state_batches(cur.batches, batches, start))
            return self._emit(p, part, True, key, value)
        value = ShareUpdateValue(
            snapshot_epoch=cur.snapshot_epoch, leader_epoch=new_leader, start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            state_batches=[ShareUpdateValue.StateBatch(first_offset=b[0], last_offset=b[1], delivery_state=b[2],
                                                       delivery_count=b[3])
                           for b in combine_state_batches((), batches, start_offset)])
        return self._emit(p, part, False, key, value)

    def write_state(self, reply_to, req, version: int, now_ms: int) -> Result:
        """WriteShareGroupState: the share-partition leader's start offset, delivery complete count
        and changed batches, as an update or (every N updates) a snapshot (Kafka's writeState)."""
        R = WriteShareGroupStateResponse

        def handle(key, part, p, pd, records):
            if pd.partition < 0:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
            cur = part.current.get(key)
            if cur is None:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED)
            if pd.leader_epoch != -1 and cur.fence_leader_epoch > pd.leader_epoch:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.FENCED_LEADER_EPOCH)
            if pd.state_epoch != -1 and cur.fence_state_epoch is not None and cur.fence_state_epoch > pd.state_epoch:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.FENCED_STATE_EPOCH)
            if self._unknown_partition(key):
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in pd.state_batches]
            records.append(self._state_record(
                p, part, key, cur, leader_epoch=pd.leader_epoch, update_leader_epoch=False,
                start_offset=pd.start_offset,
                delivery_complete_count=pd.delivery_complete_count if version >= 1
                else UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
                batches=batches, now_ms=now_ms))
            return R.PartitionResult(partition=pd.partition, error_code=0, error_message=None)

        return self._each_key(req, "write", reply_to, R(results=[]), R.PartitionResult, handle)

    def read_state(self, reply_to, req, version: int, now_ms: int) -> Result:
        """ReadShareGroupState: the stored state; a leader epoch above the one recorded is written
        (Kafka's readStateAndMaybeUpdateLeaderEpoch), fencing the previous leader's writes."""
        R = ReadShareGroupStateResponse

        def handle(key, part, p, pd, records):
            if pd.partition < 0:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
            cur = part.current.get(key)
            if cur is None:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)
            if pd.leader_epoch != -1 and cur.fence_leader_epoch > pd.leader_epoch:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.FENCED_LEADER_EPOCH)
            if self._unknown_partition(key):
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            result = R.PartitionResult(
                partition=pd.partition, error_code=0, error_message=None, state_epoch=cur.state_epoch,
                start_offset=cur.start_offset,
                state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                               for b in cur.batches])
            if pd.leader_epoch != -1 and cur.fence_leader_epoch != pd.leader_epoch:
                records.append(self._state_record(
                    p, part, key, cur, leader_epoch=pd.leader_epoch, update_leader_epoch=True,
                    start_offset=cur.start_offset, delivery_complete_count=cur.delivery_complete_count,
                    batches=(), now_ms=now_ms))
            return result

        return self._each_key(req, "read", reply_to, R(results=[]), R.PartitionResult, handle)

    def read_state_summary(self, reply_to, req, version: int, now_ms: int) -> Result:
        """ReadShareGroupStateSummary: start offset, epochs and (v1) delivery complete count; a key
        never initialized answers the uninitialized values (Kafka's readStateSummary)."""
        R = ReadShareGroupStateSummaryResponse

        def handle(key, part, p, pd, records):
            if pd.partition < 0:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
            if self._unknown_partition(key):
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            cur = part.current.get(key)
            if cur is None:
                return R.PartitionResult(partition=pd.partition, error_code=0, error_message=None,
                                         state_epoch=DEFAULT_STATE_EPOCH, leader_epoch=DEFAULT_LEADER_EPOCH,
                                         start_offset=UNINITIALIZED_START_OFFSET,
                                         delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT)
            return R.PartitionResult(partition=pd.partition, error_code=0, error_message=None,
                                     state_epoch=cur.state_epoch, leader_epoch=cur.leader_epoch,
                                     start_offset=cur.start_offset,
                                     delivery_complete_count=cur.delivery_complete_count)

        return self._each_key(req, "summary", reply_to, R(results=[]), R.PartitionResult, handle)

    def delete_state(self, reply_to, req, version: int, now_ms: int) -> Result:
        """DeleteShareGroupState: a tombstone for each key that has state (Kafka's deleteState)."""
        R = DeleteShareGroupStateResponse

        def handle(key, part, p, pd, records):
            if pd.partition < 0:
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
            if self._unknown_partition(key):
                return _error_result(R.PartitionResult, pd.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if key in part.current:
                records.append(self._emit(p, part, True, key, None))
            return R.PartitionResult(partition=pd.partition, error_code=0, error_message=None)

        return self._each_key(req, "delete", reply_to, R(results=[]), R.PartitionResult, handle)


# ----------------------------------------------------------------------------------------------
# response helpers
# ----------------------------------------------------------------------------------------------

def _error_result(result_cls, partition: int, code: ErrorCode, message: str | None = None):
    return result_cls(partition=partition, error_code=int(code),
                      error_message=MESSAGES.get(code) if message is None else message)


def _set_error(pr, code: ErrorCode, message: str) -> None:
    """Turn a partition result into an error (the schema defaults for the other fields)."""
    fresh = type(pr)(partition=pr.partition, error_code=int(code), error_message=message)
    for name in pr.__slots__:
        setattr(pr, name, getattr(fresh, name))


def _topic_result(response, topic_id: uuid.UUID, partitions: list):
    topic_cls = {
        InitializeShareGroupStateResponse: InitializeShareGroupStateResponse.InitializeStateResult,
        WriteShareGroupStateResponse: WriteShareGroupStateResponse.WriteStateResult,
        ReadShareGroupStateResponse: ReadShareGroupStateResponse.ReadStateResult,
        ReadShareGroupStateSummaryResponse: ReadShareGroupStateSummaryResponse.ReadStateSummaryResult,
        DeleteShareGroupStateResponse: DeleteShareGroupStateResponse.DeleteStateResult,
    }[type(response)]
    return topic_cls(topic_id=topic_id, partitions=partitions)


def _operation_message(response, code: ErrorCode) -> str:
    api = {InitializeShareGroupStateResponse: "initialize", WriteShareGroupStateResponse: "write",
           ReadShareGroupStateResponse: "read", ReadShareGroupStateSummaryResponse: "summary",
           DeleteShareGroupStateResponse: "delete"}.get(type(response), "write")
    return _OPERATION_FAILED[api] + MESSAGES.get(code, code.name)


def error_response(response_cls, req, code: ErrorCode, message: str | None = None):
    """A response giving every partition of ``req`` the error ``code`` (Kafka's
    generateError*Response, also what the handlers answer when the whole request fails)."""
    result_cls = response_cls.PartitionResult
    response = response_cls(results=[])
    response.results = [_topic_result(response, t.topic_id, [
        _error_result(result_cls, pd.partition, code, message) for pd in t.partitions]) for t in req.topics]
    return response
