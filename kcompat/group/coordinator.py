"""The classic consumer-group coordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup, committed
offsets and the group APIs, with its state in ``__consumer_offsets`` (Kafka's GroupCoordinator and
GroupMetadataManager; ``ClassicGroup`` in the KIP-848-era group-coordinator module).

The coordinator is a state machine without I/O (DESIGN.md sections 2 and 6). Each call takes the
current time and returns a :class:`Result`: records to append to ``__consumer_offsets`` and replies
to send after they are appended. A JoinGroup or SyncGroup may wait: its reply comes in the Result of
a later call or of :meth:`GroupCoordinator.poll`, which fires due timers (session expiry, end of the
join phase, sync timeout, offset expiry).

What changes how, mirroring Kafka's CoordinatorResult with and without record replay:

- Committed offsets change only through :meth:`GroupCoordinator.replay` of offset commit records and
  tombstones, so the offsets in memory are always the fold of the log, the same after
  :meth:`GroupCoordinator.load`. A commit written but not replayed yet is "pending": it is never
  expired, and deleting a group or its offsets writes tombstones for it too.
- Transactional offsets (TxnOffsetCommit, KIP-98/KIP-447) are offset commit records in a
  transactional batch of the producer (:attr:`Record.producer_id`). Replayed, they wait for their
  transaction per producer, invisible to OffsetFetch (which answers UNSTABLE_OFFSET_COMMIT for
  them when asked for stable offsets). The COMMIT or ABORT marker the transaction coordinator
  writes to the partition is the record that ends them: :meth:`GroupCoordinator.complete_txn` live,
  a :class:`TxnMarker` entry when loading. On commit an offset becomes committed unless the
  partition already has a commit from a later record (Kafka compares record offsets); on abort it
  is dropped. A tombstone drops the pending transactional offsets of its partition too, so
  deleting a group or its offsets cannot be undone by a transaction committing later, and pending
  transactional offsets neither expire nor let their group be removed.
- Membership (who waits in a join, heartbeat deadlines, pending member ids) is transient and changes
  directly. The group metadata record (generation, protocol, leader, members with subscription and
  assignment) is written when the leader's SyncGroup completes a rebalance, when a static member
  replaces its member id, and when a group becomes Empty; a group tombstone when it becomes Dead.
  These records describe the state the coordinator already holds, so their replay is a no-op
  (they are recognised by their bytes); loading restores groups from them.
"""

from __future__ import annotations

import enum
import functools
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

from kcompat.group import records as rec
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group, Member, Waiter
from kcompat.group.records import GroupKey, OffsetAndMetadata, OffsetKey, RecordFormatError
from kcompat.group.state import GroupEvent, GroupState, can_rebalance
from kcompat.group.timers import Timers
from kcompat.group.write_errors import coordinator_error, with_error
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.group_records.group_metadata_value import GroupMetadataValue
from kcompat.protocol.messages.delete_groups import DeleteGroupsResponse
from kcompat.protocol.messages.describe_groups import DescribeGroupsResponse
from kcompat.protocol.messages.heartbeat import HeartbeatResponse
from kcompat.protocol.messages.join_group import JoinGroupResponse
from kcompat.protocol.messages.leave_group import LeaveGroupResponse
from kcompat.protocol.messages.list_groups import ListGroupsResponse
from kcompat.protocol.messages.offset_commit import OffsetCommitResponse
from kcompat.protocol.messages.offset_delete import OffsetDeleteResponse
from kcompat.protocol.messages.offset_fetch import OffsetFetchResponse
from kcompat.protocol.messages.sync_group import SyncGroupResponse
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse

log = logging.getLogger("kcompat.group")

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                             GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
                                             GroupState.DEAD)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_OFFSET = -1
GROUP_TYPE_CLASSIC = "classic"
# DescribeGroups v3+ authorized operations without an authorizer: READ(3), DELETE(6), DESCRIBE(8),
# AclEntry.supportedOperations(GROUP) as a bit field.
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@dataclass(frozen=True)
class GroupConfig:
    """Broker configs of the same names (Kafka defaults)."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    num_partitions: int = 50  # offsets.topic.num.partitions


NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass
class Record:
    """One ``__consumer_offsets`` record in Kafka's format. A record with a producer id is a
    transactional offset commit: it goes in a transactional batch of that producer and epoch
    (records of different producers in different batches). ``offset`` is the record's log offset,
    set by whoever appends it before :meth:`GroupCoordinator.replay` (-1: not known, the
    coordinator then takes the next position after the last record it saw in the partition)."""

    partition: int
    key: bytes
    value: bytes | None  # None = tombstone
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    offset: int = -1


class TxnMarker(NamedTuple):
    """A COMMIT/ABORT control record in a partition being loaded (see :meth:`GroupCoordinator.load`)."""

    offset: int
    producer_id: int
    commit: bool


@dataclass
class Result:
    records: list[Record] = field(default_factory=list)  # append these, in order, before any reply
    replies: list[tuple[object, object]] = field(default_factory=list)  # (reply_to, *Response)


class _Api(enum.Enum):
    JOIN = "JoinGroup"
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE = "LeaveGroup"
    COMMIT = "OffsetCommit"
    FETCH = "OffsetFetch"
    DESCRIBE = "DescribeGroups"
    DELETE = "DeleteGroups"
    OFFSET_DELETE = "OffsetDelete"
    TXN_COMMIT = "TxnOffsetCommit"


# Kafka's isValidGroupId: these APIs accept the empty group id (backwards compatibility).
_EMPTY_GROUP_ID_ALLOWED = frozenset({_Api.COMMIT, _Api.FETCH, _Api.DESCRIBE, _Api.DELETE})

# The transaction verification (KIP-890) error a TxnOffsetCommit answers with, as Kafka's
# GroupMetadataManager.maybeConvertOffsetCommitError; the verifier returns what a produce would get.
_TXN_VERIFY_ERRORS = {
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


@functools.lru_cache(maxsize=8192)
def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_string_length(s: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`` (Utils.abs(MIN) = 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % num_partitions


_Positioned = tuple[int, OffsetAndMetadata]  # (log offset of the record, the offset it commits)


class _LoadState:
    """What a partition's log says so far while it is loading: last group value, committed
    offsets, and transactional offsets per producer whose marker has not been read yet
    (GroupMetadataManager.loadGroupsAndOffsets' pendingOffsets)."""

    __slots__ = ("groups", "offsets", "pending", "last_offset")

    def __init__(self) -> None:
        self.groups: dict[str, GroupMetadataValue] = {}
        self.offsets: dict[str, dict[tuple[str, int], _Positioned]] = {}
        self.pending: dict[int, dict[str, dict[tuple[str, int], _Positioned]]] = {}
        self.last_offset = -1

    def position(self, offset: int) -> int:
        if offset < 0:
            offset = self.last_offset + 1
        self.last_offset = max(self.last_offset, offset)
        return offset


class GroupCoordinator:
    def __init__(self, config: GroupConfig, *, partition_exists: Callable[[str, int], bool],
                 new_uuid: Callable[[], str] | None = None,
                 txn_verifier: Callable[[str, int, int, int], int] | None = None) -> None:
        """``txn_verifier(transactional_id, producer_id, producer_epoch, partition)`` checks that
        the ``__consumer_offsets`` partition is in the producer's ongoing transaction before a
        TxnOffsetCommit is written (KIP-890 verification): 0, or the error a produce would get."""
        self.config = config
        self._partition_exists = partition_exists
        self._txn_verifier = txn_verifier
        self._new_uuid = new_uuid if new_uuid is not None else (lambda: str(uuid.uuid4()))
        self._groups: dict[str, Group] = {}
        self._owned: set[int] = set()
        self._loading: dict[int, _LoadState] = {}
        self._timers = Timers()
        self._self_applied: Counter[tuple[int, bytes, bytes | None]] = Counter()
        self._deferred_records: list[Record] = []
        self._deferred_replies: list[tuple[object, object]] = []
        self._active = True
        self._now = 0
        self._records: list[Record] = []
        self._replies: list[tuple[object, object]] = []
        # (partition, producer id) -> groups with transactional offsets of that producer there
        # (Kafka's openGroupsForProducer); a hint, the groups' pending_txn is the truth
        self._open_txns: dict[tuple[int, int], set[str]] = {}
        self._positions: dict[int, int] = {}  # last log offset replayed, per partition

    # ------------------------------------------------------------------------------------------
    # partitions of __consumer_offsets
    # ------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def begin_loading(self, partition: int) -> None:
        """Requests for groups of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS until :meth:`load`."""
        if partition in self._owned:
            self._defer(self.unload(partition))
        self._loading.setdefault(partition, _LoadState())

    def load(self, partition: int, records: Iterable, now_ms: int) -> None:
        """Replay the partition's log in order, then own the partition: groups come back Empty or
        Stable with their members (heartbeat deadlines from ``now_ms``).

        Each entry is one stored record: ``(offset, key, value)`` for a record of a
        non-transactional batch, ``(offset, key, value, producer_id)`` for one of a transactional
        batch (a TxnOffsetCommit), or a :class:`TxnMarker` for a COMMIT/ABORT control record. A
        transaction whose marker is not in the log stays pending (its coordinator sends the
        marker again)."""
        if partition in self._owned:
            self._defer(self.unload(partition))
        state = self._loading.setdefault(partition, _LoadState())
        for entry in records:
            if isinstance(entry, TxnMarker):
                state.position(entry.offset)
                self._apply_loading_marker(state, entry.producer_id, entry.commit)
            elif len(entry) == 4:
                offset, key, value, producer_id = entry
                self._apply_loading(state, key, value, state.position(offset), producer_id)
            else:
                offset, key, value = entry
                self._apply_loading(state, key, value, state.position(offset), NO_PRODUCER_ID)
        self._begin(None)
        self._now = now_ms
        del self._loading[partition]
        self._owned.add(partition)
        self._positions[partition] = state.last_offset
        self._ensure_expiry_timer(now_ms)
        pending_by_group: dict[str, dict[int, dict[tuple[str, int], _Positioned]]] = {}
        for producer_id, by_group in state.pending.items():
            for group_id, pending in by_group.items():
                if pending:
                    pending_by_group.setdefault(group_id, {})[producer_id] = pending
        n_groups = n_offsets = n_pending = 0
        loaded: list[Group] = []
        for group_id, value in state.groups.items():
            group = self._group_from_value(group_id, partition, value)
            self._set_loaded_offsets(group, state.offsets.pop(group_id, {}), pending_by_group.pop(group_id, {}))
            self._groups[group_id] = group
            self._on_group_loaded(group)
            loaded.append(group)
        # offsets without group metadata: groups using Kafka only for offsets
        for group_id in list(state.offsets) + [g for g in pending_by_group if g not in state.offsets]:
            offsets = state.offsets.get(group_id, {})
            pending = pending_by_group.get(group_id, {})
            if offsets or pending:
                group = Group(group_id, partition, EMPTY, now_ms)
                self._set_loaded_offsets(group, offsets, pending)
                self._groups[group_id] = group
                loaded.append(group)
        for group in loaded:
            n_groups += 1
            n_offsets += len(group.offsets)
            for producer_id, pending in group.pending_txn.items():
                self._open_txns.setdefault((partition, producer_id), set()).add(group.group_id)
                n_pending += len(pending)
        log.info("loaded __consumer_offsets-%d: %d groups, %d committed offsets, %d transactional offsets pending",
                 partition, n_groups, n_offsets, n_pending)
        self._defer(self._end(None))

    @staticmethod
    def _set_loaded_offsets(group: Group, offsets: dict[tuple[str, int], _Positioned],
                            pending: dict[int, dict[tuple[str, int], _Positioned]]) -> None:
        group.offsets = {tp: om for tp, (_, om) in offsets.items()}
        group.offset_positions = {tp: position for tp, (position, _) in offsets.items()}
        group.pending_txn = pending

    def unload(self, partition: int) -> Result:
        """Give the partition up: its groups are dropped and waiting requests get NOT_COORDINATOR."""
        self._begin(None)
        self._loading.pop(partition, None)
        self._owned.discard(partition)
        for group in [g for g in self._groups.values() if g.partition == partition]:
            self._unload_group(group)
        for k in [k for k in self._self_applied if k[0] == partition]:
            del self._self_applied[k]
        for k in [k for k in self._open_txns if k[0] == partition]:
            del self._open_txns[k]
        self._positions.pop(partition, None)
        return self._end(None)

    def write_failed(self, result: Result, failed: list[Record], error_code: int, now_ms: int) -> Result:
        """``failed``, records of ``result``, could not be appended or replicated (``error_code``:
        the append error, e.g. NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND); they will not be replayed. As Kafka's coordinator after
        a failed acks=-1 write: offset commits stop being pending (failPendingOffsetWrite; the
        committed offsets never changed); a group whose metadata record of its current generation
        was lost resets its assignment and rebalances (the SyncGroup store callback). Returns the
        replies to send instead of ``result``'s: each with the coordinator error for
        ``error_code`` where it said NONE (:mod:`kcompat.group.write_errors`)."""
        self._begin(now_ms)
        error = coordinator_error(error_code)
        for r in failed:
            ident = (r.partition, r.key, r.value)
            n = self._self_applied.get(ident)
            if n:
                if n == 1:
                    del self._self_applied[ident]
                else:
                    self._self_applied[ident] = n - 1
                if r.value is not None:
                    self._metadata_not_stored(r, error)
                continue
            try:
                key = rec.parse_key(r.key)
            except RecordFormatError:
                continue
            group = self._groups.get(key.group) if isinstance(key, OffsetKey) else None
            if group is not None and group.partition == r.partition:
                tp = (key.topic, key.partition)
                n = group.pending_commits.get(tp, 0)
                if n > 1:
                    group.pending_commits[tp] = n - 1
                elif n == 1:
                    del group.pending_commits[tp]
                self._maybe_drop_offsets_only_group(group)
        for reply_to, response in result.replies:
            self._replies.append((reply_to, with_error(response, error)))
        return self._end(now_ms)

    def _metadata_not_stored(self, record: Record, error: ErrorCode) -> None:
        try:
            key = rec.parse_key(record.key)
            value = rec.parse_group_value(record.value) if isinstance(key, GroupKey) else None
        except RecordFormatError:
            return
        group = self._groups.get(key.group) if value is not None else None
        if (group is None or group.partition != record.partition or group.generation_id != value.generation
                or group.state not in (STABLE, COMPLETING) or not group.members):
            return
        log.warning("group %s: could not store generation %d (%s); rebalancing", group.group_id,
                    group.generation_id, error.name)
        for member in group.members.values():
            member.assignment = b""
        self._maybe_prepare_rebalance(group, f"error {error.name} when storing the group metadata")

    def shutdown(self) -> Result:
        """Answer everything pending with NOT_COORDINATOR; later requests get COORDINATOR_NOT_AVAILABLE."""
        self._begin(None)
        for group in list(self._groups.values()):
            self._unload_group(group)
        self._owned.clear()
        self._loading.clear()
        self._self_applied.clear()
        self._open_txns.clear()
        self._positions.clear()
        self._timers = Timers()
        self._active = False
        return self._end(None)

    # ------------------------------------------------------------------------------------------
    # timers and results
    # ------------------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self._timers.next_deadline()

    def poll(self, now_ms: int) -> Result:
        """Fire every timer due at ``now_ms``."""
        self._begin(now_ms)
        return self._end(now_ms)

    def _begin(self, now_ms: int | None) -> None:
        self._records = self._deferred_records
        self._replies = self._deferred_replies
        self._deferred_records = []
        self._deferred_replies = []
        if now_ms is not None:
            self._now = now_ms
            self._ensure_expiry_timer(now_ms)
            self._fire_due(now_ms)

    def _end(self, now_ms: int | None) -> Result:
        if now_ms is not None:
            self._fire_due(now_ms)  # timers scheduled with no delay while handling the request
        result = Result(self._records, self._replies)
        self._records = []
        self._replies = []
        return result

    def _defer(self, result: Result) -> None:
        self._deferred_records.extend(result.records)
        self._deferred_replies.extend(result.replies)

    def _ensure_expiry_timer(self, now_ms: int) -> None:
        if self._active and ("expire", None) not in self._timers:
            # Kafka schedules the first offset expiry check with no delay, then every interval
            self._timers.schedule(("expire", None), now_ms)

    def _fire_due(self, now_ms: int) -> None:
        while True:
            due = self._timers.pop_due(now_ms)
            if due is None:
                return
            key, payload = due
            kind = key[0]
            if kind == "hb":
                self._on_heartbeat_expired(key[1], key[2])
            elif kind == "pending":
                self._on_pending_member_expired(key[1], key[2])
            elif kind == "join":
                self._on_join_timer(key[1], payload)
            elif kind == "sync":
                self._on_sync_expired(key[1], payload)
            elif kind == "expire":
                self._expire_offsets(now_ms)
                interval = max(1, self.config.offsets_retention_check_interval_ms)
                self._timers.schedule(("expire", None), now_ms + interval)

    def _reply(self, waiter: Waiter | None, response: object) -> None:
        if waiter is not None:
            self._replies.append((waiter[0], response))

    def _emit(self, partition: int, key: bytes, value: bytes | None, *, applied: bool) -> None:
        """Add a record to the Result; ``applied`` marks one whose effect is already in memory."""
        self._records.append(Record(partition, key, value))
        if applied:
            self._self_applied[(partition, key, value)] += 1

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._timers.schedule(("hb", group.group_id, member.member_id), self._now + timeout)

    # ------------------------------------------------------------------------------------------
    # request validation
    # ------------------------------------------------------------------------------------------

    def _check_group(self, group_id: str | None, api: _Api) -> ErrorCode | None:
        """Kafka's validateGroupStatus."""
        if group_id is None or (group_id == "" and api not in _EMPTY_GROUP_ID_ALLOWED):
            return ErrorCode.INVALID_GROUP_ID
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember: a static instance must map to this member id, and the
        member must exist."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("group %s: member %s of static instance %s is fenced by %s",
                         group.group_id, member_id, instance_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id, self.partition_for(group_id), EMPTY, self._now)
        self._groups[group_id] = group
        return group

    # ------------------------------------------------------------------------------------------
    # responses
    # ------------------------------------------------------------------------------------------

    @staticmethod
    def _join_response(version: int, error: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID, *,
                       generation: int = NO_GENERATION, protocol_type: str | None = None,
                       protocol_name: str | None = None, leader: str | None = None,
                       members: Iterable[tuple[str, str | None, bytes]] = (),
                       skip_assignment: bool = False) -> JoinGroupResponse:
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=int(error), generation_id=generation,
            protocol_type=protocol_type,
            protocol_name=protocol_name if version >= 7 else (protocol_name or ""),
            leader=leader or "", skip_assignment=skip_assignment, member_id=member_id,
            members=[JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                     for m, i, md in members])

    def _join_success(self, group: Group, member: Member, version: int, *, with_members: bool,
                      leader: str | None = None, skip_assignment: bool = False) -> JoinGroupResponse:
        return self._join_response(
            version, ErrorCode.NONE, member.member_id, generation=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
            leader=group.leader_id if leader is None else leader,
            members=group.current_member_metadata() if with_members else (), skip_assignment=skip_assignment)

    @staticmethod
    def _sync_response(error: ErrorCode, protocol_type: str | None = None, protocol_name: str | None = None,
                       assignment: bytes = b"") -> SyncGroupResponse:
        return SyncGroupResponse(throttle_time_ms=0, error_code=int(error), protocol_type=protocol_type,
                                 protocol_name=protocol_name, assignment=assignment)

    def _reply_join_error(self, waiter: Waiter, error: ErrorCode, member_id: str) -> None:
        self._reply(waiter, self._join_response(waiter[1], error, member_id))

    # ------------------------------------------------------------------------------------------
    # JoinGroup
    # ------------------------------------------------------------------------------------------

    def join_group(self, reply_to, req, version: int, client_id: str, client_host: str, now_ms: int) -> Result:
        self._begin(now_ms)
        waiter = (reply_to, version)
        member_id = req.member_id or UNKNOWN_MEMBER_ID
        instance_id = req.group_instance_id if version >= 5 else None
        # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout
        rebalance_timeout = req.session_timeout_ms if version == 0 else req.rebalance_timeout_ms
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        reason = req.reason if version >= 8 else None
        error = self._check_group(req.group_id, _Api.JOIN)
        if error is not None:
            self._reply_join_error(waiter, error, member_id)
        elif not (self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms):
            self._reply_join_error(waiter, ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        else:
            self._join(waiter, req.group_id, member_id, instance_id, client_id, client_host, rebalance_timeout,
                       req.session_timeout_ms, req.protocol_type, protocols, reason or "not provided")
        return self._end(now_ms)

    def _join(self, waiter: Waiter, group_id: str, member_id: str, instance_id: str | None, client_id: str,
              client_host: str, rebalance_timeout: int, session_timeout: int, protocol_type: str,
              protocols: list[tuple[str, bytes]], reason: str) -> None:
        unknown = member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(group_id)
        if group is None:
            if not unknown:  # a member id for a group that does not exist
                self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                return
            group = self._new_group(group_id)
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):
                self._remove_member(group, member_id)
            group.pending_members.discard(member_id)
            self._reply_join_error(waiter, ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        elif unknown:
            self._join_new_member(group, waiter, instance_id, client_id, client_host, rebalance_timeout,
                                  session_timeout, protocol_type, protocols, reason)
        else:
            self._join_existing_member(group, waiter, member_id, instance_id, client_id, client_host,
                                       rebalance_timeout, session_timeout, protocol_type, protocols, reason)
        if group.is_(PREPARING):
            self._maybe_complete_join(group)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """Kafka's acceptJoiningMember (group.max.size)."""
        max_size = self.config.max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < max_size
        return group.has(member_id) or group.size < max_size

    def _join_new_member(self, group: Group, waiter: Waiter, instance_id: str | None, client_id: str,
                         client_host: str, rebalance_timeout: int, session_timeout: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], reason: str) -> None:
        names = list(dict.fromkeys(name for name, _ in protocols))
        if group.is_(DEAD):
            self._reply_join_error(waiter, ErrorCode.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID)
            return
        if not group.supports_protocols(protocol_type, names):
            self._reply_join_error(waiter, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID)
            return
        new_id = f"{instance_id if instance_id is not None else client_id}-{self._new_uuid()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                log.info("group %s: static member %s rejoins in state %s, member id %s replaces %s",
                         group.group_id, instance_id, group.state, new_id, old_id)
                self._update_static_member_and_rebalance(group, waiter, instance_id, old_id, new_id,
                                                         rebalance_timeout, session_timeout, protocols, reason)
            else:
                self._add_member_and_rebalance(group, waiter, new_id, instance_id, client_id, client_host,
                                               rebalance_timeout, session_timeout, protocol_type, protocols, reason)
        elif waiter[1] >= 4:
            # KIP-394: hand out a member id and ask the client to join again with it
            group.pending_members.add(new_id)
            self._timers.schedule(("pending", group.group_id, new_id), self._now + session_timeout)
            self._reply_join_error(waiter, ErrorCode.MEMBER_ID_REQUIRED, new_id)
        else:
            self._add_member_and_rebalance(group, waiter, new_id, None, client_id, client_host,
                                           rebalance_timeout, session_timeout, protocol_type, protocols, reason)

    def _join_existing_member(self, group: Group, waiter: Waiter, member_id: str, instance_id: str | None,
                              client_id: str, client_host: str, rebalance_timeout: int, session_timeout: int,
                              protocol_type: str, protocols: list[tuple[str, bytes]], reason: str) -> None:
        names = list(dict.fromkeys(name for name, _ in protocols))
        if group.is_(DEAD):
            self._reply_join_error(waiter, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
            return
        if not group.supports_protocols(protocol_type, names):
            self._reply_join_error(waiter, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            return
        if member_id in group.pending_members:
            if instance_id is not None:
                # Kafka throws IllegalStateException: pending ids are only given to dynamic members
                self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                return
            self._timers.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, waiter, member_id, None, client_id, client_host,
                                           rebalance_timeout, session_timeout, protocol_type, protocols, reason)
            return
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            self._reply_join_error(waiter, error, member_id)
            return
        member = group.members[member_id]
        if group.is_(PREPARING):
            self._update_member_and_rebalance(group, member, waiter, rebalance_timeout, session_timeout, protocols,
                                              f"member {member_id} joining during PreparingRebalance; reason: {reason}")
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # the member lost the JoinGroup response: send the current generation again
                self._reply(waiter, self._join_success(group, member, waiter[1],
                                                       with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(
                    group, member, waiter, rebalance_timeout, session_timeout, protocols,
                    f"member {member_id} changed its metadata; reason: {reason}")
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # a leader's JoinGroup always rebalances (e.g. topic metadata changed)
                self._update_member_and_rebalance(
                    group, member, waiter, rebalance_timeout, session_timeout, protocols,
                    f"member {member_id} rejoining Stable group; reason: {reason}")
            else:
                self._reply(waiter, self._join_success(group, member, waiter[1], with_members=False))
        else:
            log.warning("group %s: member %s rejoins in unexpected state %s", group.group_id, member_id, group.state)
            self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _add_member_and_rebalance(self, group: Group, waiter: Waiter, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout: int, session_timeout: int,
                                  protocol_type: str, protocols: list[tuple[str, bytes]], reason: str) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                        protocol_type, protocols)
        member.is_new = True
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, waiter)
        # New members cannot heartbeat before their join completes; expire a JoinGroup that never
        # completes after NewMemberJoinTimeoutMs so defunct members do not stall the rebalance.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id} with group instance id "
                                             f"{instance_id}; reason: {reason}")

    def _update_member_and_rebalance(self, group: Group, member: Member, waiter: Waiter, rebalance_timeout: int,
                                     session_timeout: int, protocols: list[tuple[str, bytes]], reason: str) -> None:
        self._supersede_join_waiter(group, member)
        group.update_member(member, protocols, waiter)
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        self._maybe_prepare_rebalance(group, reason)

    def _supersede_join_waiter(self, group: Group, member: Member) -> None:
        """A member joining again while an earlier JoinGroup of it still waits: answer the earlier
        one (REBALANCE_IN_PROGRESS makes a client that still waits for it just join again) so no
        connection is left with a request that never completes."""
        old = group.take_join_waiter(member)
        if old is not None:
            self._reply_join_error(old, ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)

    def _update_static_member_and_rebalance(self, group: Group, waiter: Waiter, instance_id: str, old_id: str,
                                            new_id: str, rebalance_timeout: int, session_timeout: int,
                                            protocols: list[tuple[str, bytes]], reason: str) -> None:
        """KIP-345: a static member restarted with an unknown member id takes over its instance."""
        current_leader = group.leader_id
        old = group.members[old_id]
        # fence whoever still waits under the old member id
        join_waiter = group.take_join_waiter(old)
        if join_waiter is not None:
            self._reply_join_error(join_waiter, ErrorCode.FENCED_INSTANCE_ID, old_id)
        sync_waiter = group.take_sync_waiter(old)
        if sync_waiter is not None:
            self._reply(sync_waiter, self._sync_response(ErrorCode.FENCED_INSTANCE_ID))
        self._timers.cancel(("hb", group.group_id, old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        group.update_member(member, protocols, waiter)
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # no rebalance: persist the new member id and hand back the current generation
                group.take_join_waiter(member)
                self._store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                if waiter[1] >= 9:
                    # KIP-814: tell a static leader it leads, but that it must skip the assignment
                    is_leader = group.is_leader(new_id)
                    self._reply(waiter, self._join_success(group, member, waiter[1], with_members=is_leader,
                                                           skip_assignment=is_leader))
                else:
                    # Older clients: return the old leader id so that a rejoining leader does not
                    # compute an assignment a Stable group would ignore.
                    self._reply(waiter, self._join_success(group, member, waiter[1], with_members=False,
                                                           leader=current_leader or ""))
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} rejoined with other protocols; "
                                                     f"reason: {reason}")
        elif group.is_(COMPLETING):
            self._maybe_prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance; "
                                                 f"reason: {reason}")
        elif not group.is_(PREPARING):
            log.error("group %s: static member %s rejoined in state %s", group.group_id, instance_id, group.state)
            group.take_join_waiter(member)
            self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID)

    # ------------------------------------------------------------------------------------------
    # rebalance
    # ------------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._timers.cancel(("sync", group.group_id))
        initial = group.is_(EMPTY)
        if initial:
            # InitialDelayedJoin: wait group.initial.rebalance.delay.ms, longer while members keep
            # arriving, but no longer in total than the rebalance timeout
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._timers.schedule(("join", group.group_id), self._now + delay, ("initial", delay, remaining))
        else:
            self._timers.schedule(("join", group.group_id), self._now + group.rebalance_timeout_ms(), ("join",))
        old_state = group.state
        group.transition(GroupEvent.PREPARE_REBALANCE, self._now)
        log.info("group %s: preparing to rebalance in state %s with old generation %d (__consumer_offsets-%d) "
                 "(reason: %s)", group.group_id, old_state, group.generation_id, group.partition, reason)
        if not initial:
            self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        """DelayedJoin.tryComplete: end the join phase once every member rejoined (never early for
        the initial delayed join)."""
        if not group.is_(PREPARING) or not group.has_all_members_joined():
            return
        timer = self._timers.get(("join", group.group_id))
        if timer is None or timer[1][0] == "join":
            self._complete_join(group)

    def _on_join_timer(self, group_id: str, payload: tuple) -> None:
        group = self._groups.get(group_id)
        if group is None or not group.is_(PREPARING):
            return
        if payload[0] == "initial":
            _, delay, remaining = payload
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                new_remaining = max(remaining - delay, 0)
                self._timers.schedule(("join", group_id), self._now + new_delay, ("initial", new_delay, new_remaining))
                return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, start the next
        generation and answer every waiting JoinGroup (the leader gets all members' metadata)."""
        self._timers.cancel(("join", group.group_id))
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        if gone:
            log.info("group %s: removing members that did not rejoin: %s", group.group_id,
                     [m.member_id for m in gone])
            for m in gone:
                self._answer_removed_member(group, m)
                self._remove_member(group, m.member_id)
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that did not rejoin remain: wait for them (or their session expiry)
            log.error("group %s: cannot complete the rebalance because no members rejoined", group.group_id)
            self._timers.schedule(("join", group.group_id), self._now + group.rebalance_timeout_ms(), ("join",))
            return
        group.init_next_generation(self._now)
        if group.is_(EMPTY):
            log.info("group %s with generation %d is now empty (__consumer_offsets-%d)", group.group_id,
                     group.generation_id, group.partition)
            self._store_group(group, {})
            return
        log.info("group %s: stabilized generation %d (__consumer_offsets-%d) with %d members, protocol %s",
                 group.group_id, group.generation_id, group.partition, group.size, group.protocol_name)
        for member in group.members.values():
            waiter = group.take_join_waiter(member)
            if waiter is not None:
                self._reply(waiter, self._join_success(group, member, waiter[1],
                                                       with_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._timers.schedule(("sync", group.group_id), self._now + group.rebalance_timeout_ms(), group.generation_id)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            waiter = group.take_sync_waiter(member)
            if waiter is not None:
                self._reply(waiter, self._sync_response(error, group.protocol_type if ok else None,
                                                        group.protocol_name if ok else None, member.assignment))
                # the session restarts once the member has its assignment
                self._schedule_heartbeat(group, member)

    def _store_group(self, group: Group, assignment: dict[str, bytes]) -> None:
        """Write the group metadata record (GroupMetadataManager.storeGroup)."""
        members = [GroupMetadataValue.MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name), assignment=assignment[m.member_id])
            for m in group.members.values()]
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=-1 if group.state_timestamp is None else group.state_timestamp,
            members=members)
        self._emit(group.partition, rec.group_metadata_key(group.group_id), rec.group_metadata_value(value),
                   applied=True)

    def _remove_member(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        self._timers.cancel(("hb", group.group_id, member_id))

    def _answer_removed_member(self, group: Group, member: Member) -> None:
        """A member leaving the group while a JoinGroup or SyncGroup of it waits: answer it with
        UNKNOWN_MEMBER_ID (Kafka does so for the JoinGroup, which a new member may have pending)."""
        waiter = group.take_join_waiter(member)
        if waiter is not None:
            self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID)
        waiter = group.take_sync_waiter(member)
        if waiter is not None:
            self._reply(waiter, self._sync_response(ErrorCode.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        self._answer_removed_member(group, member)
        self._remove_member(group, member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self._maybe_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self._timers.cancel(("pending", group.group_id, member_id))
        if group.is_(PREPARING):
            self._maybe_complete_join(group)

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is None or group.is_(DEAD):
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s failed (session timeout), removing it", group_id, member_id)
        self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    def _on_pending_member_expired(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is not None and member_id in group.pending_members:
            log.info("group %s: pending member %s removed after session timeout", group_id, member_id)
            self._remove_pending_member_and_update_group(group, member_id)

    def _on_sync_expired(self, group_id: str, generation: int) -> None:
        group = self._groups.get(group_id)
        if group is None or generation != group.generation_id:
            return
        if group.state in (COMPLETING, STABLE) and group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                self._remove_member(group, member_id)
            self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _on_group_loaded(self, group: Group) -> None:
        if group.size > self.config.max_size:
            self._prepare_rebalance(group, f"freshly-loaded group is over capacity ({self.config.max_size}); "
                                           "rebalancing to give consumers a chance to commit offsets")
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    # ------------------------------------------------------------------------------------------
    # SyncGroup
    # ------------------------------------------------------------------------------------------

    def sync_group(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        waiter = (reply_to, version)
        instance_id = req.group_instance_id if version >= 3 else None
        protocol_type = req.protocol_type if version >= 5 else None
        protocol_name = req.protocol_name if version >= 5 else None
        if version >= 5 and (protocol_type is None or protocol_name is None):
            # from v5 both are mandatory (SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent)
            self._reply(waiter, self._sync_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return self._end(now_ms)
        error = self._check_group(req.group_id, _Api.SYNC)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance was lost with the coordinator: make the member join again right here
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS from SyncGroup)
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is None:
            group = self._groups.get(req.group_id)
            if group is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                error = self._sync(group, waiter, req, instance_id, protocol_type, protocol_name)
        if error is not None:
            self._reply(waiter, self._sync_response(error))
        return self._end(now_ms)

    def _sync(self, group: Group, waiter: Waiter, req, instance_id: str | None, protocol_type: str | None,
              protocol_name: str | None) -> ErrorCode | None:
        member_id = req.member_id
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members[member_id]
        if group.is_(STABLE):
            self._mark_synced(group, member_id)
            self._reply(waiter, self._sync_response(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                                                    member.assignment))
            self._schedule_heartbeat(group, member)
            return None
        # CompletingRebalance: wait for the leader's assignment
        previous = group.take_sync_waiter(member)
        if previous is not None:
            self._reply(previous, self._sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        self._mark_synced(group, member_id)
        if group.is_leader(member_id):
            log.info("group %s: assignment received from leader %s for generation %d (%d members, %d static)",
                     group.group_id, member_id, group.generation_id, group.size, len(group.static_members))
            given = {a.member_id: bytes(a.assignment) if a.assignment is not None else b"" for a in req.assignments}
            missing = [m for m in group.members if m not in given]
            if missing:
                log.warning("group %s: empty assignment for members %s in generation %d", group.group_id, missing,
                            group.generation_id)
            assignment = {m: given.get(m, b"") for m in group.members}
            self._store_group(group, assignment)
            for m in group.members.values():
                m.assignment = assignment[m.member_id]
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition(GroupEvent.ASSIGNMENT_STORED, self._now)
        return None

    def _mark_synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel(("sync", group.group_id))

    # ------------------------------------------------------------------------------------------
    # Heartbeat and LeaveGroup
    # ------------------------------------------------------------------------------------------

    def heartbeat(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        instance_id = req.group_instance_id if version >= 3 else None
        error = self._check_group(req.group_id, _Api.HEARTBEAT)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.NONE  # the group is still loading: answer blindly, as Kafka
        elif error is None:
            error = self._heartbeat(req.group_id, req.member_id, instance_id, req.generation_id)
        self._reply((reply_to, version), HeartbeatResponse(throttle_time_ms=0, error_code=int(error)))
        return self._end(now_ms)

    def _heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else ErrorCode.NONE

    def leave_group(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        if version >= 3:
            leaving = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in req.members]
        else:
            leaving = [(req.member_id, None, None)]
        top = ErrorCode.NONE
        results: list[tuple[str, str | None, ErrorCode]] = []
        error = self._check_group(req.group_id, _Api.LEAVE)
        group = self._groups.get(req.group_id) if error is None else None
        if error is not None:
            top = error
        elif group is None:
            results = [(mid, iid, ErrorCode.UNKNOWN_MEMBER_ID) for mid, iid, _ in leaving]
        elif group.is_(DEAD):
            top = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            for member_id, instance_id, reason in leaving:
                results.append((member_id, instance_id, self._leave_one(group, member_id, instance_id, reason)))
        if version >= 3:
            response = LeaveGroupResponse(throttle_time_ms=0, error_code=int(top), members=[
                LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=int(code))
                for mid, iid, code in results])
        else:
            # before v3 one member, one error: the group error, else the member's
            code = top if top != ErrorCode.NONE else next((c for _, _, c in results if c != ErrorCode.NONE),
                                                          ErrorCode.NONE)
            response = LeaveGroupResponse(throttle_time_ms=0, error_code=int(code))
        self._reply((reply_to, version), response)
        return self._end(now_ms)

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None, reason: str | None) -> ErrorCode:
        reason = reason or "not provided"
        if member_id == UNKNOWN_MEMBER_ID:
            # administrative removal of a static member by its group instance id
            current = group.static_members.get(instance_id) if instance_id is not None else None
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._leave_member(group, current, reason)
            return ErrorCode.NONE
        if member_id in group.pending_members:
            self._remove_pending_member_and_update_group(group, member_id)
            log.info("group %s: pending member %s left; reason: %s", group.group_id, member_id, reason)
            return ErrorCode.NONE
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        self._leave_member(group, member_id, reason)
        return ErrorCode.NONE

    def _leave_member(self, group: Group, member_id: str, reason: str) -> None:
        log.info("group %s: member %s left through LeaveGroup; reason: %s", group.group_id, member_id, reason)
        self._remove_member_and_update_group(group, group.members[member_id],
                                             f"removing member {member_id} on LeaveGroup; reason: {reason}")

    # ------------------------------------------------------------------------------------------
    # OffsetCommit and OffsetFetch
    # ------------------------------------------------------------------------------------------

    def offset_commit(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        generation = req.generation_id_or_member_epoch if version >= 1 else NO_GENERATION
        member_id = (req.member_id or UNKNOWN_MEMBER_ID) if version >= 1 else UNKNOWN_MEMBER_ID
        instance_id = req.group_instance_id if version >= 7 else None
        retention = req.retention_time_ms if 2 <= version <= 4 else -1
        codes: list[list[ErrorCode | None]] = []
        valid = []
        for ti, topic in enumerate(req.topics):
            row: list[ErrorCode | None] = []
            for pi, p in enumerate(topic.partitions):
                if self._partition_exists(topic.name, p.partition_index):
                    row.append(None)
                    valid.append((ti, pi, topic.name, p))
                else:
                    row.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            codes.append(row)
        if valid:
            error, group = self._validate_commit(req.group_id, generation, member_id, instance_id, version)
            if error is not None:
                for ti, pi, _, _ in valid:
                    codes[ti][pi] = error
            else:
                self._commit(req.group_id, group, member_id, valid, codes, version, retention)
        response = OffsetCommitResponse(throttle_time_ms=0, topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(name=topic.name, partitions=[
                OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                                   error_code=int(codes[ti][pi]))
                for pi, p in enumerate(topic.partitions)])
            for ti, topic in enumerate(req.topics)])
        self._reply((reply_to, version), response)
        return self._end(now_ms)

    def _validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                         version: int) -> tuple[ErrorCode | None, Group | None]:
        """ClassicGroup.validateOffsetCommit; (None, None) means a commit that creates the group."""
        error = self._check_group(group_id, _Api.COMMIT)
        if error is not None:
            return error, None
        group = self._groups.get(group_id)
        if group is None:
            if generation < 0:
                return None, None  # a group using Kafka only to store offsets
            # OffsetCommit v9+ says so; older versions keep ILLEGAL_GENERATION
            return (ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION), None
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if generation < 0 and group.is_(EMPTY):
            return None, group
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is not None:
                return error, None
            if generation != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION, None
        elif not group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if group.is_(COMPLETING):
            # the member has its new generation but not yet its assignment
            return ErrorCode.REBALANCE_IN_PROGRESS, None
        return None, group

    def _commit(self, group_id: str, group: Group | None, member_id: str, valid, codes, version: int,
                retention: int) -> None:
        if group is not None and group.state in (STABLE, PREPARING) and group.has(member_id):
            # a commit is as good as a heartbeat (PreparingRebalance still accepts commits: the
            # member learns of the rebalance from its next heartbeat)
            self._schedule_heartbeat(group, group.members[member_id])
        now = self._now
        expire = None if retention == -1 else now + retention
        writes = []
        for ti, pi, topic, p in valid:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if java_string_length(metadata) > self.config.offset_metadata_max_bytes:
                codes[ti][pi] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            codes[ti][pi] = ErrorCode.NONE
            commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now
            epoch = p.committed_leader_epoch if version >= 6 else rec.NO_LEADER_EPOCH
            writes.append((topic, p.partition_index, OffsetAndMetadata(p.committed_offset, epoch, metadata,
                                                                       commit_ts, expire)))
        if not writes:
            return
        if group is None:
            group = self._new_group(group_id)
        for topic, partition, om in writes:
            group.pending_commits[(topic, partition)] += 1
            self._emit(group.partition, rec.offset_commit_key(group_id, topic, partition),
                       rec.offset_commit_value(om), applied=False)

    # ------------------------------------------------------------------------------------------
    # TxnOffsetCommit and the end of transactions
    # ------------------------------------------------------------------------------------------

    def txn_offset_commit(self, reply_to, req, version: int, now_ms: int) -> Result:
        """TxnOffsetCommit 0-4: offsets committed as part of the producer's transaction
        (``send_offsets_to_transaction``). The records go in a transactional batch of the
        producer; they become visible when the transaction commits (:meth:`complete_txn`)."""
        self._begin(now_ms)
        # v3+ (KIP-447) carry the consumer's group metadata; older versions none
        generation = req.generation_id if version >= 3 else NO_GENERATION
        member_id = (req.member_id or UNKNOWN_MEMBER_ID) if version >= 3 else UNKNOWN_MEMBER_ID
        instance_id = req.group_instance_id if version >= 3 else None
        codes: list[list[ErrorCode | None]] = []
        valid = []
        for ti, topic in enumerate(req.topics):
            row: list[ErrorCode | None] = []
            for pi, p in enumerate(topic.partitions):
                if self._partition_exists(topic.name, p.partition_index):
                    row.append(None)
                    valid.append((ti, pi, topic.name, p))
                else:
                    row.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            codes.append(row)
        if valid:
            error = self._check_group(req.group_id, _Api.TXN_COMMIT)
            group = None
            if error is None:
                error = self._verify_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                         self.partition_for(req.group_id))
            if error is None:
                error, group = self._validate_txn_commit(req.group_id, generation, member_id, instance_id)
            if error is not None:
                for ti, pi, _, _ in valid:
                    codes[ti][pi] = error
            else:
                self._txn_commit(req.group_id, group, req.producer_id, req.producer_epoch, valid, codes, version)
        R = TxnOffsetCommitResponse
        self._reply((reply_to, version), R(throttle_time_ms=0, topics=[
            R.TxnOffsetCommitResponseTopic(name=topic.name, partitions=[
                R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(codes[ti][pi]))
                for pi, p in enumerate(topic.partitions)])
            for ti, topic in enumerate(req.topics)]))
        return self._end(now_ms)

    def _verify_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    partition: int) -> ErrorCode | None:
        if self._txn_verifier is None:
            return None
        code = self._txn_verifier(transactional_id, producer_id, producer_epoch, partition)
        if not code:
            return None
        error = ErrorCode(code)
        return _TXN_VERIFY_ERRORS.get(error, error)

    def _validate_txn_commit(self, group_id: str, generation: int, member_id: str,
                             instance_id: str | None) -> tuple[ErrorCode | None, Group | None]:
        """ClassicGroup.validateOffsetCommit for a transactional commit (Kafka's
        OffsetMetadataManager.validateTransactionalOffsetCommit): the generation, member id and
        instance id are checked only when one of them is given (KIP-447, v3+); no member
        requirement otherwise, and no REBALANCE_IN_PROGRESS. (None, None) creates the group."""
        group = self._groups.get(group_id)
        if group is None:
            return (None, None) if generation < 0 else (ErrorCode.ILLEGAL_GENERATION, None)
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if generation < 0 and group.is_(EMPTY):
            return None, group
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is not None:
                return error, None
            if generation != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION, None
        return None, group

    def _txn_commit(self, group_id: str, group: Group | None, producer_id: int, producer_epoch: int, valid,
                    codes, version: int) -> None:
        now = self._now
        writes = []
        for ti, pi, topic, p in valid:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if java_string_length(metadata) > self.config.offset_metadata_max_bytes:
                codes[ti][pi] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            codes[ti][pi] = ErrorCode.NONE
            epoch = p.committed_leader_epoch if version >= 2 else rec.NO_LEADER_EPOCH
            writes.append((topic, p.partition_index, OffsetAndMetadata(p.committed_offset, epoch, metadata, now)))
        if not writes:
            return
        if group is None:
            group = self._new_group(group_id)
        for topic, partition, om in writes:
            group.pending_commits[(topic, partition)] += 1
            self._records.append(Record(group.partition, rec.offset_commit_key(group_id, topic, partition),
                                        rec.offset_commit_value(om), producer_id, producer_epoch))

    def complete_txn(self, partition: int, producer_id: int, commit: bool, now_ms: int) -> Result:
        """The COMMIT or ABORT marker of ``producer_id``'s transaction was written to
        ``__consumer_offsets``-``partition`` (Kafka's handleTxnCompletion / replay of the end
        transaction marker): its transactional offsets there become committed, unless a later
        record committed the same partition, or are dropped. The marker is the record: nothing
        is written."""
        self._begin(now_ms)
        state = self._loading.get(partition)
        if state is not None:
            self._apply_loading_marker(state, producer_id, commit)
        elif partition in self._owned:
            for group_id in sorted(self._open_txns.pop((partition, producer_id), ())):
                group = self._groups.get(group_id)
                if group is None or group.partition != partition or producer_id not in group.pending_txn:
                    continue
                n = group.complete_txn(producer_id, commit)
                log.debug("group %s: transaction of producer %d %s, %d offsets committed", group_id, producer_id,
                          "committed" if commit else "aborted", n)
                self._maybe_drop_offsets_only_group(group)
        return self._end(now_ms)

    def offset_fetch(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        R = OffsetFetchResponse
        # KIP-447 (v7+): with require_stable, partitions with transactional offsets waiting for
        # their transaction answer UNSTABLE_OFFSET_COMMIT (the consumer retries)
        require_stable = version >= 7 and bool(req.require_stable)
        if version >= 8:
            groups = []
            for g in req.groups:
                wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                error, topics = self._fetch_offsets(g.group_id, wanted, require_stable)
                groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=int(error or 0), topics=[
                    R.OffsetFetchResponseTopics(name=name, partitions=[
                        R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                                                        metadata=md, error_code=int(pe))
                        for p, o, e, md, pe in parts])
                    for name, parts in topics]))
            response = R(throttle_time_ms=0, groups=groups)
        else:
            wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
            error, topics = self._fetch_offsets(req.group_id, wanted, require_stable)
            if error is not None and version < 2:
                # no top-level error before v2: every requested partition carries it
                topics = [(name, [(p, NO_OFFSET, rec.NO_LEADER_EPOCH, "", error) for p in parts])
                          for name, parts in wanted or ()]
            response = R(throttle_time_ms=0, error_code=int(error or 0) if version >= 2 else 0, topics=[
                R.OffsetFetchResponseTopic(name=name, partitions=[
                    R.OffsetFetchResponsePartition(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                                                   metadata=md, error_code=int(pe))
                    for p, o, e, md, pe in parts])
                for name, parts in topics])
        self._reply((reply_to, version), response)
        return self._end(now_ms)

    def _fetch_offsets(self, group_id: str, wanted: list[tuple[str, list[int]]] | None, require_stable: bool):
        """(group error or None, [(topic, [(partition, offset, leader epoch, metadata, error)])]).
        Missing offsets are -1 with no error; ``wanted`` None means every committed offset (v2+).
        Transactional offsets are never returned: without ``require_stable`` a partition gives
        its last committed offset, with it UNSTABLE_OFFSET_COMMIT while a transaction has offsets
        pending there (Kafka's OffsetMetadataManager.fetchOffsets / fetchAllOffsets)."""
        error = self._check_group(group_id, _Api.FETCH)
        if error is not None:
            return error, []
        group = self._groups.get(group_id)
        live = group is not None and not group.is_(DEAD)
        offsets = group.offsets if live else {}
        unstable = group.pending_txn_partitions() if live and require_stable and group.pending_txn else set()

        def entry(tp: tuple[str, int], om: OffsetAndMetadata | None):
            if tp in unstable:
                return (tp[1], NO_OFFSET, rec.NO_LEADER_EPOCH, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
            if om is None:
                return (tp[1], NO_OFFSET, rec.NO_LEADER_EPOCH, "", ErrorCode.NONE)
            return (tp[1], om.offset, om.leader_epoch, om.metadata, ErrorCode.NONE)

        if wanted is None:
            by_topic: dict[str, list] = {}
            for tp, om in offsets.items():
                by_topic.setdefault(tp[0], []).append(entry(tp, om))
            return None, list(by_topic.items())
        return None, [(topic, [entry((topic, p), offsets.get((topic, p))) for p in partitions])
                      for topic, partitions in wanted]

    # ------------------------------------------------------------------------------------------
    # DescribeGroups, ListGroups, DeleteGroups, OffsetDelete
    # ------------------------------------------------------------------------------------------

    def describe_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        D = DescribeGroupsResponse
        ops = GROUP_OPERATIONS if version >= 3 and req.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        described = []
        for group_id in req.groups:
            error = self._check_group(group_id, _Api.DESCRIBE)
            group = self._groups.get(group_id) if error is None else None
            if error is not None:
                described.append(D.DescribedGroup(error_code=int(error), group_id=group_id, group_state="",
                                                  protocol_type="", protocol_data="", members=[],
                                                  authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            elif group is None:
                described.append(D.DescribedGroup(error_code=0, group_id=group_id, group_state=str(DEAD),
                                                  protocol_type="", protocol_data="", members=[],
                                                  authorized_operations=ops))
            else:
                stable = group.is_(STABLE)
                members = [D.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name) if stable else b"",
                    member_assignment=m.assignment if stable else b"") for m in group.members.values()]
                described.append(D.DescribedGroup(
                    error_code=0, group_id=group_id, group_state=str(group.state),
                    protocol_type=group.protocol_type or "",
                    protocol_data=(group.protocol_name or "") if stable else "",
                    members=members, authorized_operations=ops))
        self._reply((reply_to, version), D(throttle_time_ms=0, groups=described))
        return self._end(now_ms)

    def list_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        L = ListGroupsResponse
        if not self._active:
            response = L(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), groups=[])
        else:
            states = {s.lower() for s in (req.states_filter or ())} if version >= 4 else set()
            types = {t.lower() for t in (req.types_filter or ())} if version >= 5 else set()
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
            listed = []
            if not types or GROUP_TYPE_CLASSIC in types:
                for group in self._groups.values():
                    if states and str(group.state).lower() not in states:
                        continue
                    listed.append(L.ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type or "",
                                                group_state=str(group.state), group_type=GROUP_TYPE_CLASSIC))
            response = L(throttle_time_ms=0, error_code=int(error), groups=listed)
        self._reply((reply_to, version), response)
        return self._end(now_ms)

    def delete_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        results: dict[str, ErrorCode] = {}
        for group_id in req.groups_names:
            if group_id in results:
                continue
            error = self._check_group(group_id, _Api.DELETE)
            if error is None:
                group = self._groups.get(group_id)
                if group is None or group.is_(DEAD):
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif group.is_(EMPTY):
                    log.info("group %s: deleted with %d committed offsets", group_id, len(group.offsets))
                    self._cleanup_group(group, group.offset_partitions(), force_dead=True)
                    error = ErrorCode.NONE
                else:
                    error = ErrorCode.NON_EMPTY_GROUP
            results[group_id] = error
        self._reply((reply_to, version), DeleteGroupsResponse(throttle_time_ms=0, results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(e)) for g, e in results.items()]))
        return self._end(now_ms)

    def offset_delete(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        O = OffsetDeleteResponse
        codes: dict[tuple[str, int], ErrorCode] = {}
        candidates = []
        for topic in req.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if self._partition_exists(*tp):
                    candidates.append(tp)
                else:
                    codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        error = self._check_group(req.group_id, _Api.OFFSET_DELETE)
        group = self._groups.get(req.group_id) if error is None else None
        if error is None:
            if group is None or group.is_(DEAD):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                eligible = candidates
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                eligible = []
                for tp in candidates:
                    if group.is_subscribed_to(tp[0]):
                        codes[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    else:
                        eligible.append(tp)
            else:
                error = ErrorCode.NON_EMPTY_GROUP
        if error is not None:
            response = O(error_code=int(error), throttle_time_ms=0, topics=[])
        else:
            known = group.offset_partitions()
            removed = {tp for tp in eligible if tp in known}
            for tp in eligible:
                codes[tp] = ErrorCode.NONE
            if removed:
                log.info("group %s: offsets deleted for %s", group.group_id, sorted(removed))
            self._cleanup_group(group, removed)
            topics = []
            for topic in req.topics:
                parts = list(dict.fromkeys(p.partition_index for p in topic.partitions))
                topics.append(O.OffsetDeleteResponseTopic(name=topic.name, partitions=[
                    O.OffsetDeleteResponsePartition(partition_index=p, error_code=int(codes[(topic.name, p)]))
                    for p in parts]))
            response = O(error_code=0, throttle_time_ms=0, topics=topics)
        self._reply((reply_to, version), response)
        return self._end(now_ms)

    # ------------------------------------------------------------------------------------------
    # offset expiry, deleted topics, group removal
    # ------------------------------------------------------------------------------------------

    def on_partitions_deleted(self, partitions: list[tuple[str, int]], now_ms: int) -> Result:
        """Delete the committed offsets of deleted topic partitions in every group (Kafka's
        handleDeletedPartitions)."""
        self._begin(now_ms)
        deleted = set(partitions)
        for group in list(self._groups.values()):
            removed = group.offset_partitions() & deleted
            if removed:
                self._cleanup_group(group, removed)
        return self._end(now_ms)

    def _expire_offsets(self, now_ms: int) -> None:
        n = 0
        for group in list(self._groups.values()):
            expired = self._expired_offsets(group, now_ms)
            n += len(expired)
            if expired or group.is_(EMPTY):
                self._cleanup_group(group, set(expired))
        if n:
            log.info("expired %d committed offsets", n)

    def _expired_offsets(self, group: Group, now_ms: int) -> list[tuple[str, int]]:
        """GroupMetadata.removeExpiredOffsets (KIP-211)."""
        retention = self.config.offsets_retention_ms
        exclude: set[str] = set()
        if group.protocol_type is not None and group.is_(EMPTY):
            # no members: retention counts from when the group became Empty (from the commit for
            # group metadata without a state timestamp)
            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp if group.state_timestamp is None else group.state_timestamp
        elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
              and group.is_(STABLE)):
            # a Stable consumer group expires offsets of topics it no longer subscribes to
            exclude = group.subscribed_topics

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp
        elif group.protocol_type is None:
            # a group using Kafka only for offsets: from each commit
            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp
        else:
            return []
        expired = []
        for tp, om in group.offsets.items():
            # a partition with a transactional offset pending keeps its committed one (Kafka's
            # cleanupExpiredOffsets); the group stays while it has any (offset_partitions)
            if tp[0] in exclude or group.pending_commits.get(tp) or group.has_pending_txn(tp):
                continue
            if om.expire_timestamp is not None:
                if now_ms >= om.expire_timestamp:  # pre-KIP-211 commit with its own retention
                    expired.append(tp)
            elif now_ms - base(om) >= retention:
                expired.append(tp)
        return expired

    def _cleanup_group(self, group: Group, removed: set[tuple[str, int]], *, force_dead: bool = False) -> None:
        """Write tombstones for ``removed`` offsets (memory follows on replay); an Empty group left
        without offsets becomes Dead, with a group tombstone if it ever had a generation
        (GroupMetadataManager.cleanupGroupMetadata)."""
        for topic, partition in sorted(removed):
            self._emit(group.partition, rec.offset_commit_key(group.group_id, topic, partition), None, applied=False)
        remaining = group.offset_partitions() - removed
        if force_dead or (group.is_(EMPTY) and not remaining and not group.pending_members):
            self._remove_group(group)

    def _remove_group(self, group: Group) -> None:
        log.info("group %s transitioned to Dead in generation %d", group.group_id, group.generation_id)
        group.transition(GroupEvent.REMOVE, self._now)
        del self._groups[group.group_id]
        self._timers.cancel_group(group.group_id)
        if group.generation_id > 0:
            # generation 0: the group only stored offsets and never had a metadata record
            self._emit(group.partition, rec.group_metadata_key(group.group_id), None, applied=True)

    def _unload_group(self, group: Group) -> None:
        previous = group.state
        group.transition(GroupEvent.REMOVE, self._now)
        for member in group.members.values():
            waiter = group.take_join_waiter(member)
            if waiter is not None:
                self._reply_join_error(waiter, ErrorCode.NOT_COORDINATOR, member.member_id)
            waiter = group.take_sync_waiter(member)
            if waiter is not None:
                self._reply(waiter, self._sync_response(ErrorCode.NOT_COORDINATOR))
        del self._groups[group.group_id]
        self._timers.cancel_group(group.group_id)
        log.info("unloaded group %s (was %s, generation %d)", group.group_id, previous, group.generation_id)

    # ------------------------------------------------------------------------------------------
    # replay of __consumer_offsets records
    # ------------------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply a record after the broker appended it, or one of a partition being loaded."""
        partition = record.partition
        state = self._loading.get(partition)
        if state is not None:
            self._apply_loading(state, record.key, record.value, state.position(record.offset), record.producer_id)
            return
        if partition not in self._owned:
            return
        last = self._positions.get(partition, -1)
        position = record.offset if record.offset >= 0 else last + 1
        self._positions[partition] = max(last, position)
        ident = (partition, record.key, record.value)
        n = self._self_applied.get(ident)
        if n:
            if n == 1:
                del self._self_applied[ident]
            else:
                self._self_applied[ident] = n - 1
            return
        try:
            key = rec.parse_key(record.key)
            if isinstance(key, OffsetKey):
                self._replay_offset(partition, key, record.value, position, record.producer_id)
            elif isinstance(key, GroupKey):
                self._replay_group(partition, key.group, record.value)
        except RecordFormatError as e:
            log.warning("__consumer_offsets-%d: skipping a record that cannot be read: %s", partition, e)

    def _replay_offset(self, partition: int, key: OffsetKey, value: bytes | None, position: int,
                       producer_id: int) -> None:
        group = self._groups.get(key.group)
        tp = (key.topic, key.partition)
        if value is None:
            if group is not None:
                group.remove_offset(tp)  # with the partition's pending transactional offsets
                self._maybe_drop_offsets_only_group(group)
            return
        om = rec.parse_offset_value(value)
        if group is None:
            group = Group(key.group, partition, EMPTY, self._now)
            self._groups[key.group] = group
        if producer_id >= 0:
            # a TxnOffsetCommit: visible once the producer's transaction commits
            group.pending_txn.setdefault(producer_id, {})[tp] = (position, om)
            self._open_txns.setdefault((partition, producer_id), set()).add(key.group)
        else:
            group.put_offset(tp, om, position)
        n = group.pending_commits.get(tp, 0)
        if n > 1:
            group.pending_commits[tp] = n - 1
        elif n == 1:
            del group.pending_commits[tp]

    def _maybe_drop_offsets_only_group(self, group: Group) -> None:
        """A group that exists only through offsets (no generation, no protocol, nobody waiting)
        and has none left disappears, as it would after a reload."""
        if (group.is_(EMPTY) and group.generation_id == 0 and group.protocol_type is None and not group.members
                and not group.pending_members and not group.has_offsets()):
            group.transition(GroupEvent.REMOVE, self._now)
            del self._groups[group.group_id]
            self._timers.cancel_group(group.group_id)

    def _replay_group(self, partition: int, group_id: str, value: bytes | None) -> None:
        """A group metadata record this coordinator did not write while owning the partition: take
        it as loading would, unless live members say otherwise."""
        group = self._groups.get(group_id)
        if group is not None and (group.members or not group.is_(EMPTY)):
            log.warning("group %s: ignoring a foreign group metadata record for a live group", group_id)
            return
        offsets = group.offsets if group is not None else {}
        positions = group.offset_positions if group is not None else {}
        pending = group.pending_commits if group is not None else Counter()
        pending_txn = group.pending_txn if group is not None else {}
        if group is not None:
            del self._groups[group_id]
            self._timers.cancel_group(group_id)
        if value is None:
            if offsets or pending or pending_txn:
                group = Group(group_id, partition, EMPTY, self._now)
            else:
                return
        else:
            group = self._group_from_value(group_id, partition, rec.parse_group_value(value))
        group.offsets = offsets
        group.offset_positions = positions
        group.pending_commits = pending
        group.pending_txn = pending_txn
        self._groups[group_id] = group
        self._on_group_loaded(group)

    # ------------------------------------------------------------------------------------------
    # loading
    # ------------------------------------------------------------------------------------------

    @staticmethod
    def _apply_loading(state: _LoadState, key_bytes: bytes | None, value: bytes | None, position: int,
                       producer_id: int) -> None:
        if key_bytes is None:
            return
        try:
            key = rec.parse_key(key_bytes)
            if isinstance(key, OffsetKey):
                tp = (key.topic, key.partition)
                if value is None:
                    # as live replay: the committed offset and any pending transactional ones
                    offsets = state.offsets.get(key.group)
                    if offsets is not None:
                        offsets.pop(tp, None)
                    for by_group in state.pending.values():
                        pending = by_group.get(key.group)
                        if pending is not None:
                            pending.pop(tp, None)
                elif producer_id >= 0:
                    pending = state.pending.setdefault(producer_id, {}).setdefault(key.group, {})
                    pending[tp] = (position, rec.parse_offset_value(value))
                else:
                    offsets = state.offsets.setdefault(key.group, {})
                    offsets.pop(tp, None)
                    offsets[tp] = (position, rec.parse_offset_value(value))
            elif isinstance(key, GroupKey):
                if value is None:
                    state.groups.pop(key.group, None)
                else:
                    state.groups[key.group] = rec.parse_group_value(value)
        except RecordFormatError as e:
            log.warning("skipping a __consumer_offsets record that cannot be read: %s", e)

    @staticmethod
    def _apply_loading_marker(state: _LoadState, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker read while loading: the producer's pending offsets become
        committed unless a later record committed the partition already, or are dropped."""
        by_group = state.pending.pop(producer_id, None)
        if not by_group or not commit:
            return
        for group_id, pending in by_group.items():
            if not pending:
                continue
            offsets = state.offsets.setdefault(group_id, {})
            for tp, (position, om) in pending.items():
                current = offsets.get(tp)
                if current is None or current[0] < position:
                    offsets.pop(tp, None)
                    offsets[tp] = (position, om)

    @staticmethod
    def _group_from_value(group_id: str, partition: int, value: GroupMetadataValue) -> Group:
        """GroupMetadata.loadGroup: Empty without members, else Stable; each member supports just the
        group's protocol, with the subscription stored for it."""
        group = Group(group_id, partition, STABLE if value.members else EMPTY, None)
        group.state_timestamp = None if value.current_state_timestamp == -1 else value.current_state_timestamp
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        for mm in value.members:
            if mm.member_id in group.members or (mm.group_instance_id is not None
                                                 and mm.group_instance_id in group.static_members):
                log.warning("group %s: skipping duplicate member %s in its metadata record", group_id, mm.member_id)
                continue
            rebalance_timeout = mm.rebalance_timeout if mm.rebalance_timeout >= 0 else mm.session_timeout  # v0
            member = Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host, rebalance_timeout,
                            mm.session_timeout, value.protocol_type, [(value.protocol or "", bytes(mm.subscription))],
                            bytes(mm.assignment))
            group.add(member, None)
        group.protocol_type = value.protocol_type or None
        if group.members and (group.leader_id is None or group.leader_id not in group.members):
            group.leader_id = next(iter(group.members))
        group.subscribed_topics = group.compute_subscribed_topics()
        return group
