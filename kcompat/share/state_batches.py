"""Persisted share-state batches and how the share coordinator combines them (Kafka's
``PersisterStateBatch`` and ``PersisterStateBatchCombiner``, share-coordinator module, Kafka 4.3).

A :class:`PersistedStateBatch` is a run of offsets ``[first_offset, last_offset]`` of a share
partition with one delivery state (0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED; 1 ACQUIRED and
3 ARCHIVING are not persisted by Kafka's share-partition leader but pass through) and one delivery
count. It is what WriteShareGroupState carries and ReadShareGroupState answers; the
share-partition leader converts its in-flight records to and from it.

:func:`combine_state_batches` merges the batches stored so far with newly written ones into a
sorted list of non-overlapping batches, as Kafka does, so that the result does not depend on the
order in which overlapping writes arrive:

- batches wholly below the start offset are dropped, one straddling it is cut at it (unless the
  start offset is -1, "not given");
- where two batches overlap, the one with the higher delivery count wins, and at equal counts the
  one with the higher delivery state (a record's (count, state) only grows: AVAILABLE at count n
  becomes ACQUIRED at n + 1, then AVAILABLE, ACKNOWLEDGED or ARCHIVED at n + 1);
- overlapping or adjacent batches with the same count and state become one.

The algorithm is Kafka's step for step (a sorted set consumed from its smallest pair, with its
set semantics for equal batches), so the output matches Kafka's also where it leaves two adjacent
batches of equal state unmerged.
"""

from __future__ import annotations

import heapq
from typing import Iterable, NamedTuple

AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVING = 3
ARCHIVED = 4

UNINITIALIZED_START_OFFSET = -1


class PersistedStateBatch(NamedTuple):
    """Offsets ``first_offset..last_offset`` (inclusive) in ``delivery_state`` after
    ``delivery_count`` deliveries (Kafka's PersisterStateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


# Internally a batch is the tuple (first, last, count, state): tuples order as Kafka's
# PersisterStateBatch.compareTo (first offset, last offset, delivery count, delivery state).
_Key = tuple[int, int, int, int]


def _key(b) -> _Key:
    return (b[0], b[1], b[3], b[2])


def _batch(k: _Key) -> PersistedStateBatch:
    return PersistedStateBatch(k[0], k[1], k[3], k[2])


def _priority(a: _Key, b: _Key) -> int:
    """Kafka's compareBatchDeliveryInfo(a, b): <0, 0, >0 by delivery count, then delivery state."""
    if a[2] != b[2]:
        return a[2] - b[2]
    return a[3] - b[3]


def prune_batches(batches: Iterable, start_offset: int) -> list[PersistedStateBatch]:
    """Drop what lies below ``start_offset`` (-1: nothing), cutting a batch that straddles it."""
    out = []
    for b in batches:
        b = b if isinstance(b, PersistedStateBatch) else PersistedStateBatch(*b)
        if start_offset == UNINITIALIZED_START_OFFSET or b.first_offset >= start_offset:
            out.append(b)
        elif b.last_offset >= start_offset:
            out.append(b._replace(first_offset=start_offset))
    return out


def _merge_pair(prev: _Key, cand: _Key) -> tuple[_Key, ...]:
    """What replaces an overlapping (or adjacent, same-state) pair, ``prev <= cand`` in set order."""
    c = _priority(cand, prev)
    pf, pl = prev[0], prev[1]
    cf, cl = cand[0], cand[1]
    if c == 0:  # same count and state: one batch covering both
        return ((pf, max(pl, cl), prev[2], prev[3]),)
    if cf == pf:
        if cl == pl:  # the set order puts the higher-priority one second
            return (cand,)
        # cl > pl
        if c < 0:
            return (prev, (pl + 1, cl, cand[2], cand[3]))
        return (cand,)
    # cf > pf
    if cl < pl:  # prev swallows cand
        if c < 0:
            return (prev,)
        return ((pf, cf - 1, prev[2], prev[3]), cand, (cl + 1, pl, prev[2], prev[3]))
    if cl == pl:
        if c < 0:
            return (prev,)
        return ((pf, cf - 1, prev[2], prev[3]), cand)
    # cl > pl
    if c < 0:
        return (prev, (pl + 1, cl, cand[2], cand[3]))
    return ((pf, cf - 1, prev[2], prev[3]), cand)


def combine_state_batches(so_far: Iterable, new: Iterable, start_offset: int) -> list[PersistedStateBatch]:
    """The batches of ``so_far`` and ``new`` combined into sorted non-overlapping batches, those
    below ``start_offset`` pruned (Kafka's ``PersisterStateBatchCombiner.combineStateBatches``).
    Batches may be :class:`PersistedStateBatch` or ``(first, last, state, count)`` tuples."""
    combined = prune_batches(list(so_far) + list(new), start_offset)
    if len(combined) < 2:
        return combined
    heap = list({_key(b) for b in combined})  # a sorted *set*, as Kafka's TreeSet
    heapq.heapify(heap)
    final: list[PersistedStateBatch] = []
    while heap:
        prev = heapq.heappop(heap)
        while heap and heap[0] == prev:
            heapq.heappop(heap)
        if not heap:
            final.append(_batch(prev))
            break
        cand = heap[0]
        if cand[0] <= prev[1] or (prev[1] + 1 == cand[0] and _priority(prev, cand) == 0):
            heapq.heappop(heap)
            while heap and heap[0] == cand:
                heapq.heappop(heap)
            for piece in _merge_pair(prev, cand):
                heapq.heappush(heap, piece)
        else:
            final.append(_batch(prev))
    return final
