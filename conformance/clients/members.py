"""A running consumer-group member, whatever the client: the events it saw and its current assignment.

Drivers subclass :class:`Member` and call ``_assigned``/``_revoked``/``_consumed`` from their client's
callbacks (or from a tool's output). Assignment bookkeeping works for both rebalance protocols: under
the eager protocol every partition is revoked before the new assignment arrives; under the
cooperative protocol only the moved partitions are revoked and only new ones are assigned.
"""

from __future__ import annotations

import threading
import time

from conformance.clients.base import Consumed
from conformance.model import CaseFailure

TP = tuple[str, int]


class Member:
    """Base class for group members; thread-safe event bookkeeping."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: set[TP] = set()
        self.events: list[tuple[float, str, list[TP]]] = []
        self.records: list[Consumed] = []
        self.errors: list[str] = []

    def _assigned(self, parts: list[TP]) -> None:
        with self._lock:
            self._current |= set(parts)
            self.events.append((time.monotonic(), "assigned", sorted(parts)))

    def _revoked(self, parts: list[TP]) -> None:
        with self._lock:
            self._current -= set(parts)
            self.events.append((time.monotonic(), "revoked", sorted(parts)))

    def _lost(self, parts: list[TP]) -> None:
        with self._lock:
            self._current -= set(parts)
            self.events.append((time.monotonic(), "lost", sorted(parts)))

    def _consumed(self, recs: list[Consumed]) -> None:
        with self._lock:
            self.records.extend(recs)

    def current(self) -> list[TP]:
        with self._lock:
            return sorted(self._current)

    def event_log(self) -> list[tuple[str, list[TP]]]:
        with self._lock:
            return [(kind, parts) for _, kind, parts in self.events]

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for _, k, _ in self.events if k == kind)

    def consumed(self) -> list[Consumed]:
        with self._lock:
            return list(self.records)

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        """Wait until ``predicate(self)`` holds; fail the case (with this member's events) if it does not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return
            if self.errors:
                raise CaseFailure(f"waiting for {what}: member error: {self.errors[-1]}")
            time.sleep(0.1)
        raise CaseFailure(f"timed out after {timeout:.0f}s waiting for {what}; member events: "
                          f"{self.event_log()[-6:]}, current assignment {self.current()}, "
                          f"errors {self.errors[-2:]}")

    def stop(self, leave: bool = True) -> None:
        """Stop consuming. ``leave=False`` goes away without LeaveGroup where the client allows it."""
        raise NotImplementedError

    def crash(self) -> None:
        """Die without a word to the coordinator (SIGKILL); only process-based members can."""
        raise NotImplementedError


def wait_all(members: list[Member], predicate, timeout: float, what: str) -> None:
    """Wait until ``predicate(members)`` holds; fail with every member's state otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate(members):
            return
        for m in members:
            if m.errors:
                raise CaseFailure(f"waiting for {what}: member error: {m.errors[-1]}")
        time.sleep(0.1)
    state = "; ".join(f"member {i}: assignment {m.current()}, last events {m.event_log()[-3:]}"
                      for i, m in enumerate(members))
    raise CaseFailure(f"timed out after {timeout:.0f}s waiting for {what} ({state})")
