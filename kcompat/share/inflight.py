"""The in-flight window of a share partition as a sorted list of offset ranges.

Kafka's ``SharePartition`` keeps ``cachedState``, a map from first offset to ``InFlightBatch``
that holds one ``InFlightState`` per batch and explodes into one state per offset when a batch is
split (core/src/main/java/kafka/server/share/SharePartition.java,
server/src/main/java/org/apache/kafka/server/share/fetch/InFlightBatch.java). Here the window is a
list of :class:`Segment` s — maximal ranges of offsets that share state, delivery count, owner
and lock deadline — that covers ``[start, end)`` without holes: a change to part of a segment
splits it, and :meth:`Window.coalesce` merges neighbours that became equal again. Acquisitions and
acknowledgements arrive as ranges of hundreds of records, so the list stays short (a handful of
segments for a window of thousands of records) and no operation loops per offset.

Pure: no I/O, no clock; :mod:`kcompat.share.partition` builds the share-partition rules on top.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from operator import attrgetter


class DeliveryState(enum.IntEnum):
    """State of an in-flight record (Kafka's ``RecordState``). The values are the ids that
    WriteShareGroupState/ReadShareGroupState state batches and ``ShareSnapshot``/``ShareUpdate``
    records carry; ACQUIRED is never persisted (the spec lists 0:Available, 2:Acked, 4:Archived)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """Acknowledge types of ShareFetch/ShareAcknowledge ``AcknowledgeTypes``
    (0:Gap, 1:Accept, 2:Release, 3:Reject, 4:Renew — Renew from v2, KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


AVAILABLE = DeliveryState.AVAILABLE
ACQUIRED = DeliveryState.ACQUIRED
ACKNOWLEDGED = DeliveryState.ACKNOWLEDGED
ARCHIVED = DeliveryState.ARCHIVED


def is_done(state: int) -> bool:
    """ACKNOWLEDGED and ARCHIVED are terminal ("delivery complete"): such records are never
    acquired again and the start offset may move past them."""
    return state >= ACKNOWLEDGED


class Segment:
    """Offsets ``first..last`` (inclusive) in one state.

    ``count`` is the delivery count (deliveries so far, the current one included while
    ACQUIRED); ``member`` and ``deadline`` (acquisition-lock expiry, ms) are set only while
    ACQUIRED."""

    __slots__ = ("first", "last", "state", "count", "member", "deadline")

    def __init__(self, first: int, last: int, state: DeliveryState, count: int,
                 member: str | None = None, deadline: int | None = None) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.count = count
        self.member = member
        self.deadline = deadline

    def same_as(self, other: Segment) -> bool:
        """Whether the two could be one segment (everything but the offsets is equal)."""
        return (self.state == other.state and self.count == other.count
                and self.member == other.member and self.deadline == other.deadline)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return (f"Segment({self.first}-{self.last} {self.state.name} n={self.count}"
                f" {self.member!r} {self.deadline})")


_first = attrgetter("first")


class Window:
    """Offsets ``[start, end)`` as contiguous, sorted segments (empty iff ``start == end``)."""

    __slots__ = ("segs", "start", "end")

    def __init__(self, start: int) -> None:
        self.segs: list[Segment] = []
        self.start = start
        self.end = start

    def index(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (``start <= offset < end``)."""
        return bisect_right(self.segs, offset, key=_first) - 1

    def split(self, offset: int) -> int:
        """Make ``offset`` the first offset of a segment; returns that segment's index
        (``len(segs)`` when ``offset >= end``, 0 when ``offset <= start``)."""
        segs = self.segs
        if offset >= self.end:
            return len(segs)
        if offset <= self.start:
            return 0
        i = bisect_right(segs, offset, key=_first) - 1
        s = segs[i]
        if s.first == offset:
            return i
        segs.insert(i + 1, Segment(offset, s.last, s.state, s.count, s.member, s.deadline))
        s.last = offset - 1
        return i + 1

    def isolate(self, lo: int, hi: int) -> tuple[int, int]:
        """Split so that ``segs[i:j]`` cover exactly ``[lo, hi]`` (clipped to the window)."""
        i = self.split(lo)
        return i, self.split(hi + 1)

    def coalesce(self, i: int = 0, j: int | None = None) -> None:
        """Merge equal neighbours among ``segs[i-1 : j+1]`` (everything when no bounds)."""
        segs = self.segs
        stop = len(segs) if j is None else min(j + 1, len(segs))
        k = max(i, 1)
        while k < stop:
            a = segs[k - 1]
            b = segs[k]
            if a.same_as(b):
                a.last = b.last
                del segs[k]
                stop -= 1
            else:
                k += 1

    def extend(self, last: int, state: DeliveryState, count: int,
               member: str | None = None, deadline: int | None = None) -> Segment:
        """Append offsets ``end..last`` in one state; returns the segment now holding them."""
        seg = Segment(self.end, last, state, count, member, deadline)
        segs = self.segs
        if segs and segs[-1].same_as(seg):
            segs[-1].last = last
            seg = segs[-1]
        else:
            segs.append(seg)
        self.end = last + 1
        return seg

    def trim(self) -> bool:
        """Drop the prefix of terminal (ACKNOWLEDGED/ARCHIVED) segments: the start offset moves
        to the first record that is not done, or to ``end``. Returns whether it moved."""
        segs = self.segs
        k = 0
        n = len(segs)
        while k < n and segs[k].state >= ACKNOWLEDGED:
            k += 1
        if not k:
            return False
        self.start = segs[k - 1].last + 1
        del segs[:k]
        return True

    def drop_below(self, offset: int) -> None:
        """Remove every offset below ``offset`` (``start`` becomes ``max(start, offset)``; an
        ``offset`` past ``end`` empties the window at ``offset``)."""
        if offset <= self.start:
            return
        if offset >= self.end:
            self.segs.clear()
            self.start = self.end = offset
            return
        i = self.split(offset)
        del self.segs[:i]
        self.start = offset

    def overlapping(self, lo: int, hi: int):
        """Segments that hold any of ``[lo, hi]`` (no splitting), in offset order."""
        segs = self.segs
        if lo >= self.end or hi < self.start or not segs:
            return
        k = max(self.index(max(lo, self.start)), 0)
        n = len(segs)
        while k < n:
            s = segs[k]
            if s.first > hi:
                return
            yield s
            k += 1
