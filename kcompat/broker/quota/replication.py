"""Replication throttles: Kafka's ``ReplicationQuotaManager`` (KIP-73), as
``kafka-reassign-partitions.sh --throttle`` sets them.

Two quotas per broker, each a byte rate bound and a set of throttled replicas:

- the *leader* quota, ``leader.replication.throttled.rate`` (dynamic broker config, bytes/s) over
  the partitions the topic config ``leader.replication.throttled.replicas`` lists with this broker:
  in a follower's Fetch, a throttled partition answers no records to a replica outside the ISR
  while the measured rate exceeds the bound (the follower's fetch position is still recorded);
  the bytes of every throttled partition sent to followers are measured;
- the *follower* quota, ``follower.replication.throttled.rate`` over the partitions
  ``follower.replication.throttled.replicas`` lists with this broker: the replica fetcher leaves a
  throttled partition that is not in the ISR out of its Fetch while the measured rate exceeds the
  bound, and measures the bytes it receives for throttled partitions.

The throttled-replicas value is ``partition:broker,...`` (the partitions listed with this broker's
id) or ``*`` (every partition of the topic), empty for none. The rate is measured as Kafka's
``Rate`` (:class:`kcompat.broker.quota.rate.Rate`) over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds``. I/O free; times are ``now_ms`` arguments. The fetch
path of the ``isr`` layer uses the leader quota through ``ReplicaManager.leader_quota``.
"""

from __future__ import annotations

from typing import Callable

from kcompat.broker.quota.rate import Rate

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALL = "*"


class ReplicationQuota:
    """One side's quota: ``bound()`` gives the rate limit in bytes/s (Kafka's default,
    ``Long.MAX_VALUE``, never throttles); ``broker_id`` picks this broker's entries of the
    throttled-replicas configs."""

    def __init__(self, broker_id: int, bound: Callable[[], int], samples: int = 11, window_ms: int = 1000) -> None:
        self.broker_id = broker_id
        self._bound = bound
        self.rate = Rate(samples, window_ms)
        self._throttled: dict[str, frozenset[int] | str] = {}   # topic -> partitions, or ALL

    def update_topic(self, topic: str, value: str | None) -> None:
        """The topic's throttled-replicas config changed to ``value`` (None or "" for none)."""
        parsed = parse_throttled_replicas(value or "", self.broker_id)
        if parsed:
            self._throttled[topic] = parsed
        else:
            self._throttled.pop(topic, None)

    def is_throttled(self, topic: str, partition: int) -> bool:
        """Whether ``topic``-``partition`` is throttled on this broker."""
        t = self._throttled.get(topic)
        return t is not None and (t == ALL or partition in t)

    def is_exceeded(self, now_ms: int) -> bool:
        """The measured rate is above the bound (Kafka ``isQuotaExceeded``)."""
        return self.rate.measure(now_ms) > self._bound()

    def record(self, n: int, now_ms: int) -> None:
        """``n`` bytes of throttled partitions were replicated."""
        if n:
            self.rate.record(n, now_ms)

    def should_throttle(self, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
        """A replica outside the ISR of a throttled partition while the quota is exceeded (Kafka
        ``shouldLeaderThrottle`` / ``shouldFollowerThrottle``)."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_exceeded(now_ms)

    def leader_records(self, topic: str, partition: int, in_sync: bool, records, now_ms: int):
        """The records a leader sends a follower for this partition: none when throttled, else
        ``records``, whose size is measured when the partition is throttled."""
        if not records or not self.is_throttled(topic, partition):
            return records
        if not in_sync and self.is_exceeded(now_ms):
            return b""
        self.record(len(records), now_ms)
        return records


def parse_throttled_replicas(value: str, broker_id: int) -> frozenset[int] | str:
    """``"*"`` -> ALL; ``"0:1,1:2"`` -> the partitions listed with ``broker_id``; "" -> empty
    (Kafka ``TopicConfigHandler.parseThrottledPartitions``; the value was validated when set)."""
    value = value.strip()
    if value == ALL:
        return ALL
    out = set()
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        if broker.strip().lstrip("-").isdigit() and int(broker) == broker_id and partition.strip().isdigit():
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuotas:
    """The leader and follower quotas of one broker (``config.get(name)`` reads the effective,
    dynamic-aware broker config)."""

    def __init__(self, broker_id: int, config_get: Callable[[str], object]) -> None:
        samples = int(config_get("replication.quota.window.num"))
        window_ms = int(config_get("replication.quota.window.size.seconds")) * 1000
        self.leader = ReplicationQuota(broker_id, lambda: config_get(LEADER_RATE), samples, window_ms)
        self.follower = ReplicationQuota(broker_id, lambda: config_get(FOLLOWER_RATE), samples, window_ms)

    def update_topic(self, topic: str, configs: dict[str, str]) -> None:
        """Apply ``topic``'s config overrides (``{name: value}``, the image's)."""
        self.leader.update_topic(topic, configs.get(LEADER_REPLICAS))
        self.follower.update_topic(topic, configs.get(FOLLOWER_REPLICAS))
