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

import logging
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from kcompat.coordinator.result import CoordinatorResult
from kcompat.protocol.errors import ErrorCode, coordinator_error_for_append, default_message
from kcompat.protocol.messages.delete_share_group_state import DeleteShareGroupStateResponse
from kcompat.protocol.messages.initialize_share_group_state import InitializeShareGroupStateResponse
from kcompat.protocol.messages.read_share_group_state import ReadShareGroupStateResponse
from kcompat.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryResponse
from kcompat.protocol.messages.write_share_group_state import WriteShareGroupStateResponse
from kcompat.protocol.share_records import ShareUpdateValue
from kcompat.share.state_batches import combine_state_batches
from kcompat.protocol.topic_names import SHARE_GROUP_STATE_TOPIC_NAME as SHARE_GROUP_STATE_TOPIC
from kcompat.share.state_records import (  # noqa: F401 - ShareKey re-exported
    UNINITIALIZED_START_OFFSET, UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    DEFAULT_STATE_EPOCH, DEFAULT_LEADER_EPOCH, UNINITIALIZED_EPOCH, NEGATIVE_PARTITION_ID,
    WRITE_UNINITIALIZED, READ_UNINITIALIZED, OPERATION_FAILED, ShareKey, partition_for,
    RecordFormatError, ShareRecord, encode_key, encode_value, decode_record, ShareState, apply_record,
    snapshot_value, OffsetsTracker,
)

log = logging.getLogger("kcompat.share.coordinator")

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
                    value = snapshot_value(
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
                                                          OPERATION_FAILED[api] + default_message(error))
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
            value = snapshot_value(
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
            value = snapshot_value(
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
                      error_message=default_message(code) if message is None else message)


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
    return OPERATION_FAILED[api] + (default_message(code) or code.name)


def error_response(response_cls, req, code: ErrorCode, message: str | None = None):
    """A response giving every partition of ``req`` the error ``code`` (Kafka's
    generateError*Response, also what the handlers answer when the whole request fails)."""
    result_cls = response_cls.PartitionResult
    response = response_cls(results=[])
    response.results = [_topic_result(response, t.topic_id, [
        _error_result(result_cls, pd.partition, code, message) for pd in t.partitions]) for t in req.topics]
    return response
