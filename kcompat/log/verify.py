"""Checking stored batches before they are served: the CRC32C of every batch a read returns from
bytes this process has not validated yet.

What is validated already needs no check: batches appended by this process (the produce path
checked their CRC, a follower's append too), segments recovered at start-up (``LogSegment.recover``
checks every batch), and the tail of the active segment that start-up validates. What is not:
everything below the recovery point after an unclean shutdown, and every segment but the active
tail after a clean one - start-up does not read those (its cost must not grow with the log), so a
bit flipped there on disk would otherwise reach consumers. Kafka serves such bytes as they are
(the consumer's ``check.crcs`` finds the damage); kcompat checks each batch the first time a read
returns it and remembers the checked ranges, so a segment is checked at most once per process and
reads of recent data cost nothing extra.

A batch that fails (bad framing or CRC) is never returned: a read stops before it, and a read that
starts at it raises CorruptRecordError, which the log reports as CorruptLogError (the broker
answers CORRUPT_MESSAGE, as Kafka does for stored data it cannot frame). The CRC does not cover
``baseOffset``, ``batchLength``, ``partitionLeaderEpoch`` and ``magic`` (Kafka's format): a flip
there is caught only where it breaks the framing or the offsets' order.
"""

from __future__ import annotations

import bisect
import struct

from crc32c import crc32c

from kcompat.protocol.records import CRC_START, HEADER_SIZE, LOG_OVERHEAD, MAGIC

_FRAME = struct.Struct(">i4xbI")   # batchLength, (partitionLeaderEpoch), magic, crc at byte 8
_OFFSET = struct.Struct(">q")


class ReadVerifier:
    """Which byte ranges of one segment file still need a CRC check before they are served.

    Positions at or above :attr:`unverified_end` are trusted (written or validated by this
    process); below it, the ranges in ``_done`` (sorted, disjoint, batch-aligned ``[start, end)``)
    have been checked. Not thread-safe (the owning log's thread)."""

    __slots__ = ("unverified_end", "_starts", "_ends")

    def __init__(self, unverified_end: int = 0) -> None:
        self.unverified_end = unverified_end
        self._starts: list[int] = []
        self._ends: list[int] = []

    def reset(self, unverified_end: int, checked: tuple[int, int] | None = None) -> None:
        """Forget the checked ranges: ``[0, unverified_end)`` needs checking again, except
        ``checked`` (a ``(start, end)`` range known good)."""
        self.unverified_end = unverified_end
        self._starts, self._ends = [], []
        if checked is not None and checked[1] > checked[0]:
            self._add(*checked)

    def truncate(self, size: int) -> None:
        """The file was cut to ``size`` bytes."""
        if self.unverified_end > size:
            self.unverified_end = size
        while self._ends and self._ends[-1] > size:
            if self._starts[-1] >= size:
                self._starts.pop()
                self._ends.pop()
            else:
                self._ends[-1] = size

    def needs_check(self, start: int, end: int) -> bool:
        """True if some of ``[start, end)`` below :attr:`unverified_end` is unchecked."""
        end = min(end, self.unverified_end)
        if start >= end:
            return False
        i = bisect.bisect_right(self._starts, start) - 1
        return not (i >= 0 and self._ends[i] >= end)

    def check(self, data, start: int) -> tuple[int, str | None]:
        """Check the batches of ``data`` (bytes read at file position ``start``, whole batches)
        that need it. Returns ``(good, problem)``: the length of the leading part of ``data``
        that may be served, and why the batch after it may not (None if all is good)."""
        mv = memoryview(data)
        n = len(mv)
        limit = min(start + n, self.unverified_end)
        rel = 0
        run = None    # start of the run of batches checked in this call
        starts = self._starts
        while start + rel < limit:
            pos = start + rel
            i = bisect.bisect_right(starts, pos) - 1 if starts else -1
            if i >= 0 and self._ends[i] > pos:        # checked before: skip the range
                done_end = self._ends[i]
                if run is not None:
                    self._add(run, pos)                # (may merge ranges: done_end was read first)
                    run = None
                rel = min(done_end, start + n) - start
                continue
            problem = None
            if n - rel < HEADER_SIZE:
                problem = f"torn batch header ({n - rel} bytes)"
            else:   # batchLength, magic, crc: all a check needs (cheaper than a full header parse)
                length, magic, crc = _FRAME.unpack_from(mv, rel + 8)
                size = length + LOG_OVERHEAD
                if magic != MAGIC or length < HEADER_SIZE - LOG_OVERHEAD:
                    problem = f"invalid batch header (magic {magic}, batchLength {length})"
                elif rel + size > n:
                    problem = f"batch of {size} bytes runs past the data read"
                elif crc32c(mv[rel + CRC_START:rel + size]) != crc:
                    base = _OFFSET.unpack_from(mv, rel)[0]
                    problem = f"CRC mismatch in the batch at offset {base}"
            if problem is not None:
                if run is not None:
                    self._add(run, pos)
                return rel, f"{problem} at position {pos}"
            if run is None:
                run = pos
            rel += size
        if run is not None:
            self._add(run, start + rel)
        return n, None

    def _add(self, a: int, b: int) -> None:
        """Record ``[a, b)`` as checked, merging with touching ranges."""
        i = bisect.bisect_left(self._ends, a)        # first range that ends at or after a
        j = bisect.bisect_right(self._starts, b)     # ranges before j start at or before b
        if i < j:
            a = min(a, self._starts[i])
            b = max(b, self._ends[j - 1])
        self._starts[i:j] = [a]
        self._ends[i:j] = [b]
