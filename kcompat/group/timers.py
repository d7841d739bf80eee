"""Deadlines of the group coordinator, keyed so that rescheduling or cancelling is one call.

Keys are tuples whose second element is the group id (or None for coordinator-wide timers), so all
timers of a group can be cancelled when it is removed or unloaded. A heap orders deadlines; entries
replaced or cancelled stay in the heap and are skipped (lazy deletion).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from typing import Any, Hashable

TimerKey = tuple[Hashable, ...]


class Timers:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._entries: dict[TimerKey, tuple[int, int, Any]] = {}
        self._by_group: dict[str, set[TimerKey]] = defaultdict(set)
        self._seq = 0

    def clear(self) -> None:
        """Cancel every timer."""
        self._heap.clear()
        self._entries.clear()
        self._by_group.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: TimerKey) -> bool:
        return key in self._entries

    def schedule(self, key: TimerKey, deadline_ms: int, payload: Any = None) -> None:
        self._seq += 1
        self._entries[key] = (deadline_ms, self._seq, payload)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))
        if key[1] is not None:
            self._by_group[key[1]].add(key)
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._entries):
            self._compact()

    def get(self, key: TimerKey) -> tuple[int, Any] | None:
        entry = self._entries.get(key)
        return None if entry is None else (entry[0], entry[2])

    def cancel(self, key: TimerKey) -> None:
        if self._entries.pop(key, None) is not None and key[1] is not None:
            keys = self._by_group.get(key[1])
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_group[key[1]]

    def cancel_group(self, group_id: str) -> None:
        for key in self._by_group.pop(group_id, ()):
            self._entries.pop(key, None)

    def _live(self, item: tuple[int, int, TimerKey]) -> bool:
        entry = self._entries.get(item[2])
        return entry is not None and entry[1] == item[1]

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, now_ms: int) -> tuple[TimerKey, Any] | None:
        """Remove and return the earliest timer due at ``now_ms`` (deadline <= now), or None."""
        deadline = self.next_deadline()
        if deadline is None or deadline > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        payload = self._entries[key][2]
        self.cancel(key)
        return key, payload

    def _compact(self) -> None:
        self._heap = [(d, s, k) for k, (d, s, _) in self._entries.items()]
        heapq.heapify(self._heap)
