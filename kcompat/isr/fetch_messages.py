"""The fetch path of :class:`kcompat.isr.replica_manager.ReplicaManager`: Kafka's
``ReplicaManager.fetchMessages`` / ``Partition.fetchRecords`` / ``DelayedFetch``.

:func:`fetch_messages` reads the partitions of one fetch (:class:`FetchPartitionRequest`, in
request order) and answers per partition (:class:`FetchPartitionResult`):

- per partition at most ``partition_max_bytes`` and in total at most ``max_bytes``; the first
  partition that has data returns at least one whole batch even if it is larger (KIP-74);
- a fetch offset inside a batch returns the whole batch (the consumer skips earlier records);
- OFFSET_OUT_OF_RANGE outside [log start offset, log end offset], an empty answer from the high
  watermark to the log end offset (Kafka ``LocalLog.read``); FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH when ``current_leader_epoch`` is older / newer than ours (KIP-320);
  UNKNOWN_SERVER_ERROR for a negative ``partition_max_bytes`` (Kafka's ``LogSegment.read``);
- a partition that fails answers no records and -1 for the high watermark, last stable offset and
  log start offset, whatever the error (OFFSET_OUT_OF_RANGE and KAFKA_STORAGE_ERROR too: Kafka's
  ``ReplicaManager.createLogReadResult`` with ``UnifiedLog.UnknownOffset``; consumers and
  followers learn the offsets with ListOffsets), except OFFSET_MOVED_TO_TIERED_STORAGE, which a
  follower gets with the high watermark and log start offset. Its aborted transactions are null,
  except for the errors Kafka's ``KafkaApis`` answers before reading (:data:`REQUEST_ERRORS`: an
  empty list, ``FetchResponse.partitionResponse``);
- read_committed reads only below the last stable offset and answers the aborted transactions
  the records may hold (KIP-98);
- a follower (``replica_id`` >= 0) reads up to the log end offset and records its position
  (:meth:`~kcompat.isr.partition_replication.ReplicationMixin.read_for_follower`); a diverging
  epoch answers at once (KIP-320); a partition throttled by ``rm.leader_quota``
  (:mod:`kcompat.broker.quota.replication`) answers no records to a replica outside the ISR while the
  leader's replication rate is over ``leader.replication.throttled.rate``;
- a consumer may read from a follower (``follower_reads``, KIP-392); with a rack-aware
  ``replica.selector.class`` the leader answers ``preferred_read_replica`` and no records;
- if fewer than ``min_bytes`` are readable and no partition has an error, the fetch waits
  (:class:`DelayedFetch`) up to ``max_wait_ms``;
- a consumer's fetch offset below the local log start offset of a tiered partition (KIP-405) is
  read from remote storage through ``rm.remote_reader`` (:class:`RemoteReads`; Kafka's
  ``DelayedRemoteFetch``): the first such partition of the fetch is read, others answer no
  records; the fetch answers when that read is done, or after ``remote.fetch.max.wait.ms`` with
  no records for it; a store failure answers UNKNOWN_SERVER_ERROR for the partition (Kafka's
  error for a ``RemoteStorageException``), which consumers retry.

With ``zero_copy`` the records of a partition are a :class:`kcompat.log.FileRecords` (a byte
range of a segment file, sent with ``sendfile``) where the log can give one, else bytes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
import logging
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

from kcompat.isr.completion import Completion
from kcompat.isr.replica_selector import NO_PREFERRED_REPLICA, preferred_read_replica
from kcompat.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:  # pragma: no cover
    from kcompat.isr.partition import Partition
    from kcompat.isr.replica_manager import ReplicaManager

READ_COMMITTED = 1

log = logging.getLogger("kcompat.isr")


class RemoteReads(Protocol):
    """What the fetch path needs of tiered storage (the broker's remote log manager)."""

    fetch_max_wait_ms: int   # remote.fetch.max.wait.ms

    def is_remote_offset(self, p: "Partition", offset: int) -> bool:
        """True if a consumer's read at ``offset`` must go to remote storage."""

    async def read(self, p: "Partition", offset: int, max_bytes: int, *, min_one_batch: bool,
                   read_committed: bool) -> tuple[bytes, list | None]:
        """``(records, aborted [(producer id, first offset)] or None)``; raises KafkaError or
        any other exception for a store failure."""


@dataclass(slots=True)
class FetchParams:
    """What applies to the whole fetch (Kafka ``FetchParams``): ``replica_id`` (-1: a consumer)
    and its ``replica_epoch``; ``max_wait_ms``, ``min_bytes``, ``max_bytes`` (bytes, ms);
    ``isolation_level`` (1: read_committed); ``follower_reads``: a consumer that may read from a
    follower (Fetch v11+); ``rack_id`` and ``selector`` (``replica.selector.class``) with
    ``racks()`` -> ``{broker id: rack}`` of the live brokers, for KIP-392; ``zero_copy``: the
    records may be file ranges."""

    replica_id: int = -1
    replica_epoch: int = -1
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    isolation_level: int = 0
    follower_reads: bool = False
    rack_id: str | None = None
    selector: str | None = None
    racks: Callable[[], dict] | None = None
    zero_copy: bool = False

    @property
    def visible_isolation(self) -> int:
        """The isolation that bounds the read: followers read uncommitted data."""
        return self.isolation_level if self.replica_id < 0 else 0


@dataclass(slots=True)
class FetchPartitionRequest:
    """One partition of a fetch: ``topic`` (None: an unknown topic id), ``partition``,
    ``fetch_offset``, the follower's ``log_start_offset``, ``partition_max_bytes`` (bytes),
    ``current_leader_epoch`` / ``last_fetched_epoch`` (-1: not given); ``error``: decided by
    the caller already (UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED)."""

    topic: str | None
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    error: ErrorCode | None = None


@dataclass(slots=True)
class FetchPartitionResult:
    """One partition's answer (Kafka ``FetchPartitionData``): ``error``, the watermarks (-1 on
    errors), ``aborted`` ``[(producer id, first offset)]`` (read_committed, else None),
    ``preferred_read_replica`` (-1: none), ``records`` (bytes or a FileRecords), ``diverging``
    ``(epoch, end offset)`` for a follower that must truncate."""

    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted: list | None = None
    preferred_read_replica: int = -1
    records: object = b""
    diverging: tuple[int, int] | None = None


def fetch_messages(rm: "ReplicaManager", params: FetchParams, requests: list[FetchPartitionRequest]
                   ) -> list[FetchPartitionResult] | Completion | Awaitable[list[FetchPartitionResult]]:
    """Read every partition of ``requests``. Returns the results in the same order, or, when the
    fetch must wait for data, the :class:`~kcompat.isr.completion.Completion` of them
    (:class:`DelayedFetch`); a remote read (tiered storage) returns a coroutine."""
    targets = [_resolve(rm, params, r) for r in requests]
    reader = _Reader(rm, params)
    results = [reader.read(r, t) for r, t in zip(requests, targets)]
    total, answer_now = reader.total, reader.answer_now
    if reader.remote is not None:
        return _remote_fetch(rm, params, targets, results, reader.remote)
    if params.max_wait_ms <= 0 or total >= max(params.min_bytes, 1) or answer_now or not requests \
            or rm.shutting_down:
        _count(rm, params, targets, results)
        return results
    return DelayedFetch(rm, params, requests, targets, results).start()


def _resolve(rm: "ReplicaManager", params: FetchParams, r: FetchPartitionRequest) -> "Partition | ErrorCode":
    """The partition to read, or why not (Kafka ``getPartitionOrException`` + epoch checks)."""
    if r.error is not None:
        return r.error
    target = rm.get(r.topic, r.partition)
    leader = rm.leader_of(r.topic, r.partition)
    if target is None and leader is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if target is None or (leader != rm.node_id and not (params.follower_reads and params.replica_id < 0)):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if r.current_leader_epoch >= 0 and r.current_leader_epoch != target.leader_epoch:
        return (ErrorCode.FENCED_LEADER_EPOCH if r.current_leader_epoch < target.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH)
    return target


# The partition errors Kafka's KafkaApis.handleFetchRequest answers before the replica manager
# reads (FetchResponse.partitionResponse: aborted transactions an empty list, not null).
REQUEST_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


def _error_result(code: ErrorCode) -> FetchPartitionResult:
    """A failed partition: no records, -1 watermarks (Kafka's ``createLogReadResult``)."""
    return FetchPartitionResult(error=code, aborted=[] if code in REQUEST_ERRORS else None)


class _Reader:
    """One pass over a fetch's partitions in order, with the request's byte budget."""

    __slots__ = ("rm", "params", "now", "racks", "limit", "min_one", "total", "answer_now", "remote")

    def __init__(self, rm: "ReplicaManager", params: FetchParams) -> None:
        self.rm = rm
        self.params = params
        self.now = rm.now_ms()
        self.racks = None
        self.limit = params.max_bytes
        self.min_one = True
        self.total = 0
        self.answer_now = False
        self.remote: tuple | None = None   # (result, partition, offset, max bytes, min one batch)

    def take(self, n: int) -> None:
        if n:
            self.min_one = False
            self.limit = max(0, self.limit - n)
            self.total += n

    def read(self, r: FetchPartitionRequest, target) -> FetchPartitionResult:
        """Read one partition; an error, a diverging epoch or a preferred read replica sets
        ``answer_now``."""
        if isinstance(target, ErrorCode):
            self.answer_now = True
            return _error_result(target)
        p = target
        params = self.params
        max_bytes = min(r.partition_max_bytes, self.limit)
        if max_bytes < 0:
            # Kafka's LogSegment.read rejects a negative size (IllegalArgumentException): the
            # partition fails with UNKNOWN_SERVER_ERROR, the rest of the fetch goes on
            self.answer_now = True
            return _error_result(ErrorCode.UNKNOWN_SERVER_ERROR)
        if params.selector is not None and params.replica_id < 0 and params.follower_reads and params.rack_id \
                and p.is_leader:
            if self.racks is None:
                self.racks = params.racks() if params.racks is not None else {}
            racks = self.racks
            preferred = preferred_read_replica(params.selector, p, params.rack_id, r.fetch_offset, self.now,
                                               lambda b: (b in racks, racks.get(b)))
            if preferred != NO_PREFERRED_REPLICA:
                self.answer_now = True   # answer at once (Kafka: "has a preferred read replica")
                # no read, so no aborted transactions list at all (Kafka's empty FetchDataInfo: null)
                return FetchPartitionResult(ErrorCode.NONE, p.high_watermark, p.last_stable_offset,
                                            p.log_start_offset, None, preferred, b"")
        remote = self.rm.remote_reader
        if params.replica_id < 0 and remote is not None and remote.is_remote_offset(p, r.fetch_offset):
            result = FetchPartitionResult(ErrorCode.NONE, p.high_watermark, p.last_stable_offset, p.log_start_offset,
                                          [] if params.visible_isolation == READ_COMMITTED else None, -1, b"")
            self.answer_now = True
            if self.remote is None:
                self.remote = (result, p, r.fetch_offset, max_bytes, self.min_one)
                self.min_one = False
            return result
        diverging = None
        try:
            if params.replica_id >= 0:
                records, diverging = p.read_for_follower(
                    params.replica_id, fetch_offset=r.fetch_offset, log_start_offset=r.log_start_offset,
                    last_fetched_epoch=r.last_fetched_epoch, max_bytes=max_bytes, now_ms=self.now,
                    broker_epoch=params.replica_epoch, zero_copy=params.zero_copy)
                if self.rm.leader_quota is not None:   # leader.replication.throttled.* (KIP-73)
                    records = self.rm.leader_quota.leader_records(p.topic, p.partition_id, params.replica_id in p.isr,
                                                                  records, self.now)
            else:
                records = p.read(r.fetch_offset, max_bytes, isolation_level=params.isolation_level,
                                 min_one_batch=self.min_one, zero_copy=params.zero_copy)
        except KafkaError as e:   # OFFSET_OUT_OF_RANGE, KAFKA_STORAGE_ERROR...
            self.answer_now = True
            result = _error_result(e.code)
            if e.code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                # a follower below the local log start: Kafka's handleOffsetOutOfRangeError answers
                # the leader's high watermark and log start offset with it (KIP-405)
                result.high_watermark, result.log_start_offset = p.high_watermark, p.log_start_offset
            return result
        n = len(records)
        self.take(n)
        aborted = None
        if params.visible_isolation == READ_COMMITTED:
            # the aborted transactions the fetched batches may hold (KIP-98); the consumer drops them
            aborted = p.aborted_transactions(r.fetch_offset, p.last_stable_offset) if n else []
        result = FetchPartitionResult(ErrorCode.NONE, p.high_watermark, p.last_stable_offset, p.log_start_offset,
                                      aborted, -1, records)
        if diverging is not None:
            result.diverging = diverging
            self.answer_now = True   # answer at once: the follower must truncate first
        return result


def _read_all(rm: "ReplicaManager", params: FetchParams, requests: list[FetchPartitionRequest], targets: list
              ) -> tuple[list[FetchPartitionResult], int, bool]:
    """Read every partition: (results, record bytes read, answer now)."""
    reader = _Reader(rm, params)
    results = [reader.read(r, t) for r, t in zip(requests, targets)]
    return results, reader.total, reader.answer_now


async def _remote_fetch(rm: "ReplicaManager", params: FetchParams, targets: list,
                        results: list[FetchPartitionResult], remote: tuple) -> list[FetchPartitionResult]:
    """Complete a fetch with its remote read (Kafka ``DelayedRemoteFetch``)."""
    result, p, offset, max_bytes, min_one = remote
    at = next(i for i, x in enumerate(results) if x is result)
    reads = rm.remote_reader
    try:
        records, aborted = await asyncio.wait_for(
            reads.read(p, offset, max_bytes, min_one_batch=min_one,
                       read_committed=params.visible_isolation == READ_COMMITTED),
            reads.fetch_max_wait_ms / 1000)
        result.records = records
        if aborted is not None:
            result.aborted = aborted
    except asyncio.TimeoutError:
        pass   # remote.fetch.max.wait.ms: no records this time, the consumer fetches again
    except KafkaError as e:
        results[at] = _error_result(e.code)
    except Exception as e:   # a RemoteStorageException in Kafka: UNKNOWN_SERVER_ERROR
        log.warning("%s-%d: remote fetch at offset %d failed: %s", p.topic, p.partition_id, offset, e)
        results[at] = _error_result(ErrorCode.UNKNOWN_SERVER_ERROR)
    _count(rm, params, targets, results)
    return results


def _count(rm: "ReplicaManager", params: FetchParams, targets: list, results: list[FetchPartitionResult]) -> None:
    """BrokerTopicMetrics of a completed consumer fetch, and the bytes served per partition."""
    if params.replica_id >= 0:
        return
    stats = rm.stats
    for p, result in zip(targets, results):
        if isinstance(p, ErrorCode) or result.preferred_read_replica >= 0:
            continue
        n = len(result.records)
        stats.fetched(p.topic, n, result.error != ErrorCode.NONE)
        if n:
            p.count_consumer_bytes(n)


def _visible_end(p: "Partition", params: FetchParams) -> int:
    """The offset below which this fetch may read ``p``: the LEO for a follower, the LSO for
    read_committed, else the high watermark (Kafka ``FetchIsolation``)."""
    if params.replica_id >= 0:
        return p.log.log_end_offset
    return p.last_stable_offset if params.isolation_level == READ_COMMITTED else p.high_watermark


class DelayedFetch:
    """A fetch waiting until ``min_bytes`` are readable or ``max_wait_ms`` passes (Kafka
    ``DelayedFetch``). It holds the results of its first read.

    What the fetch can read of each partition ends at its visible end (:func:`_visible_end`). The
    wait ends on whatever moves that end:
    - for a follower, an append;
    - for a consumer, a high-watermark advance, or an LSO advance for read_committed. An append
      alone, not yet replicated, makes nothing readable for a consumer, and a high watermark that
      moves without an append must wake it.

    :meth:`start` takes the visible ends and registers for wake-ups right after the first read, so
    no change in between goes unnoticed.

    A wake-up is checked on the spot, inside the append or HW move that caused it, as Kafka's
    purgatory does (``tryCompleteElseWatch`` / ``checkAndComplete``). When the fetch can answer,
    its :class:`~kcompat.isr.completion.Completion` is set there and then, so its response is
    written before the response of the request that woke it. The wake-up re-reads only the
    partitions whose visible end moved (or whose log start passed the fetch offset). It keeps the
    others' results and refreshes their watermarks. A leadership change re-reads everything.

    A wake-up that arrives while the fetch is re-reading is checked again once the re-read ends,
    never re-entered. A follower's read can move the HW, which wakes the same partition's
    waiters."""

    def __init__(self, rm: "ReplicaManager", params: FetchParams, requests: list[FetchPartitionRequest],
                 targets: list, results: list[FetchPartitionResult]) -> None:
        self.rm = rm
        self.params = params
        self.requests = requests
        self.targets = targets
        self.results = results
        self.watched = [(i, t) for i, t in enumerate(targets) if not isinstance(t, ErrorCode)]
        self.roles = [(p.is_leader, p.leader_epoch) for _, p in self.watched]
        self.ends = [_visible_end(p, params) for _, p in self.watched]
        self.start_hws = [p.high_watermark for _, p in self.watched]
        self.need = max(params.min_bytes, 1)
        self.completion = Completion(on_cancel=self._stop)
        self._timer: asyncio.TimerHandle | None = None
        self._checking = False   # inside _check: a wake-up now only asks for another check
        self._again = False

    def start(self) -> Completion:
        """Watch the partitions (appends, HW/LSO moves) and the replica manager (leadership
        changes, shutdown), and start the ``max_wait_ms`` timer. Returns the completion of the
        results."""
        for _, p in self.watched:
            p.add_waiter(self._signal)
        self.rm.fetch_waiters.add(self._signal)
        self._timer = asyncio.get_running_loop().call_later(self.params.max_wait_ms / 1000.0, self._expire)
        return self.completion

    def _signal(self) -> None:
        """A wake-up: answer now if the fetch can (see the class docstring)."""
        if self.completion.done:
            return
        if self._checking:
            self._again = True
            return
        self._checking = True
        try:
            while True:
                self._again = False
                answer, full = self._check()
                if answer or not self._again:
                    break
        except Exception as e:   # noqa: BLE001 - the waker is handling another request
            self._stop()
            self.completion.set_exception(e)
            return
        finally:
            self._checking = False
        if answer:
            self._answer(full)

    def _check(self) -> tuple[bool, bool]:
        """(answer now, after a leadership change): answer on shutdown, on an error, on a
        leadership change, for a follower when a high watermark moved (so followers learn it
        promptly), or once ``min_bytes`` are read."""
        rm, params = self.rm, self.params
        if rm.shutting_down:
            return True, False
        if any(rm.get(p.topic, p.partition_id) is not p or (p.is_leader, p.leader_epoch) != role
               for (_, p), role in zip(self.watched, self.roles)):
            return True, True   # the client finds the new leader
        if params.replica_id >= 0 and any(p.high_watermark != h
                                          for (_, p), h in zip(self.watched, self.start_hws)):
            return True, False  # a follower learns the new HW now, not after replica.fetch.wait.max.ms
        total, answer_now = self._reread_changed()
        return total >= self.need or answer_now, False

    def _expire(self) -> None:
        """``max_wait_ms`` passed: answer with whatever there is."""
        self._timer = None
        if not self.completion.done:
            self._answer(False)

    def _answer(self, full: bool) -> None:
        self._stop()
        rm, params = self.rm, self.params
        try:
            if full:
                self.targets = [_resolve(rm, params, r) for r in self.requests]
                self.results = _read_all(rm, params, self.requests, self.targets)[0]
            else:
                self._reread_changed()
            _count(rm, params, self.targets, self.results)
        except Exception as e:   # noqa: BLE001 - answered as the handler's failure
            self.completion.set_exception(e)
            return
        self.completion.set_result(self.results)

    def _stop(self) -> None:
        """Stop watching and cancel the timer (answered, failed, or the client went away)."""
        for _, p in self.watched:
            p.remove_waiter(self._signal)
        self.rm.fetch_waiters.discard(self._signal)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _changed(self) -> set[int]:
        """Indexes of the partitions whose visible end moved since their last read, or whose log
        start passed the fetch offset (retention, DeleteRecords: the read answers out of range)."""
        changed = set()
        for k, (i, p) in enumerate(self.watched):
            end = _visible_end(p, self.params)
            if end != self.ends[k] or self.requests[i].fetch_offset < p.log_start_offset:
                self.ends[k] = end
                changed.add(i)
        return changed

    def _reread_changed(self) -> tuple[int, bool]:
        """Re-read the changed partitions in request order within the byte budget, keeping the
        others' results (a kept result that no longer fits the budget left to it forces a full
        re-read); (record bytes now in the results, answer now)."""
        changed = self._changed()
        params = self.params
        reader = _Reader(self.rm, params)
        results = list(self.results)
        for i, (r, target) in enumerate(zip(self.requests, self.targets)):
            if i in changed:
                results[i] = reader.read(r, target)
                continue
            kept = results[i]
            n = len(kept.records)
            if n > min(r.partition_max_bytes, reader.limit):
                self.results, total, answer_now = _read_all(self.rm, params, self.requests, self.targets)
                return total, answer_now
            if not isinstance(target, ErrorCode) and kept.error == ErrorCode.NONE:
                kept.high_watermark = target.high_watermark
                kept.last_stable_offset = target.last_stable_offset
                kept.log_start_offset = target.log_start_offset
            reader.take(n)
        self.results = results
        return reader.total, reader.answer_now
