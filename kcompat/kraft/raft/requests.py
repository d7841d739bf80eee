"""Outbound request bookkeeping: one request in flight per destination, request timeouts, and a
retry backoff after a failure (Kafka ``RequestManager``).

Responses are matched by request id. Every state transition forgets all in-flight requests, so a
late response to a request of an earlier state is ignored rather than misread (Kafka resets its
connections when it becomes leader, candidate or follower).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Inflight:
    request_id: int
    destination: int
    kind: str
    deadline_ms: int
    meta: dict = field(default_factory=dict)


class RequestManager:
    def __init__(self, request_timeout_ms: int, retry_backoff_ms: int) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.inflight: dict[int, Inflight] = {}
        self.by_destination: dict[int, int] = {}
        self.backoff_until: dict[int, int] = {}
        self._next_id = 1

    def is_ready(self, destination: int, now_ms: int) -> bool:
        if destination in self.by_destination:
            return False
        until = self.backoff_until.get(destination)
        if until is not None:
            if now_ms < until:
                return False
            del self.backoff_until[destination]
        return True

    def has_inflight(self, destination: int) -> bool:
        return destination in self.by_destination

    def sent(self, destination: int, kind: str, now_ms: int, **meta) -> int:
        request_id = self._next_id
        self._next_id += 1
        self.inflight[request_id] = Inflight(request_id, destination, kind,
                                             now_ms + self.request_timeout_ms, meta)
        self.by_destination[destination] = request_id
        return request_id

    def complete(self, request_id: int) -> Inflight | None:
        """The in-flight entry a response answers, or None if it is no longer expected."""
        entry = self.inflight.pop(request_id, None)
        if entry is not None:
            self.by_destination.pop(entry.destination, None)
        return entry

    def failed(self, destination: int, now_ms: int) -> None:
        self.backoff_until[destination] = now_ms + self.retry_backoff_ms

    def expire(self, now_ms: int) -> None:
        for entry in [e for e in self.inflight.values() if e.deadline_ms <= now_ms]:
            self.complete(entry.request_id)
            self.failed(entry.destination, now_ms)

    def reset(self) -> None:
        self.inflight.clear()
        self.by_destination.clear()
        self.backoff_until.clear()

    def next_deadline(self, now_ms: int) -> int | None:
        """When a request times out or a backoff ends (a backoff already over is forgotten)."""
        if not self.inflight and not self.backoff_until:
            return None
        for dest in [d for d, until in self.backoff_until.items() if until <= now_ms]:
            del self.backoff_until[dest]
        times = [e.deadline_ms for e in self.inflight.values()]
        times.extend(self.backoff_until.values())
        return min(times) if times else None
