"""Share sessions (KIP-932): what a share consumer fetches from this broker, between its
ShareFetch / ShareAcknowledge requests (Kafka's ``ShareSessionCache`` / ``ShareSession``).

A session is keyed by (group id, member id) and holds the topic partitions the member fetches and
the epoch its next request must carry:

- epoch 0 opens a session (replacing one the member had) with the request's partitions; it may
  not carry acknowledgements (INVALID_REQUEST, as Kafka's "Acknowledge data present in Initial
  Fetch Request");
- epoch N > 0 must match the session's next epoch (INVALID_SHARE_SESSION_EPOCH) of an existing
  session (SHARE_SESSION_NOT_FOUND); its partitions join the session, its forgotten topics leave it,
  and the next epoch becomes N + 1 (wrapping to 1 after Int32 max);
- epoch -1 closes the session after its acknowledgements are applied; the member's acquired
  records of the session's partitions are released at once (Kafka's releaseSession);
- a session belongs to the connection that last used it: when that connection closes the session
  goes (the records the member holds stay locked until their acquisition locks run out, so a
  crashed consumer's records come back after ``share.record.lock.duration.ms``).

Pure bookkeeping; the caller applies acknowledgements and releases.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kcompat.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    """One member's session: its partitions (in the order they were added) and next epoch."""

    group_id: str
    member_id: str
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)
    next_epoch: int = 1
    last_used_ms: int = 0
    connection: object = None


class ShareSessionCache:
    """Sessions by (group id, member id). ``max_sessions`` bounds the cache (Kafka's
    ``max.share.session.cache.size``, refused with SHARE_SESSION_LIMIT_REACHED)."""

    def __init__(self, max_sessions: int = 1000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())

    def open(self, group_id: str, member_id: str, partitions: list[TopicIdPartition],
             now_ms: int, connection: object = None) -> tuple[ErrorCode, ShareSession | None, ShareSession | None]:
        """Epoch 0: ``(error, new session, replaced session or None)``."""
        key = (group_id, member_id)
        old = self._sessions.get(key)
        if old is None and len(self._sessions) >= self.max_sessions:
            return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None, None
        session = ShareSession(group_id, member_id, dict.fromkeys(partitions), 1, now_ms, connection)
        self._sessions[key] = session
        return ErrorCode.NONE, session, old

    def advance(self, group_id: str, member_id: str, epoch: int, now_ms: int,
                connection: object = None) -> tuple[ErrorCode, ShareSession | None]:
        """A request at ``epoch`` > 0 of an existing session: the session, its next epoch moved on."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch != session.next_epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session.next_epoch = 1 if epoch >= _MAX_EPOCH else epoch + 1
        session.last_used_ms = now_ms
        if connection is not None:
            session.connection = connection
        return ErrorCode.NONE, session

    def check_final(self, group_id: str, member_id: str) -> ErrorCode:
        """Epoch -1 needs an existing session (SHARE_SESSION_NOT_FOUND otherwise)."""
        return ErrorCode.NONE if (group_id, member_id) in self._sessions else ErrorCode.SHARE_SESSION_NOT_FOUND

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def evict_connection(self, connection: object) -> list[ShareSession]:
        """The sessions last used on ``connection`` (which closed) go; returns them."""
        gone = [key for key, s in self._sessions.items() if s.connection is connection]
        return [self._sessions.pop(key) for key in gone]

    def has_group(self, group_id: str) -> bool:
        """Whether any member of ``group_id`` has a session here."""
        return any(s.group_id == group_id for s in self._sessions.values())

    def remove_partitions(self, partitions: set[TopicIdPartition]) -> None:
        """Partitions this broker no longer leads (or deleted topics) leave every session."""
        for session in self._sessions.values():
            for tp in partitions:
                session.partitions.pop(tp, None)
