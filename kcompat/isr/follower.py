"""Follower side of one partition: what to fetch next from the leader and what to do with the
answer (Kafka ``AbstractFetcherThread`` / ``ReplicaFetcherThread`` for one partition, with KIP-320
truncation on fetch: Fetch v12+ ``last_fetched_epoch`` in, ``diverging_epoch`` out).

I/O free. The fetcher (owned by the broker) builds the Fetch request from :meth:`FollowerFetch.
fetch_position`, hands each partition of the response to :meth:`FollowerFetch.on_fetch_response`
and executes the returned actions in order, stopping at the first that fails:

- :class:`Truncate` - ``Partition``/``Log.truncate_to(offset)`` plus a producer-state reload (at
  or past the LEO: only the leader epochs starting at or above the LEO go);
- :class:`TruncateFullyAndStartAt` - ``Log.truncate_fully_and_start_at(offset)``, producer state cleared;
- :class:`AppendRecords` - ``Partition.append_as_follower(records)``, offsets and epochs kept;
- :class:`SetHighWatermark` - the follower's HW (it may go down: it is the leader's, capped at the local LEO);
- :class:`IncrementLogStartOffset` - ``Log.delete_records_before(offset)``;
- :class:`ListLeaderOffsets` - ask the leader (ListOffsets, earliest and latest) and pass the answer
  to :meth:`FollowerFetch.on_leader_offsets`;
- :class:`Backoff` - retry this partition after ``replica.fetch.backoff.ms``;
- :class:`Fenced` - stop fetching until the metadata brings a newer leader epoch
  (:meth:`FollowerFetch.on_leader_change`).

The local log is read through :class:`LocalLog` (``kcompat.log.Log`` satisfies it): its LEO, log
start offset, latest leader epoch and OffsetForLeaderEpoch lookup, all in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LocalLog(Protocol):
    """What the follower logic reads of its own log (a ``kcompat.log.Log``)."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def latest_epoch(self) -> int | None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...


# -- actions ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Truncate:
    """Remove every local record at ``offset`` and above (a whole batch containing it goes too)."""

    offset: int


@dataclass(frozen=True)
class TruncateFullyAndStartAt:
    """Drop the whole local log and restart it empty at ``offset`` (the leader's log start, or
    its local log start when older offsets are in remote storage: then ``log_start_offset`` is the
    leader's log start, below ``offset``; KIP-405)."""

    offset: int
    log_start_offset: int | None = None


@dataclass(frozen=True)
class AppendRecords:
    """Append these complete batches as they are (``records``: bytes-like; offsets
    ``first_offset``..``last_offset``)."""

    records: memoryview
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class SetHighWatermark:
    high_watermark: int


@dataclass(frozen=True)
class IncrementLogStartOffset:
    offset: int


@dataclass(frozen=True)
class ListLeaderOffsets:
    """OFFSET_OUT_OF_RANGE: fetch the leader's earliest and latest offsets (ListOffsets with
    ``replica_id`` = this broker, timestamps -2 and -1) for :meth:`FollowerFetch.on_leader_offsets`;
    ``tiered`` (OFFSET_MOVED_TO_TIERED_STORAGE, KIP-405): its earliest local offset (-4) too."""

    tiered: bool = False


@dataclass(frozen=True)
class Backoff:
    """Retry this partition later; ``error`` is why."""

    error: ErrorCode


@dataclass(frozen=True)
class Fenced:
    """The leader has a newer epoch than ours (FENCED_LEADER_EPOCH): wait for the metadata."""

    error: ErrorCode


Action = Truncate | TruncateFullyAndStartAt | AppendRecords | SetHighWatermark | IncrementLogStartOffset \
    | ListLeaderOffsets | Backoff | Fenced


class FetchPosition(NamedTuple):
    """The Fetch request fields of this partition: ``fetch_offset`` (= the local LEO),
    ``last_fetched_epoch`` (v12+; the local latest epoch, -1 if none), ``current_leader_epoch``
    (v9+), ``log_start_offset`` (v5+, the follower's)."""

    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    log_start_offset: int


class FollowerFetch:
    """Replication of one partition from ``leader_id`` in ``leader_epoch``.

    States: ``new`` (until :meth:`start`), ``fetching``, ``awaiting_offsets`` (after
    OFFSET_OUT_OF_RANGE), ``fenced`` (until :meth:`on_leader_change`).
    """

    def __init__(self, topic: str, partition: int, *, leader_id: int, leader_epoch: int) -> None:
        self.topic = topic
        self.partition = partition
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.state = "new"

    def __repr__(self) -> str:
        return (f"FollowerFetch({self.topic}-{self.partition} from {self.leader_id} epoch {self.leader_epoch}, "
                f"{self.state})")

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, log: LocalLog, high_watermark: int) -> list[Action]:
        """Become follower (Kafka ``AbstractFetcherThread.addPartitions`` with
        ``initialFetchOffset``): a log with leader epochs fetches from its LEO and lets the leader
        report a divergence; a log without any is first truncated to its ``high_watermark``."""
        self.state = "fetching"
        if log.latest_epoch is None and high_watermark < log.log_end_offset:
            return [Truncate(max(high_watermark, log.log_start_offset))]
        return []

    def on_leader_change(self, leader_id: int, leader_epoch: int, log: LocalLog, high_watermark: int) -> list[Action]:
        """New metadata for this partition while still a follower: follow ``leader_id`` in
        ``leader_epoch`` (ignored unless newer), restarting as in :meth:`start`."""
        if leader_epoch <= self.leader_epoch and self.state != "new":
            return []
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        return self.start(log, high_watermark)

    def fetch_position(self, log: LocalLog) -> FetchPosition | None:
        """What to put in the next Fetch for this partition; None while fenced or waiting for the
        leader's offsets."""
        if self.state != "fetching":
            return None
        latest = log.latest_epoch
        return FetchPosition(log.log_end_offset, UNDEFINED_EPOCH if latest is None else latest, self.leader_epoch,
                             log.log_start_offset)

    # -- responses --------------------------------------------------------------------------------
    def on_fetch_response(self, log: LocalLog, *, error_code: int, high_watermark: int, log_start_offset: int,
                          records, diverging_epoch: tuple[int, int] | None = None,
                          fetch_offset: int | None = None) -> list[Action]:
        """Actions for one partition of a Fetch response (Kafka ``processFetchRequest``).

        ``diverging_epoch``: ``(epoch, end_offset)`` of the response's DivergingEpoch when set
        (epoch >= 0 or end offset >= 0); ``fetch_offset``: the offset the request asked for
        (default the current LEO) - a response to an older request is dropped.

        - a diverging epoch: truncate (see :meth:`truncation_offset`; also when that is the LEO,
          to drop leader epochs above it) and nothing else - the HW and log start are taken from
          the next response, after the truncation;
        - records: append the complete batches (a trailing partial batch is left for the next
          fetch), then HW = min(leader HW, local LEO), then the leader's log start offset if it
          is above ours and not above that HW;
        - OFFSET_OUT_OF_RANGE: ask for the leader's offsets; FENCED_LEADER_EPOCH: fenced; any
          other error: back off.
        """
        leo = log.log_end_offset
        if self.state != "fetching" or (fetch_offset is not None and fetch_offset != leo):
            return []
        try:
            code = ErrorCode(error_code)
        except ValueError:
            return [Backoff(ErrorCode.UNKNOWN_SERVER_ERROR)]
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self.state = "awaiting_offsets"
            return [ListLeaderOffsets()]
        if code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
            # the leader has our next offset only in remote storage (KIP-405): restart at its
            # local log start (Kafka ``handleOffsetMovedToTieredStorage``)
            self.state = "awaiting_offsets"
            return [ListLeaderOffsets(tiered=True)]
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            self.state = "fenced"
            return [Fenced(code)]
        if code != ErrorCode.NONE:
            return [Backoff(code)]
        if diverging_epoch is not None and (diverging_epoch[0] >= 0 or diverging_epoch[1] >= 0):
            # even at the LEO (Kafka truncates then too): the epoch cache may end in an epoch this
            # replica started as leader without appending a record, which the leader never had
            # and would answer as diverging on every fetch
            return [Truncate(self.truncation_offset(log, diverging_epoch[0], diverging_epoch[1], leo))]
        actions: list[Action] = []
        new_leo = leo
        view = memoryview(records).cast("B") if records else memoryview(b"")
        end = 0
        first = None
        try:
            for pos, h in rb.iter_batches(view):
                if first is None:
                    first = h.base_offset
                end = pos + h.size
                new_leo = h.next_offset
        except rb.CorruptRecordError:
            return [Backoff(ErrorCode.CORRUPT_MESSAGE)]
        if end:
            actions.append(AppendRecords(view[:end], first, new_leo - 1))
        start_after = log.log_start_offset
        if first is not None and first < leo == log.log_start_offset:
            start_after = first   # the append restarts the empty log at the batch (see append_as_follower)
        hw = max(start_after, min(high_watermark, new_leo))
        actions.append(SetHighWatermark(hw))
        if start_after < log_start_offset <= hw:
            actions.append(IncrementLogStartOffset(log_start_offset))
        return actions

    @staticmethod
    def truncation_offset(log: LocalLog, leader_epoch: int, leader_end_offset: int, fetch_offset: int) -> int:
        """Where to truncate given the leader's ``(epoch, end offset)`` for our last fetched epoch
        (Kafka ``getOffsetTruncationState``):

        - leader end offset undefined: the fetch offset (nothing to truncate);
        - leader epoch undefined: min(leader end offset, fetch offset);
        - we know that epoch: min(its local end offset, leader end offset, fetch offset);
        - we do not (a leader epoch between ours): our end of the largest epoch below it - the next
          fetch carries our new latest epoch and the leader answers again;
        - every local epoch is larger: min(leader end offset, fetch offset).
        """
        if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
            return fetch_offset
        if leader_epoch == UNDEFINED_EPOCH:
            return min(leader_end_offset, fetch_offset)
        local_epoch, local_end = log.end_offset_for_epoch(leader_epoch)
        if local_end == UNDEFINED_EPOCH_OFFSET:
            return min(leader_end_offset, fetch_offset)
        if local_epoch != leader_epoch:
            return min(local_end, fetch_offset)
        return min(local_end, leader_end_offset, fetch_offset)

    def on_leader_offsets(self, log: LocalLog, *, leader_log_start_offset: int,
                          leader_log_end_offset: int, leader_local_log_start_offset: int | None = None) -> list[Action]:
        """The leader's offsets after OFFSET_OUT_OF_RANGE (Kafka ``fetchOffsetAndTruncate``):
        a leader behind us (unclean election) - truncate to its LEO; a leader whose log starts
        beyond our LEO (we were away while it deleted old segments) - restart our log empty at its
        log start; otherwise fetch again from our LEO. After OFFSET_MOVED_TO_TIERED_STORAGE
        (``leader_local_log_start_offset`` given): restart empty at the leader's local log start,
        keeping its log start offset as ours (the offsets between are in remote storage)."""
        if self.state != "awaiting_offsets":
            return []
        self.state = "fetching"
        leo = log.log_end_offset
        if leader_log_end_offset < leo:
            return [Truncate(leader_log_end_offset)]
        if leader_local_log_start_offset is not None and leader_local_log_start_offset > leo:
            return [TruncateFullyAndStartAt(leader_local_log_start_offset,
                                            min(leader_log_start_offset, leader_local_log_start_offset))]
        if leader_log_start_offset > leo:
            return [TruncateFullyAndStartAt(leader_log_start_offset)]
        return []
