"""The state the parts of the group coordinator share (Kafka's GroupCoordinatorShard context: the
groups of the ``__consumer_offsets`` partitions this broker leads, its timer, its clock, and the
records and replies that become the :class:`Result` of one call).

The parts -- classic membership (:mod:`kcompat.group.membership`), committed offsets and the group
admin APIs (:mod:`kcompat.group.offsets`), storage and loading (:mod:`kcompat.group.storage`), and
KIP-848 consumer groups (:mod:`kcompat.group.consumer_groups`) -- each get this context and the
few collaborators they call, never each other's private state. One call of the coordinator runs
between :meth:`GroupShardContext.begin` and :meth:`GroupShardContext.end`.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from kcompat.group.coordinator_types import GroupConfig, Record, Result, _Api, _LoadState, _EMPTY_GROUP_ID_ALLOWED
from kcompat.group.coordinator_types import EMPTY, partition_for
from kcompat.group.model import Group
from kcompat.group.timers import Timers
from kcompat.protocol.errors import ErrorCode


class GroupShardContext:
    """Shared state of one group coordinator.

    ``groups``: group id -> :class:`Group` (classic and consumer groups, one id space);
    ``owned``/``loading``: ``__consumer_offsets`` partitions led and loaded / being loaded;
    ``timers``; ``now`` (ms, the time of the current call); ``self_applied``: records whose
    effect is already in memory, recognised by their bytes when replayed; ``positions``: the last
    log offset replayed per partition; ``open_txns``: (partition, producer id) -> groups with
    transactional offsets of that producer (a hint; the groups' pending_txn is the truth)."""

    def __init__(self, config: GroupConfig, partition_exists: Callable[[str, int], bool],
                 new_uuid: Callable[[], str]) -> None:
        self.config = config
        self.partition_exists = partition_exists
        self.new_uuid = new_uuid
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, _LoadState] = {}
        self.timers = Timers()
        self.self_applied: Counter[tuple[int, bytes, bytes | None]] = Counter()
        self.positions: dict[int, int] = {}
        self.open_txns: dict[tuple[int, int], set[str]] = {}
        self.active = True
        self.now = 0
        # completed classic rebalances and consumer-group epoch bumps (group-coordinator-metrics)
        self.rebalances: Counter[str] = Counter()
        self._records: list[Record] = []
        self._replies: list[tuple[object, object]] = []
        self._deferred_records: list[Record] = []
        self._deferred_replies: list[tuple[object, object]] = []
        # set by the coordinator: at the start of a call (ensure the expiry timer, fire due
        # timers) and at its end (fire timers scheduled with no delay during the call)
        self.on_begin: Callable[[int], None] = lambda now_ms: None
        self.on_end: Callable[[int], None] = lambda now_ms: None

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    # -- one call ------------------------------------------------------------------------------

    def begin(self, now_ms: int | None) -> None:
        """Start a call at ``now_ms`` (None: a call without a clock, such as unloading)."""
        self._records = self._deferred_records
        self._replies = self._deferred_replies
        self._deferred_records = []
        self._deferred_replies = []
        if now_ms is not None:
            self.now = now_ms
            self.on_begin(now_ms)

    def end(self, now_ms: int | None) -> Result:
        """The records and replies of the call."""
        if now_ms is not None:
            self.on_end(now_ms)
        result = Result(self._records, self._replies)
        self._records = []
        self._replies = []
        return result

    def defer(self, result: Result) -> None:
        """Carry ``result`` into the next call's Result (a nested call's output)."""
        self._deferred_records.extend(result.records)
        self._deferred_replies.extend(result.replies)

    def emit(self, partition: int, key: bytes, value: bytes | None, *, applied: bool) -> None:
        """Add a record to the Result; ``applied`` marks one whose effect is already in memory."""
        self._records.append(Record(partition, key, value))
        if applied:
            self.self_applied[(partition, key, value)] += 1

    def emit_record(self, record: Record) -> None:
        """Add a record replay will apply (a transactional offset commit of a producer)."""
        self._records.append(record)

    def reply(self, waiter, response: object) -> None:
        """Send ``response`` to ``waiter`` (``(reply_to, version)``; None: nobody waits)."""
        if waiter is not None:
            self._replies.append((waiter[0], response))

    def extend_replies(self, replies) -> None:
        self._replies.extend(replies)

    # -- groups --------------------------------------------------------------------------------

    def check_group(self, group_id: str | None, api: _Api) -> ErrorCode | None:
        """Kafka's validateGroupStatus: INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE,
        COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, or None."""
        if group_id is None or (group_id == "" and api not in _EMPTY_GROUP_ID_ALLOWED):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    def new_group(self, group_id: str) -> Group:
        """Register a new Empty group."""
        group = Group(group_id, self.partition_for(group_id), EMPTY, self.now)
        self.groups[group_id] = group
        return group
