"""The fetcher side of incremental fetch sessions (KIP-227): Kafka's client
``org.apache.kafka.clients.FetchSessionHandler``, as used by ``AbstractFetcherThread`` (followers).

Each round the fetcher gives :meth:`FetchSessionHandler.build` the full DESIRED partition map
``{(topic id, partition): fields}`` (``fields``: any object with ``fetch_offset``,
``current_leader_epoch``, ``last_fetched_epoch``, ``log_start_offset`` and ``partition_max_bytes``,
e.g. a ``FetchRequest.FetchPartition``) and gets a :class:`FetchPlan`: the request's
``session_id`` / ``session_epoch``, the partitions to put in it and the ones to forget.

=====================  ===========  ==========================================================
state                  request      partitions
=====================  ===========  ==========================================================
no session             0 / 0        full: every desired partition (asks for a session)
session X, epoch N     X / N        incremental: desired partitions new to the session or whose
                                    fields changed; forgotten: session partitions not desired
after an error on X    X / 0        full: closes X and asks for a new session
=====================  ===========  ==========================================================

:meth:`FetchSessionHandler.handle_response` reads the response's top level (Kafka's
``handleResponse``): a full fetch answered with session id 0 means the leader keeps no session
for us (e.g. ``max.incremental.fetch.session.cache.slots=0``): every fetch stays full with epoch 0;
another id starts the session at epoch 1 holding what was sent. An incremental fetch answered
with session id 0 was made sessionless by the leader (start over at 0 / 0); else the epoch moves
on (:func:`kcompat.isr.fetch_session.next_epoch`, wrapping to 1). ``FETCH_SESSION_ID_NOT_FOUND``
starts over at 0 / 0, other session errors (``INVALID_FETCH_SESSION_EPOCH``,
``FETCH_SESSION_TOPIC_ID_ERROR``) and :meth:`FetchSessionHandler.handle_error` (a connection
error, a timeout) close and re-create the session (X / 0). A response naming a partition that is
not in the session (or, for a full fetch, not in the request) is not trusted: the fetcher must drop
it and the next fetch is full (Kafka's ``verifyFullFetchResponsePartitions`` /
``verifyIncrementalFetchResponsePartitions``).

Kafka closes sessions lazily: a fetcher that stops sends nothing, the leader evicts the session.
Pure bookkeeping: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcompat.isr.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from kcompat.protocol.errors import ErrorCode

Key = tuple   # (topic id (uuid.UUID), partition)

# What makes a session partition worth re-sending (Kafka's ``FetchRequest.PartitionData`` equality).
FIELDS = ("fetch_offset", "current_leader_epoch", "last_fetched_epoch", "log_start_offset", "partition_max_bytes")


def _fields(p) -> tuple:
    return tuple(getattr(p, f) for f in FIELDS)


@dataclass(slots=True)
class FetchPlan:
    """What one Fetch request carries: ``session_id`` and ``session_epoch`` (top level),
    ``partitions`` ``{key: fields}`` to put in it (in the desired map's order) and ``forgotten``
    keys (``forgotten_topics_data``); ``full``: a full fetch (every desired partition)."""

    session_id: int
    session_epoch: int
    partitions: dict
    forgotten: list
    full: bool


class FetchSessionHandler:
    """One fetcher's session with one leader (Kafka's ``FetchSessionHandler``).

    ``session_id`` (0: none), ``epoch`` (the next request's; 0: a full fetch) and
    ``session_partitions`` ``{key: fields tuple}`` the leader's session holds as far as this side
    knows. :meth:`build` makes a plan, :meth:`handle_response` / :meth:`handle_error` settle it."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.session_partitions: dict[Key, tuple] = {}
        self._pending: dict[Key, tuple] | None = None   # the session's partitions if the plan is answered

    @property
    def full(self) -> bool:
        """Whether the next fetch is a full one (Kafka's ``FetchMetadata.isFull``)."""
        return self.epoch == INITIAL_EPOCH or self.epoch == FINAL_EPOCH

    def build(self, desired: dict) -> FetchPlan:
        """The plan of the next Fetch for ``desired`` ``{key: fields}`` (Kafka's ``Builder.build``):
        partitions not desired are forgotten, so a partition skipped for one round (backoff,
        throttling, a pending leader-offsets lookup) is re-added with all its fields later."""
        wanted = {key: _fields(p) for key, p in desired.items()}
        self._pending = wanted
        if self.full:
            return FetchPlan(self.session_id, INITIAL_EPOCH, dict(desired), [], True)
        session = self.session_partitions
        send = {key: p for key, p in desired.items() if session.get(key) != wanted[key]}
        forgotten = [key for key in session if key not in wanted]
        return FetchPlan(self.session_id, self.epoch, send, forgotten, False)

    def handle_response(self, error_code: int, session_id: int, partitions) -> bool:
        """Settle the last plan with the response's top-level ``error_code`` and ``session_id``
        and the ``(topic id, partition)`` keys of its partitions; False: the response must not be
        used (a session error, or partitions the session does not hold) and the next fetch is full."""
        pending, self._pending = self._pending or {}, None
        if error_code != ErrorCode.NONE:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._reset(INVALID_SESSION_ID)
            else:
                self._reset(self.session_id)   # close it and ask for a new one
            return False
        if any(key not in pending for key in partitions):
            # a full response answers the request's partitions, an incremental one the session's
            self._reset(INVALID_SESSION_ID if self.full else self.session_id)
            return False
        if session_id == INVALID_SESSION_ID:
            self._reset(INVALID_SESSION_ID)   # no session (no room), or the leader closed ours
            return True
        if self.full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        self.session_partitions = pending
        return True

    def handle_error(self) -> None:
        """The request failed (connection error, timeout) or the fetcher could not use all of an
        answer: the next fetch is full, closing the session and asking for a new one (Kafka's
        ``handleError``: ``nextCloseExistingAttemptNew``)."""
        self._pending = None
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self.session_partitions = {}
