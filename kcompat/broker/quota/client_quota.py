"""Per-client quota managers (Kafka's ``ClientQuotaManager``, ``ClientRequestQuotaManager``,
``ControllerMutationQuotaManager``; KIP-13, KIP-55, KIP-124, KIP-219, KIP-599).

A client is its authenticated user (the principal's name, ``ANONYMOUS`` without authentication)
and its client id. The quota that applies is the most specific one set, in Kafka's order:

1. (user, client-id)        2. (user, default client-id)      3. (user)
4. (default user, client-id) 5. (default user, default client-id) 6. (default user)
7. (client-id)               8. (default client-id)

Clients share a rate when they match the same quota with the same tags: a default quota applies to
each user / client id separately (Kafka's ``quotaMetricTags``). Usage is a :class:`Rate` over
``quota.window.num`` windows of ``quota.window.size.seconds``; recording a value that takes the
rate above the quota gives a throttle time, Kafka's ``QuotaUtils.throttleTime``: the delay that
brings the observed rate O back to the quota T over the measured window W, ``(O - T) / T * W`` ms
(request quotas: at most one window). Controller mutations use a :class:`TokenBucket` of
``controller.quota.window.num`` x ``controller.quota.window.size.seconds``.

No quota set for a key (the usual case): nothing is recorded, the throttle time is 0.
"""

from __future__ import annotations

from kcompat.broker.quota.rate import Rate, TokenBucket
from kcompat.kraft import quota_control as qc

DEFAULT = None   # the default entity of a type (a null name in ClientQuotaRecord)
_ABSENT = object()

Tags = tuple[str, str]   # (user tag, client-id tag) of the shared sensor; "" when not part of it
PRUNE_EVERY = 1024       # new sensors between sweeps of idle ones (Kafka expires them after an hour)


class ClientQuotaManager:
    """Quota enforcement for one quota key (``producer_byte_rate``, ``consumer_byte_rate``,
    ``request_percentage``): ``record(user, client_id, value, now_ms)`` -> throttle time, ms.

    ``samples`` x ``window_ms``: the measured window. ``max_throttle_ms``: cap of a throttle time
    (None: none; Kafka caps request-time throttles at one window)."""

    def __init__(self, key: str, samples: int, window_ms: int, max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        # ((user entity, client entity) -> quota); entity: _ABSENT, DEFAULT or a name
        self._quotas: dict[tuple, float] = {}
        self._sensors: dict[Tags, Rate] = {}

    @property
    def enabled(self) -> bool:
        """Whether any quota of this key is set."""
        return bool(self._quotas)

    def update(self, client_quotas: dict) -> None:
        """Take the quotas of this key from the image's ``client_quotas`` (EntityKey -> {key: value})."""
        quotas = {}
        for entity, values in client_quotas.items():
            value = values.get(self.key)
            if value is None:
                continue
            d = dict(entity)
            if qc.IP in d:
                continue
            quotas[(d.get(qc.USER, _ABSENT), d.get(qc.CLIENT_ID, _ABSENT))] = value
        self._quotas = quotas
        if not quotas:
            self._sensors.clear()

    def quota(self, user: str, client_id: str) -> tuple[Tags, float] | None:
        """The quota that applies to ``(user, client_id)`` and the tags of the rate it shares,
        None when no quota applies."""
        q = self._quotas
        for entity, tags in (((user, client_id), (user, client_id)), ((user, DEFAULT), (user, client_id)),
                             ((user, _ABSENT), (user, "")), ((DEFAULT, client_id), (user, client_id)),
                             ((DEFAULT, DEFAULT), (user, client_id)), ((DEFAULT, _ABSENT), (user, "")),
                             ((_ABSENT, client_id), ("", client_id)), ((_ABSENT, DEFAULT), ("", client_id))):
            value = q.get(entity)
            if value is not None:
                return tags, value
        return None

    def record(self, user: str, client_id: str | None, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes, or percent-seconds of handler time) for the client; the
        throttle time in ms (0 when within its quota or without one)."""
        if not self._quotas:
            return 0
        found = self.quota(user, client_id or "")
        if found is None:
            return 0
        tags, bound = found
        rate = self._sensors.get(tags)
        if rate is None:
            _prune(self._sensors, lambda r: r.idle_since(now_ms))
            rate = self._sensors[tags] = Rate(self.samples, self.window_ms)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = round((observed - bound) / bound * rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return int(throttle)

    def max_value_in_window(self, user: str, client_id: str | None) -> float | None:
        """The most that can be recorded at once without being throttled for sure (Kafka's
        ``getMaxValueInQuotaWindow``: quota x (samples - 1) windows), None without a quota."""
        found = self.quota(user, client_id or "") if self._quotas else None
        if found is None:
            return None
        return found[1] * (self.samples - 1) * self.window_ms / 1000.0

    def unrecord(self, user: str, client_id: str | None, value: float, now_ms: int) -> None:
        """Take back ``value`` recorded by :meth:`record` (a throttled fetch returns no data,
        Kafka's ``unrecordQuotaSensor``)."""
        found = self.quota(user, client_id or "") if self._quotas else None
        if found is not None and found[0] in self._sensors:
            self._sensors[found[0]].record(-value, now_ms)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """``controller_mutation_rate`` (partitions created or deleted per second, KIP-599): a token
    bucket per client. ``check(user, client_id, now_ms)`` -> the throttle time if the bucket is
    already empty (strict mode: the mutation is refused with THROTTLING_QUOTA_EXCEEDED), else 0;
    ``record`` takes the tokens and returns the throttle time it causes (permissive mode)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        super().__init__(qc.CONTROLLER_MUTATION_RATE, samples, window_ms)
        self._buckets: dict[Tags, TokenBucket] = {}

    def update(self, client_quotas: dict) -> None:
        super().update(client_quotas)
        if not self._quotas:
            self._buckets.clear()

    def _bucket(self, user: str, client_id: str | None, now_ms: int):
        found = self.quota(user, client_id or "") if self._quotas else None
        if found is None:
            return None, 0.0
        tags, bound = found
        bucket = self._buckets.get(tags)
        if bucket is None:
            _prune(self._buckets, lambda b: b.idle_since(bound, now_ms))
            bucket = self._buckets[tags] = TokenBucket(self.samples, self.window_ms)
        return bucket, bound

    def check(self, user: str, client_id: str | None, now_ms: int) -> int:
        """0 if the client may mutate now, else the ms until its bucket is no longer negative."""
        bucket, bound = self._bucket(user, client_id, now_ms)
        if bucket is None:
            return 0
        tokens = bucket.measure(bound, now_ms)
        return 0 if tokens >= 0 else int(round(-tokens / bound * 1000))

    def record(self, user: str, client_id: str | None, value: float, now_ms: int) -> int:
        bucket, bound = self._bucket(user, client_id, now_ms)
        if bucket is None:
            return 0
        bucket.record(bound, value, now_ms)
        tokens = bucket.measure(bound, now_ms)
        return 0 if tokens >= 0 else int(round(-tokens / bound * 1000))


def _prune(stats: dict, idle) -> None:
    """Every PRUNE_EVERY new clients, forget those whose stat is no different from a new one's
    (a client id per request must not grow the broker's memory)."""
    if stats and len(stats) % PRUNE_EVERY == 0:
        for key in [k for k, v in stats.items() if idle(v)]:
            del stats[key]


class QuotaManagers:
    """The broker's client quota managers (Kafka's ``QuotaFactory.QuotaManagers``): ``produce``,
    ``fetch``, ``request`` and ``controller_mutation``, configured from ``quota.window.*`` /
    ``controller.quota.window.*`` (``config_get``: a config lookup); :meth:`update` follows the
    metadata image's ``client_quotas``."""

    def __init__(self, config_get) -> None:
        samples = config_get("quota.window.num")
        window_ms = config_get("quota.window.size.seconds") * 1000
        self.produce = ClientQuotaManager(qc.PRODUCER_BYTE_RATE, samples, window_ms)
        self.fetch = ClientQuotaManager(qc.CONSUMER_BYTE_RATE, samples, window_ms)
        self.request = ClientQuotaManager(qc.REQUEST_PERCENTAGE, samples, window_ms, max_throttle_ms=window_ms)
        self.controller_mutation = ControllerMutationQuotaManager(
            config_get("controller.quota.window.num"), config_get("controller.quota.window.size.seconds") * 1000)
        self._seen = None

    def update(self, client_quotas: dict) -> None:
        """Follow the image's client quotas (a no-op when they did not change)."""
        snapshot = {k: dict(v) for k, v in client_quotas.items()}
        if snapshot == self._seen:
            return
        self._seen = snapshot
        for manager in (self.produce, self.fetch, self.request, self.controller_mutation):
            manager.update(snapshot)
