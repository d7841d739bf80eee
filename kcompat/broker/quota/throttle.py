"""Where the client quotas meet requests (Kafka's ``KafkaApis`` quota calls, KIP-219).

- :func:`produce_quota` wraps the Produce handler: the request's size in bytes is recorded
  against ``producer_byte_rate`` as it is taken, and the response carries the throttle time
  (acks=0: no response, the channel is muted all the same).
- :func:`fetch_quota` wraps the Fetch handler: a consumer's ``max_bytes`` is capped at what its
  quota window holds, its response bytes are recorded against ``consumer_byte_rate``; over the
  quota, the bytes are taken back and the answer is an empty response with the throttle time
  (Kafka's ``getThrottledResponse``). Followers are exempt.
- :func:`request_throttle_ms` is what the connection records against ``request_percentage`` for
  every request on a broker listener (handler time as percent-seconds), combined with what the
  handler set.
- :func:`mutation_quota` gives CreateTopics / CreatePartitions / DeleteTopics their
  ``controller_mutation_rate`` check (KIP-599).

The connection then mutes the channel for the throttle time after answering
(:meth:`kcompat.broker.connection.KafkaConnection.mute_for`): Kafka 2+ clients wait on their
side too, older ones are held back by the mute.
"""

from __future__ import annotations

import functools

from kcompat.broker.api_services import ApiServices
from kcompat.broker.authz import then
from kcompat.broker.context import NO_RESPONSE
from kcompat.protocol.errors import ErrorCode
from kcompat.security.principal import ANONYMOUS


def _user(ctx) -> str:
    return ctx.principal.name


def _set_throttle(response, throttle_ms: int):
    """``response`` with its ``throttle_time_ms`` raised to ``throttle_ms``."""
    if throttle_ms > 0 and getattr(response, "throttle_time_ms", None) is not None:
        response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
    return response


def produce_quota(handle):
    """Wrap a Produce ``handle(ctx, req)`` with ``producer_byte_rate`` enforcement. The request's
    bytes are recorded when it is taken and the channel muted at once: kcompat reads pipelined
    requests, where Kafka reads one at a time per connection, so a throttle decided only after an
    acks=all wait would let every request already received through unthrottled. The response
    carries the throttle time (acks=0: no response, the mute all the same)."""
    @functools.wraps(handle)
    def wrapper(ctx, req):
        manager = ctx.services.quotas.produce
        if not manager.enabled:
            return handle(ctx, req)
        throttle = manager.record(_user(ctx), ctx.client_id, ctx.request_bytes, ctx.services.now_ms())
        ctx.connection.mute_for(throttle)
        result = handle(ctx, req)
        if throttle <= 0 or result is NO_RESPONSE:
            return result
        return then(result, lambda response: _set_throttle(response, throttle))
    return wrapper


def fetch_quota(handle, empty_response, settle):
    """Wrap a Fetch ``handle(ctx, req)`` with ``consumer_byte_rate`` enforcement. The handler's
    answer has the ``responses`` the quota is charged for; ``settle(answer)`` is the response when
    the quota lets it through, ``empty_response(throttle_ms, answer)`` the throttled one (Kafka
    updates a fetch session only in the first case: ``getResponseSize`` then
    ``updateAndGenerateResponseData`` or ``getThrottledResponse``)."""
    @functools.wraps(handle)
    def wrapper(ctx, req):
        manager = ctx.services.quotas.fetch
        if not manager.enabled or is_follower_fetch(req):
            return handle(ctx, req)
        window_bytes = manager.max_value_in_window(_user(ctx), ctx.client_id)
        if window_bytes is not None and window_bytes < req.max_bytes:
            # a fetch larger than the quota window holds would always be throttled: Kafka caps
            # max_bytes (and min_bytes) there; the first batch still comes back whole (KIP-74)
            req.max_bytes = int(window_bytes)
            req.min_bytes = min(req.min_bytes, req.max_bytes)
        result = handle(ctx, req)

        def account(response):
            size = sum(len(p.records) for t in response.responses or () for p in t.partitions
                       if p.records is not None)
            now = ctx.services.now_ms()
            user = _user(ctx)
            throttle = manager.record(user, ctx.client_id, size, now)
            if throttle <= 0:
                return settle(response)
            manager.unrecord(user, ctx.client_id, size, now)
            return empty_response(throttle, response)

        return then(result, account)
    return wrapper


def is_follower_fetch(request) -> bool:
    """A Fetch from a follower replica (``replica_id`` before v15, ``replica_state`` from v15)."""
    state = getattr(request, "replica_state", None)
    return getattr(request, "replica_id", -1) >= 0 or (state is not None and state.replica_id >= 0)


def request_quota_exempt(api_key: int, request) -> bool:
    """A follower's Fetch is exempt from ``request_percentage`` (Kafka records it as exempt)."""
    return api_key == 1 and is_follower_fetch(request)


def request_throttle_ms(services: ApiServices, connection, client_id: str | None, handler_seconds: float) -> int:
    """Record ``handler_seconds`` of request handling for the connection's client against
    ``request_percentage`` (as percent-seconds, Kafka's ``nanosToPercentage``); the throttle
    time, ms, at most one quota window (0 without a request quota)."""
    manager = services.quotas.request
    if not manager.enabled:
        return 0
    user = getattr(connection, "principal", ANONYMOUS).name
    return manager.record(user, client_id, handler_seconds * 100.0, services.now_ms())


class MutationQuota:
    """One request's ``controller_mutation_rate`` quota (Kafka's ``ControllerMutationQuota``):
    strict (refuse a mutation once the client's bucket is empty: THROTTLING_QUOTA_EXCEEDED) from
    CreateTopics v6, CreatePartitions v3 and DeleteTopics v5, permissive before (record, throttle)."""

    __slots__ = ("_manager", "_user", "_client_id", "_now", "strict", "throttle_ms")

    def __init__(self, ctx, strict: bool) -> None:
        self._manager = ctx.services.quotas.controller_mutation
        self._user = _user(ctx)
        self._client_id = ctx.client_id
        self._now = ctx.services.now_ms
        self.strict = strict
        self.throttle_ms = 0

    def try_record(self, partitions: int) -> bool:
        """Take ``partitions`` permits; False (nothing taken) when strict and the bucket is
        already empty, with :attr:`throttle_ms` set to the wait."""
        now = self._now()
        if self.strict:
            wait = self._manager.check(self._user, self._client_id, now)
            if wait > 0:
                self.throttle_ms = max(self.throttle_ms, wait)
                return False
        after = self._manager.record(self._user, self._client_id, partitions, now)
        if not self.strict:
            self.throttle_ms = max(self.throttle_ms, after)
        return True


def mutation_quota(ctx, strict_since: int) -> MutationQuota | None:
    """The request's mutation quota, None when no ``controller_mutation_rate`` is set or the
    request came over a controller listener (brokers check it before forwarding)."""
    manager = ctx.services.quotas.controller_mutation
    if not manager.enabled or ctx.on_controller_listener:
        return None
    return MutationQuota(ctx, ctx.api_version >= strict_since)


THROTTLED_MESSAGE = "The throttling quota has been exceeded."   # Kafka's Errors.THROTTLING_QUOTA_EXCEEDED


def mutation_denied(ctx, items, partitions_of, strict_since: int, denied_already=()):
    """``controller_mutation_rate`` for the ``items`` of a CreateTopics / CreatePartitions /
    DeleteTopics request not in ``denied_already`` (``(item, ...)`` tuples), taking
    ``partitions_of(item)`` permits each, in order: ``(denied, finish)`` where ``denied`` lists
    ``(item, THROTTLING_QUOTA_EXCEEDED, message)`` for those refused (strict mode) and
    ``finish(response)`` puts the throttle time in the response."""
    quota = mutation_quota(ctx, strict_since)
    if quota is None:
        return [], _unchanged
    skip = {id(d[0]) for d in denied_already}
    denied = [(i, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE) for i in items
              if id(i) not in skip and not quota.try_record(partitions_of(i))]

    def finish(response):
        _set_throttle(response, quota.throttle_ms)
        return response
    return denied, finish


def _unchanged(response):
    return response
