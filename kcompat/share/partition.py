"""Share-partition state machine: what a partition leader keeps for one (share group,
topic-partition) — KIP-932's share-partition, Kafka's ``kafka.server.share.SharePartition``
(core/src/main/java/kafka/server/share/SharePartition.java, Kafka 4.3 with KIP-1206 record-limit
acquisition and KIP-1222 RENEW acknowledgements).

Records between the share-partition start offset (SPSO) and end offset (SPEO) are *in flight*:
AVAILABLE (may be handed out), ACQUIRED (handed to one member under an acquisition lock until
``now_ms + record_lock_duration_ms``), ACKNOWLEDGED or ARCHIVED (done, never handed out again).
A record's delivery count counts its acquisitions; once it reaches
``group.share.delivery.count.limit`` a release archives it instead of making it available.
The SPSO moves past every prefix of done records; at most ``group.share.partition.max.record.locks``
offsets are in flight, beyond which no new records are acquired.

Pure: no I/O, no clock, no asyncio; time is a ``now_ms`` argument (ms since the epoch or any
monotonic origin, used consistently). The broker reads the log from :meth:`SharePartition.fetch_offset`,
passes the batches it read to :meth:`SharePartition.acquire`, applies acknowledgements with
:meth:`SharePartition.acknowledge`, calls :meth:`SharePartition.expire_locks` at
:meth:`SharePartition.next_deadline`, and writes :meth:`SharePartition.persisted_state` to the
share coordinator (WriteShareGroupState) after changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

from kcompat.protocol.errors import ErrorCode
from kcompat.share.inflight import (
    ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, AcknowledgeType, DeliveryState, Segment, Window,
)

__all__ = [
    "AckBatch", "AcknowledgeType", "AcquiredRecords", "DeliveryState", "LogBatch", "PersistedBatch",
    "SharePartition", "SharePartitionConfig",
]


@dataclass(frozen=True)
class SharePartitionConfig:
    """Per-group share-partition limits, with Kafka 4.3's defaults (ShareGroupConfig)."""

    record_lock_duration_ms: int = 30_000
    """``group.share.record.lock.duration.ms``: how long an acquisition lock lasts (ms)."""
    delivery_count_limit: int = 5
    """``group.share.delivery.count.limit``: deliveries after which a released record is ARCHIVED."""
    max_record_locks: int = 2000
    """``group.share.partition.max.record.locks``: most offsets in flight (SPEO - SPSO)."""


class PersistedBatch(NamedTuple):
    """A state batch of WriteShareGroupState / ReadShareGroupState / ``ShareSnapshot``:
    offsets ``first_offset..last_offset`` (inclusive) in ``delivery_state`` (a
    :class:`DeliveryState` id: 0, 2 or 4) after ``delivery_count`` deliveries."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class AcquiredRecords(NamedTuple):
    """ShareFetchResponse ``AcquiredRecords``: offsets ``first_offset..last_offset`` (inclusive)
    acquired by the fetching member, this being delivery number ``delivery_count``."""

    first_offset: int
    last_offset: int
    delivery_count: int


LogBatch = tuple[int, int] | tuple[int, int, bool]
"""A record batch the broker read: ``(base_offset, last_offset[, is_control])``."""
AckBatch = tuple[int, int, Sequence[int]]
"""A ShareAcknowledge/ShareFetch ``AcknowledgementBatch``: ``(first_offset, last_offset, types)``
with ``types`` either one :class:`AcknowledgeType` for the whole range or one per offset."""

_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


class SharePartition:
    """The in-flight records of one share partition (see the module docstring).

    ``SharePartition(config, start_offset, state_batches)`` loads persisted state
    (ReadShareGroupState: the SPSO and its state batches). Offsets from the SPSO up to the last
    state batch that no batch covers were never recorded as delivered and are AVAILABLE with
    delivery count 0 (Kafka's "gap window"); batches below the SPSO are ignored; an ACQUIRED
    batch is loaded as AVAILABLE; an AVAILABLE batch whose count has reached the delivery limit
    is loaded ARCHIVED (a release would archive it; Kafka only lets that happen one delivery
    later). Overlapping batches raise :class:`ValueError`.

    ``config`` may be replaced at any time (a group config change); it applies to what follows.
    """

    __slots__ = ("config", "_w")

    def __init__(self, config: SharePartitionConfig, start_offset: int,
                 state_batches: Iterable[PersistedBatch | tuple] = ()) -> None:
        self.config = config
        w = self._w = Window(start_offset)
        limit = config.delivery_count_limit
        for batch in sorted(state_batches, key=lambda b: (b[0], b[1])):
            first, last, state, count = int(batch[0]), int(batch[1]), DeliveryState(batch[2]), max(int(batch[3]), 0)
            if first > last:
                raise ValueError(f"state batch {first}-{last}: first offset past last offset")
            if last < w.start:
                continue
            first = max(first, w.start)
            if first < w.end:
                raise ValueError(f"state batch {first}-{last} overlaps offsets before {w.end}")
            if first > w.end:
                w.extend(first - 1, AVAILABLE, 0)
            if state == ACQUIRED:
                state = AVAILABLE
            if state == AVAILABLE and count >= limit:
                state = ARCHIVED
            w.extend(last, state, count)
        w.trim()

    # ------------------------------------------------------------------ views

    @property
    def start_offset(self) -> int:
        """SPSO: every offset below it is done (or was never a deliverable record)."""
        return self._w.start

    @property
    def end_offset(self) -> int:
        """SPEO, exclusive: one past the last in-flight offset (Kafka's ``endOffset`` is the
        inclusive last one); ``start_offset`` when nothing is in flight."""
        return self._w.end

    @property
    def in_flight_count(self) -> int:
        """Offsets in the window, ``end_offset - start_offset`` (Kafka's ``numInFlightRecords``),
        the number bounded by ``max_record_locks``."""
        return self._w.end - self._w.start

    @property
    def delivery_complete_count(self) -> int:
        """ACKNOWLEDGED/ARCHIVED offsets at or past the SPSO (WriteShareGroupState v1
        ``DeliveryCompleteCount``, used for share-group lag)."""
        return sum(s.last - s.first + 1 for s in self._w.segs if s.state >= ACKNOWLEDGED)

    def in_flight_records(self) -> list[tuple[int, int, DeliveryState, int, str | None, int | None]]:
        """The window as ``(first, last, state, delivery_count, member_id, lock_deadline_ms)``
        ranges in offset order (member and deadline only for ACQUIRED)."""
        return [(s.first, s.last, s.state, s.count, s.member, s.deadline) for s in self._w.segs]

    def state_of(self, offset: int) -> tuple[DeliveryState, int, str | None] | None:
        """``(state, delivery_count, member_id)`` of an in-flight offset, None outside the window."""
        w = self._w
        if not w.start <= offset < w.end:
            return None
        s = w.segs[w.index(offset)]
        return s.state, s.count, s.member

    def acquired_by_member(self) -> dict[str, int]:
        """Number of ACQUIRED records per member id."""
        counts: dict[str, int] = {}
        for s in self._w.segs:
            if s.state == ACQUIRED:
                counts[s.member] = counts.get(s.member, 0) + s.last - s.first + 1
        return counts

    def next_deadline(self) -> int | None:
        """Earliest acquisition-lock deadline (ms), None when nothing is ACQUIRED."""
        deadlines = [s.deadline for s in self._w.segs if s.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def fetch_offset(self) -> int | None:
        """Where the broker should read the log for the next acquisition: the first AVAILABLE
        offset in the window, else ``end_offset``; None when nothing is AVAILABLE and the window
        already holds ``max_record_locks`` offsets (Kafka's ``nextFetchOffset`` and
        ``canAcquireRecords``). The offset is at or past the SPSO: the broker keeps the SPSO at
        or past the log start offset with :meth:`move_start`."""
        w = self._w
        for s in w.segs:
            if s.state == AVAILABLE:
                return s.first
        if w.end - w.start >= self.config.max_record_locks:
            return None
        return w.end

    def persisted_state(self) -> tuple[int, list[PersistedBatch]]:
        """``(start_offset, state_batches)`` to write with WriteShareGroupState: the whole
        window, coalesced into ranges of equal state and count.

        ACQUIRED records are written AVAILABLE with the delivery count they had before this
        acquisition: Kafka never persists an acquisition (ACQUIRED is not a persisted state), so
        after a leader change or restart the record is delivered again with the same count.
        Writing the whole window (Kafka writes only the batches an operation changed and the
        share coordinator merges them) makes each write a complete, idempotent picture."""
        out: list[list[int]] = []
        for s in self._w.segs:
            if s.state == ACQUIRED:
                state, count = AVAILABLE, s.count - 1
            else:
                state, count = s.state, s.count
            if out and out[-1][2] == state and out[-1][3] == count:
                out[-1][1] = s.last
            else:
                out.append([s.first, s.last, state, count])
        return self._w.start, [PersistedBatch(f, l, int(st), c) for f, l, st, c in out]

    def __repr__(self) -> str:
        return (f"SharePartition(start={self._w.start}, end={self._w.end}, "
                f"segments={len(self._w.segs)})")

    # ------------------------------------------------------------------ acquisition

    def acquire(self, member_id: str, log_batches: Sequence[LogBatch], max_records: int, now_ms: int, *,
                record_limit_mode: bool = False, batch_size: int | None = None,
                fetch_offset: int | None = None) -> list[AcquiredRecords]:
        """Acquire records of ``log_batches`` for ``member_id``; returns the acquired ranges,
        maximal contiguous runs of equal delivery count, in offset order.

        ``log_batches``: the record batches the broker read from :meth:`fetch_offset` (sorted,
        not overlapping), each ``(base_offset, last_offset)`` or ``(base, last, is_control)``.
        Offsets between batches hold no record (compaction) and control batches are never
        delivered: such offsets become ARCHIVED (Kafka hands them out and the client
        acknowledges them as GAP; its client skips offsets outside the acquired ranges, so
        leaving them out is equivalent). The broker may pass an aborted transaction's batch
        (read_committed) as a control batch to the same effect. ``fetch_offset``: where the log
        was read from — AVAILABLE records from there up to the first batch are gone (compacted
        away) and are archived (Kafka's ``maybeArchiveStaleBatches``). Pass it: without it such
        records stay AVAILABLE and :meth:`fetch_offset` keeps pointing at them. It stays right
        even if the partition changed while the log was read.

        Rules (Kafka's ``SharePartition.acquire``): records below the SPSO are never acquired;
        AVAILABLE records inside the window become ACQUIRED with their count + 1; records past
        the window end enter it ACQUIRED with count 1, unless the window already holds
        ``max_record_locks`` offsets; ACQUIRED/ACKNOWLEDGED/ARCHIVED records are skipped. Every
        acquisition is locked until ``now_ms + record_lock_duration_ms``.

        ``max_records`` (ShareFetch MaxRecords): in batch-optimized mode (ShareAcquireMode 0)
        whole log batches are acquired until ``max_records`` is reached, so a call may return
        more; with ``record_limit_mode`` (ShareAcquireMode 1, KIP-1206) exactly up to
        ``max_records``, and the rest of a new log batch enters the window AVAILABLE with
        delivery count 0. ``batch_size`` (ShareFetch BatchSize) starts a new returned range at a
        log batch boundary once a range holds that many offsets.

        Poison-record isolation (Kafka 4.2+ ``throttleRecordsDelivery``): a record on its last
        delivery attempt (count ``limit - 1``, limit > 2) is acquired alone; once an AVAILABLE
        record's count reaches ``max(2, ceil(limit / 2))``, only
        ``max(1, batch_length >> (count - threshold + 1))`` records are acquired, in a call of
        their own.
        """
        if max_records <= 0 or not log_batches:
            return []
        w = self._w
        cfg = self.config
        limit = cfg.delivery_count_limit
        throttle = max(2, -(-limit // 2))
        isolate_last = limit > 2
        deadline = now_ms + cfg.record_lock_duration_ms
        out: list[list[int]] = []  # [first, last, delivery_count]

        def emit(first: int, last: int, count: int, at_batch_base: bool) -> None:
            if out:
                p = out[-1]
                if (p[1] + 1 == first and p[2] == count
                        and not (batch_size and at_batch_base and first - p[0] >= batch_size)):
                    p[1] = last
                    return
            out.append([first, last, count])

        n = 0           # records acquired by this call
        cap = None      # throttled: stop after this many
        stop = False
        prev_last = fetch_offset - 1 if fetch_offset is not None else None
        last_seen = None
        for batch in log_batches:
            base, last = batch[0], batch[1]
            control = len(batch) > 2 and bool(batch[2])
            if base > last or (last_seen is not None and base <= last_seen):
                raise ValueError(f"log batches must be sorted and disjoint: {base}-{last} after {last_seen}")
            last_seen = last
            if prev_last is not None and base > prev_last + 1:
                self._archive(prev_last + 1, base - 1, acquired_too=False)   # gap inside the window
            prev_last = last
            lo = base if base > w.start else w.start
            if last < lo:
                continue                                                   # below the SPSO
            if lo < w.end:                                                 # inside the window
                hi = last if last < w.end else w.end - 1
                if control:
                    self._archive(lo, hi, acquired_too=False)
                else:
                    segs = w.segs
                    i, j = w.isolate(lo, hi)
                    k = i
                    while k < j:
                        s = segs[k]
                        if s.state != AVAILABLE:
                            k += 1
                            continue
                        c = s.count
                        if isolate_last and c >= limit - 1:
                            if not n:
                                if s.last > s.first:
                                    w.split(s.first + 1)
                                    j += 1
                                self._take(s, member_id, deadline)
                                emit(s.first, s.first, c + 1, s.first == base)
                                n = 1
                            stop = True
                            break
                        if c >= throttle and cap is None:
                            if n:
                                stop = True
                                break
                            cap = max(1, (last - base + 1) >> (c - throttle + 1))
                        room = None
                        if record_limit_mode:
                            room = max_records - n
                        if cap is not None and (room is None or cap - n < room):
                            room = cap - n
                        if room is not None and s.last - s.first + 1 > room:
                            w.split(s.first + room)
                            j += 1
                        self._take(s, member_id, deadline)
                        n += s.last - s.first + 1
                        emit(s.first, s.last, c + 1, s.first == base)
                        if (record_limit_mode and n >= max_records) or (cap is not None and n >= cap):
                            stop = True
                            break
                        k += 1
                    w.coalesce(i, j)
                    if cap is not None:
                        stop = True
                if stop:
                    break
            if last >= w.end:                                              # past the window end
                w.trim()
                capacity = cfg.max_record_locks - (w.end - w.start)
                if capacity <= 0 or n >= max_records:
                    break
                lo2 = lo if lo > w.end else w.end
                if lo2 > w.end:
                    w.extend(lo2 - 1, ARCHIVED, 0)
                if control:
                    w.extend(last, ARCHIVED, 0)
                elif record_limit_mode:
                    take = min(max_records - n, capacity, last - lo2 + 1)
                    w.extend(lo2 + take - 1, ACQUIRED, 1, member_id, deadline)
                    if lo2 + take - 1 < last:
                        w.extend(last, AVAILABLE, 0)
                    emit(lo2, lo2 + take - 1, 1, lo2 == base)
                    n += take
                else:
                    w.extend(last, ACQUIRED, 1, member_id, deadline)
                    emit(lo2, last, 1, lo2 == base)
                    n += last - lo2 + 1
            if n >= max_records:
                break
        w.trim()
        return [AcquiredRecords(f, l, c) for f, l, c in out]

    @staticmethod
    def _take(s: Segment, member_id: str, deadline: int) -> None:
        s.state = ACQUIRED
        s.count += 1
        s.member = member_id
        s.deadline = deadline

    # ------------------------------------------------------------------ acknowledgement

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now_ms: int) -> ErrorCode:
        """Apply one request's acknowledgements for this partition, all or nothing.

        ``batches``: ``(first_offset, last_offset, types)`` in offset order, ``types`` one
        :class:`AcknowledgeType` for the range or one per offset. GAP (an offset without a
        record) and REJECT archive, ACCEPT acknowledges, RELEASE makes AVAILABLE again — or
        ARCHIVED once the delivery count has reached the limit — and RENEW extends the lock to
        ``now_ms + record_lock_duration_ms``, leaving the record ACQUIRED. Then the SPSO moves
        past the done prefix.

        Errors (nothing changes; Kafka rolls back every transition of the request for the
        partition): INVALID_REQUEST for a malformed request (KafkaApis
        ``validateAcknowledgementBatches``: first > last, batches out of order or overlapping,
        no types, a type count that is neither 1 nor the range length, an unknown type) and for
        offsets past the window end; INVALID_RECORD_STATE when any offset at or past the SPSO
        is not ACQUIRED by ``member_id`` (not acquired, another member's, already acknowledged,
        acknowledged twice in the request) or nothing is in flight. Offsets below the SPSO are
        ignored, as Kafka does: they are done, or left with a log start offset move.
        """
        prev = -1
        for batch in batches:
            first, last, types = batch
            if first > last or first < prev or not types:
                return ErrorCode.INVALID_REQUEST
            if len(types) != 1 and len(types) != last - first + 1:
                return ErrorCode.INVALID_REQUEST
            for t in types:
                if t not in _ACK_TYPES:
                    return ErrorCode.INVALID_REQUEST
            prev = last

        w = self._w
        start = w.start
        prev = None
        for first, last, _types in batches:
            if last < start:
                prev = last
                continue
            if prev is not None and first <= prev:
                return ErrorCode.INVALID_RECORD_STATE      # the same offset twice
            prev = last
            if not w.segs:
                return ErrorCode.INVALID_RECORD_STATE
            if last >= w.end:
                return ErrorCode.INVALID_REQUEST
            for s in w.overlapping(max(first, start), last):
                if s.state != ACQUIRED or s.member != member_id:
                    return ErrorCode.INVALID_RECORD_STATE

        renewed = now_ms + self.config.record_lock_duration_ms
        for first, last, types in batches:
            if last < start:
                continue
            lo = first if first > start else start
            if len(types) == 1:
                self._apply(lo, last, types[0], renewed)
                continue
            run = lo
            t0 = types[lo - first]
            for o in range(lo + 1, last + 1):
                t = types[o - first]
                if t != t0:
                    self._apply(run, o - 1, t0, renewed)
                    run = o
                    t0 = t
            self._apply(run, last, t0, renewed)
        w.trim()
        return ErrorCode.NONE

    def _apply(self, lo: int, hi: int, ack_type: int, renewed_deadline: int) -> None:
        w = self._w
        i, j = w.isolate(lo, hi)
        segs = w.segs
        limit = self.config.delivery_count_limit
        for k in range(i, j):
            s = segs[k]
            if ack_type == AcknowledgeType.RENEW:
                s.deadline = renewed_deadline
                continue
            if ack_type == AcknowledgeType.ACCEPT:
                s.state = ACKNOWLEDGED
            elif ack_type == AcknowledgeType.RELEASE:
                s.state = AVAILABLE if s.count < limit else ARCHIVED
            else:                                           # GAP, REJECT
                s.state = ARCHIVED
            s.member = None
            s.deadline = None
        w.coalesce(i, j)

    # ------------------------------------------------------------------ releases

    def release_member(self, member_id: str, now_ms: int) -> bool:
        """Release every record ``member_id`` holds (it left the group or its share session
        closed; Kafka's ``releaseAcquiredRecords``): AVAILABLE again, ARCHIVED once the delivery
        count has reached the limit. The delivery was already counted at acquisition. Returns
        whether anything changed (``now_ms`` is not needed; it keeps the calls uniform)."""
        return self._release(lambda s: s.member == member_id)

    def expire_locks(self, now_ms: int) -> bool:
        """Release records whose acquisition lock deadline is ``<= now_ms``, as
        :meth:`release_member` does (Kafka's acquisition lock timer task). Returns whether
        anything changed."""
        return self._release(lambda s: s.deadline <= now_ms)

    def _release(self, matches) -> bool:
        w = self._w
        limit = self.config.delivery_count_limit
        changed = False
        for s in w.segs:
            if s.state == ACQUIRED and matches(s):
                s.state = AVAILABLE if s.count < limit else ARCHIVED
                s.member = None
                s.deadline = None
                changed = True
        if changed:
            w.coalesce()
            w.trim()
        return changed

    # ------------------------------------------------------------------ offsets moves

    def move_start(self, offset: int, *, reset: bool = False) -> bool:
        """Move the SPSO to ``offset``.

        Without ``reset`` (the log start offset passed the SPSO: retention, DeleteRecords —
        Kafka's ``updateCacheAndOffsets``) only a forward move counts: offsets below ``offset``
        leave the window, whatever their state, and later acknowledgements of them are ignored;
        offsets above keep their state. With ``reset`` (AlterShareGroupOffsets, a group reset,
        which Kafka performs by re-initialising the share state) the whole window is discarded
        and starts empty at ``offset``, backwards or forwards. Returns whether anything changed."""
        w = self._w
        if reset:
            changed = bool(w.segs) or w.start != offset
            w.segs.clear()
            w.start = w.end = offset
            return changed
        if offset <= w.start:
            return False
        w.drop_below(offset)
        w.trim()
        return True

    def archive(self, ranges: Iterable[tuple[int, int]]) -> bool:
        """ARCHIVE the AVAILABLE and ACQUIRED records of ``ranges`` (``(first, last)``
        inclusive), e.g. an aborted transaction's records under read_committed
        (``share.isolation.level``; Kafka's ``filterAbortedTransactionalAcquiredRecords``).
        Offsets outside the window are ignored. Returns whether anything changed."""
        changed = False
        for first, last in ranges:
            changed = self._archive(first, last, acquired_too=True) or changed
        if changed:
            self._w.trim()
        return changed

    def _archive(self, lo: int, hi: int, *, acquired_too: bool) -> bool:
        w = self._w
        lo = max(lo, w.start)
        hi = min(hi, w.end - 1)
        if lo > hi:
            return False
        top = ACQUIRED if acquired_too else AVAILABLE
        if not any(s.state <= top for s in w.overlapping(lo, hi)):
            return False
        i, j = w.isolate(lo, hi)
        segs = w.segs
        for k in range(i, j):
            s = segs[k]
            if s.state <= top:
                s.state = ARCHIVED
                s.member = None
                s.deadline = None
        w.coalesce(i, j)
        return True

