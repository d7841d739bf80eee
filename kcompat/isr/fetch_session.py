"""Incremental fetch sessions (KIP-227): Kafka's ``FetchManager``, ``FetchSessionCache``,
``FetchSession``, ``CachedPartition`` and the fetch contexts (``core/.../server/FetchSession.scala``).

A Fetch request (v7+) carries ``session_id`` and ``session_epoch`` (Kafka's ``FetchMetadata``);
:meth:`FetchSessions.new_context` turns them into a :class:`FetchContext`:

============  =========  =============================================================================
session_id    epoch      context
============  =========  =============================================================================
0             -1         sessionless full fetch (librdkafka): no session
0             0          full fetch that creates a session; the response carries its id (0: no room)
X             0          close X, then as ``0 / 0``
X             -1         close X, then a sessionless full fetch
X             N (other)  incremental fetch of session X: FETCH_SESSION_ID_NOT_FOUND if X is unknown,
                         INVALID_FETCH_SESSION_EPOCH if N is not the epoch X expects,
                         FETCH_SESSION_TOPIC_ID_ERROR if the request's version is on the other side
                         of v13 from the one that created X (topic ids vs names)
============  =========  =============================================================================

A session error answers the top-level error, session id 0 and no partitions (Kafka's
``SessionErrorContext``). An incremental fetch reads the session's partitions: those cached,
updated with the request's (fetch offset, max bytes, log start offset, epochs) and without the
request's forgotten ones; a session left with no partitions is closed and the fetch is
sessionless. Its response holds only the partitions Kafka's
``CachedPartition.maybeUpdateResponseData`` would send (:meth:`CachedPartition.must_respond`),
and partitions that returned records move to the end of the session's order, so the byte limits
serve every partition in turn.

Partitions are keyed ``(topic id, partition)`` in sessions made by v13+ requests and
``(topic name, partition)`` before (Kafka's ``CachedPartition`` equality). A session is created
only when its full fetch is answered (Kafka's ``FullFetchContext.updateAndGenerateResponseData``),
with epoch 1, and an incremental fetch's session is updated only when it is answered unthrottled
(:meth:`FetchContext.respond`; :meth:`FetchContext.throttled` leaves it alone).

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions (0: none, every
fetch is sessionless). When it is full a new session may evict (Kafka's ``tryEvict``) the least
recently used session if that one is stale (unused for more than :data:`EVICTION_MS`), else the
least valuable evictable one, ordered by (privileged, partitions, id), if the new one is worth at
least as much: sessions of followers are privileged; a session is evictable by anyone once older
than :data:`EVICTION_MS` and, unless privileged, by a privileged newcomer at any age (both decided
when the session was last used). Nothing evictable: the full fetch is answered with session id 0.

Pure bookkeeping on one event loop: no locks, the time is passed in (``now_ms``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from kcompat.isr.fetch_messages import FetchPartitionRequest, FetchPartitionResult
from kcompat.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000   # Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
_INT32_MAX = 2**31 - 1

log = logging.getLogger("kcompat.isr")

Key = tuple   # (topic id (uuid.UUID) from v13, else topic name, partition)


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ``FetchMetadata.nextEpoch``): -1 stays -1, Int32 max wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


class CachedPartition:
    """One partition of a session (Kafka's ``CachedPartition``): the fetcher's last request
    parameters, and the high watermark and log start offset last sent (-1: none)."""

    __slots__ = ("topic", "partition", "max_bytes", "fetch_offset", "fetcher_log_start_offset",
                 "current_leader_epoch", "last_fetched_epoch", "high_watermark", "local_log_start_offset")

    def __init__(self, r: FetchPartitionRequest, high_watermark: int = -1, local_log_start_offset: int = -1) -> None:
        self.topic = r.topic   # None: a topic id not known yet (resolved when it is)
        self.partition = r.partition
        self.high_watermark = high_watermark
        self.local_log_start_offset = local_log_start_offset
        self.update_request(r)

    def update_request(self, r: FetchPartitionRequest) -> None:
        """Take the request's parameters (Kafka's ``updateRequestParams``)."""
        self.max_bytes = r.partition_max_bytes
        self.fetch_offset = r.fetch_offset
        self.fetcher_log_start_offset = r.log_start_offset
        self.current_leader_epoch = r.current_leader_epoch
        self.last_fetched_epoch = r.last_fetched_epoch

    def request(self) -> FetchPartitionRequest:
        """A fresh request to read this partition with (Kafka's ``reqData``)."""
        return FetchPartitionRequest(self.topic, self.partition, self.fetch_offset, self.max_bytes,
                                     self.fetcher_log_start_offset, self.current_leader_epoch,
                                     self.last_fetched_epoch)

    def must_respond(self, r: FetchPartitionResult, update: bool) -> bool:
        """Whether an incremental response must include this partition's result (Kafka's
        ``maybeUpdateResponseData``): records, a changed high watermark or log start offset, a
        preferred read replica, an error, a diverging epoch. With ``update`` the result counts as
        sent (an error resets the cached high watermark, so the partition is sent again once the
        error is gone)."""
        must = len(r.records) > 0
        if self.high_watermark != r.high_watermark:
            must = True
            if update:
                self.high_watermark = r.high_watermark
        if self.local_log_start_offset != r.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = r.log_start_offset
        if r.preferred_read_replica >= 0 or r.diverging is not None:
            must = True
        if r.error != ErrorCode.NONE:
            if update:
                self.high_watermark = -1
            must = True
        return must


@dataclass(eq=False, slots=True)
class FetchSession:
    """One session (Kafka's ``FetchSession``): ``partitions`` in fetch order, the ``epoch`` the
    next request must carry, times in ms; ``cached_size`` and the ``evictable_by_*`` flags as of
    the last :meth:`FetchSessionCache.touch` (-1: not in the cache)."""

    id: int
    privileged: bool
    partitions: dict
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(self, requests: list[tuple[Key, FetchPartitionRequest]], forgotten: list[Key]) -> None:
        """Add or update the request's partitions, then drop the forgotten ones (Kafka's ``update``)."""
        partitions = self.partitions
        for key, r in requests:
            cached = partitions.get(key)
            if cached is None:
                partitions[key] = CachedPartition(r)
            else:
                cached.update_request(r)
        for key in forgotten:
            partitions.pop(key, None)


class FetchSessionCache:
    """The sessions of this broker (Kafka's ``FetchSessionCache``, one shard): at most
    ``max_entries``; ``evictions`` counts the sessions evicted to make room; ``total_partitions``
    the partitions of all sessions as of their last use (Kafka's
    ``NumIncrementalFetchPartitionsCached``)."""

    def __init__(self, max_entries: int, eviction_ms: int = EVICTION_MS, rng: random.Random | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.total_partitions = 0
        self.evictions = 0
        self._rng = rng or random.Random()

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def maybe_create(self, now_ms: int, privileged: bool, uses_topic_ids: bool, size: int,
                     partitions: Callable[[], dict]) -> int:
        """A new session of ``size`` partitions, ``partitions()`` -> ``{key: CachedPartition}``
        (called only if there is room); its id, or 0 when the cache is full and nothing may be
        evicted (Kafka's ``maybeCreateSession``)."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, partitions(), uses_topic_ids, now_ms, now_ms,
                               next_epoch(INITIAL_EPOCH))
        self.sessions[session_id] = session
        self.touch(session, now_ms)
        return session_id

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _INT32_MAX)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Evict the stale least recently used session, else the least valuable evictable one if
        it is worth no more than the newcomer ``(privileged, size, 0)`` (Kafka's ``tryEvict``)."""
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            victim = lru
        else:
            candidates = [s for s in self.sessions.values()
                          if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
            if not candidates:
                return False
            victim = min(candidates, key=FetchSession.evictable_key)
            if (privileged, size, 0) < victim.evictable_key():
                return False
        log.debug("evicting fetch session %d (%d partitions)", victim.id, victim.cached_size)
        self.remove(victim.id)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.total_partitions -= session.cached_size
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """The session was used at ``now_ms``: its recency, size and evictability (Kafka's ``touch``)."""
        session.last_used_ms = now_ms
        if session.cached_size != -1:
            self.total_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self.total_partitions += session.cached_size
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = old or not session.privileged
        session.evictable_by_all = old


class FetchContext:
    """What one Fetch reads and how it answers (Kafka's ``FetchContext``).

    ``error``: a session error (the answer is that error, no partitions, session id 0); else
    ``keys`` and ``requests``: the partitions to read, in order. :meth:`respond` gives the
    response's ``(error, session id, indexes of the results to send or None for all)`` and updates
    the session; :meth:`would_send` gives the same indexes without updating it (the size a quota
    is charged, Kafka's ``getResponseSize``); :meth:`throttled` the ``(error, session id)`` of a
    throttled answer, which sends no partitions."""

    __slots__ = ("error", "keys", "requests")

    def __init__(self, keys: list, requests: list[FetchPartitionRequest], error: ErrorCode | None = None) -> None:
        self.error = error
        self.keys = keys
        self.requests = requests

    def respond(self, results: list[FetchPartitionResult], now_ms: int) -> tuple[ErrorCode, int, list[int] | None]:
        if self.error is not None:
            return self.error, INVALID_SESSION_ID, []
        return ErrorCode.NONE, INVALID_SESSION_ID, None

    def would_send(self, results: list[FetchPartitionResult]) -> list[int] | None:
        return [] if self.error is not None else None

    def throttled(self) -> tuple[ErrorCode, int]:
        return ErrorCode.NONE, INVALID_SESSION_ID


class _FullContext(FetchContext):
    """A full fetch that asks for a session (epoch 0): created when answered, from the request's
    partitions and their results (Kafka's ``FullFetchContext``)."""

    __slots__ = ("cache", "privileged", "uses_topic_ids")

    def __init__(self, cache: FetchSessionCache, keys: list, requests: list, privileged: bool,
                 uses_topic_ids: bool) -> None:
        super().__init__(keys, requests)
        self.cache = cache
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids

    def respond(self, results, now_ms):
        def partitions() -> dict:
            return {(key, r.partition): CachedPartition(r, res.high_watermark, res.log_start_offset)
                    for key, r, res in zip(self.keys, self.requests, results)}
        session_id = self.cache.maybe_create(now_ms, self.privileged, self.uses_topic_ids, len(results), partitions)
        return ErrorCode.NONE, session_id, None


class _IncrementalContext(FetchContext):
    """An incremental fetch of ``session`` (Kafka's ``IncrementalFetchContext``): reads the
    session's partitions (``cached``, in session order), answers the changed ones."""

    __slots__ = ("session", "cached", "expected_epoch")

    def __init__(self, session: FetchSession, keys: list, requests: list, cached: list[CachedPartition],
                 expected_epoch: int) -> None:
        super().__init__(keys, requests)
        self.session = session
        self.cached = cached
        self.expected_epoch = expected_epoch

    def _stale(self) -> bool:
        """Another request of the session was taken since this one (a duplicate): Kafka answers
        INVALID_FETCH_SESSION_EPOCH with the session's id."""
        return self.session.epoch != self.expected_epoch

    def respond(self, results, now_ms):
        session = self.session
        if self._stale():
            log.info("incremental fetch session %d expected epoch %d, but got %d: possible duplicate request",
                     session.id, self.expected_epoch, session.epoch)
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
        partitions = session.partitions
        send = []
        for i, (cached, r) in enumerate(zip(self.cached, results)):
            if cached.must_respond(r, True):
                send.append(i)
                key = (self.keys[i], cached.partition)
                if len(r.records) > 0 and partitions.get(key) is cached:
                    del partitions[key]   # fairness: a partition that returned data goes last
                    partitions[key] = cached
        return ErrorCode.NONE, session.id, send

    def would_send(self, results):
        if self._stale():
            return []
        return [i for i, (cached, r) in enumerate(zip(self.cached, results)) if cached.must_respond(r, False)]

    def throttled(self):
        if self._stale():
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, self.session.id
        return ErrorCode.NONE, self.session.id


class FetchSessions:
    """The broker's fetch sessions (Kafka's ``FetchManager`` over a :class:`FetchSessionCache` of
    ``max.incremental.fetch.session.cache.slots`` sessions). ``resolve(topic_id)`` names a topic
    id (None: unknown), for session partitions whose topic was unknown when they joined."""

    def __init__(self, max_slots: int, resolve, eviction_ms: int = EVICTION_MS) -> None:
        self.cache = FetchSessionCache(max_slots, eviction_ms)
        self._resolve = resolve

    def new_context(self, version: int, session_id: int, epoch: int, privileged: bool, keys: list,
                    requests: list[FetchPartitionRequest], forgotten: list[Key], now_ms: int) -> FetchContext:
        """The context of a Fetch at ``version`` with ``session_id`` / ``epoch`` whose partitions
        are ``requests``, ``keys`` naming their topics (topic id from v13, else name) and
        ``forgotten`` the request's forgotten ``(topic key, partition)``; ``privileged``: a
        follower's fetch (Kafka's ``newContext``). The context's ``keys`` are topic keys too."""
        cache = self.cache
        if epoch == INITIAL_EPOCH or epoch == FINAL_EPOCH:   # a full fetch
            if session_id != INVALID_SESSION_ID:
                cache.remove(session_id)   # any session a full fetch names is closed
            if epoch == FINAL_EPOCH:
                return FetchContext(keys, requests)
            return _FullContext(cache, keys, requests, privileged, version >= 13)
        session = cache.get(session_id)
        if session is None:
            return FetchContext([], [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext([], [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            return FetchContext([], [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update([((k, r.partition), r) for k, r in zip(keys, requests)], forgotten)
        if not session.partitions:
            cache.remove(session.id)
            return FetchContext(keys, requests)
        cache.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        keys, reads, cached = [], [], []
        for (key, _p), c in session.partitions.items():
            if c.topic is None and session.uses_topic_ids:
                c.topic = self._resolve(key)
            keys.append(key)
            cached.append(c)
            reads.append(c.request())
        return _IncrementalContext(session, keys, reads, cached, session.epoch)

    def sessions(self) -> int:
        """NumIncrementalFetchSessions."""
        return len(self.cache)

    def partitions(self) -> int:
        """NumIncrementalFetchPartitionsCached."""
        return self.cache.total_partitions

    def evictions(self) -> int:
        """The sessions evicted so far (IncrementalFetchSessionEvictionsPerSec's count)."""
        return self.cache.evictions

