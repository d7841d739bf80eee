"""Broker configs of the group coordinator for share groups (KIP-932), streams groups (KIP-1071)
and the consumer groups' assignment interval: Kafka 4.3's names, types, defaults, ranges and
update modes (``GroupCoordinatorConfig``, ``ShareGroupConfig``; kafka.apache.org/43
"Broker Configs"). Part of :data:`kcompat.config.definitions.BROKER_CONFIGS`.

Each ``group.<type>.min.*`` / ``group.<type>.max.*`` pair bounds both the broker's own value
(cross-checks in :mod:`kcompat.config.validation`) and the group-level config of the same name
(``share.record.lock.duration.ms`` set on one group, :mod:`kcompat.config.group`). The
``*.assignment.interval.ms`` configs are dynamic cluster-wide (``RECONFIGURABLE_CONFIGS``).
``group.streams.*`` are the streams groups' defaults (:mod:`kcompat.group.streams_groups`) and bound
the ``streams.*`` group configs.
"""

from __future__ import annotations

from .errors import ConfigError
from .keydef import CW, INT, LIST, RO, STRING, ConfigKey
from .keydef import define as d
from .types import Custom, at_least, between

INT_MAX = 2**31 - 1

_SHARE_ASSIGNORS = ("simple", "org.apache.kafka.coordinator.group.assignor.SimpleAssignor")


def _check_share_assignors(name: str, value: list[str]) -> None:
    """``GroupCoordinatorConfig``: each entry must name a known assignor class (Kafka loads it and
    fails with ``Class x cannot be found``), and there must be exactly one."""
    for item in value:
        if item not in _SHARE_ASSIGNORS:
            raise ConfigError(name, f"Class {item} cannot be found")
    if len(value) != 1:
        raise ConfigError(name, f"{name} must contain exactly one assignor, but found {len(value)}")


_share_assignors = Custom(_check_share_assignors, "[simple]")

GROUP_COORDINATOR_CONFIGS: list[ConfigKey] = [
    d("group.consumer.assignment.interval.ms", INT, 1000, at_least(0), CW, False, "Interval (ms) between assignment updates of a consumer group."),
    d("group.consumer.min.assignment.interval.ms", INT, 0, at_least(0), RO, False, "Lower bound of group.consumer.assignment.interval.ms."),
    d("group.consumer.max.assignment.interval.ms", INT, 15000, at_least(0), RO, False, "Upper bound of group.consumer.assignment.interval.ms."),
    # KIP-932 share groups (Kafka 4.3 GroupCoordinatorConfig and ShareGroupConfig); the bounds also
    # bound the share.* group configs (kcompat.config.group)
    d("group.share.session.timeout.ms", INT, 45000, at_least(1), RO, True, "Session timeout (ms) of share group members."),
    d("group.share.min.session.timeout.ms", INT, 45000, at_least(1), RO, True, "Lower bound of share session timeouts (broker and group level)."),
    d("group.share.max.session.timeout.ms", INT, 60000, at_least(1), RO, True, "Upper bound of share session timeouts (broker and group level)."),
    d("group.share.heartbeat.interval.ms", INT, 5000, at_least(1), RO, True, "Heartbeat interval (ms) the coordinator gives share group members."),
    d("group.share.min.heartbeat.interval.ms", INT, 5000, at_least(1), RO, True, "Lower bound of share heartbeat intervals (broker and group level)."),
    d("group.share.max.heartbeat.interval.ms", INT, 15000, at_least(1), RO, True, "Upper bound of share heartbeat intervals (broker and group level)."),
    d("group.share.max.size", INT, 200, between(1, 1000), RO, True, "Maximum members of one share group."),
    d("group.share.assignors", LIST, "simple", _share_assignors, RO, True,
      "Server-side assignor of share groups: exactly one, simple (org.apache.kafka.coordinator.group.assignor.SimpleAssignor)."),
    d("group.share.assignment.interval.ms", INT, 1000, at_least(0), CW, False, "Interval (ms) between assignment updates of a share group."),
    d("group.share.min.assignment.interval.ms", INT, 0, at_least(0), RO, False, "Lower bound of group.share.assignment.interval.ms."),
    d("group.share.max.assignment.interval.ms", INT, 15000, at_least(0), RO, False, "Upper bound of group.share.assignment.interval.ms."),
    d("group.share.initialize.retry.interval.ms", INT, 30000, at_least(1), RO, False,
      "Wait (ms) before retrying a failed initialization of share group state (at least offsets.commit.timeout.ms).",
      internal=True),
    d("group.share.record.lock.duration.ms", INT, 30000, between(1000, 3600000), RO, True, "Acquisition lock duration (ms) of records delivered to share groups."),
    d("group.share.min.record.lock.duration.ms", INT, 15000, between(1000, 30000), RO, True, "Lower bound of share.record.lock.duration.ms (group config)."),
    d("group.share.max.record.lock.duration.ms", INT, 60000, between(30000, 3600000), RO, True, "Upper bound of share.record.lock.duration.ms (group config)."),
    d("group.share.delivery.count.limit", INT, 5, between(2, 10), RO, True, "Delivery attempts of a record to a share group before it is archived."),
    d("group.share.min.delivery.count.limit", INT, 2, between(2, 5), RO, True, "Lower bound of share.delivery.count.limit (group config)."),
    d("group.share.max.delivery.count.limit", INT, 10, between(5, 25), RO, True, "Upper bound of share.delivery.count.limit (group config)."),
    d("group.share.partition.max.record.locks", INT, 2000, between(100, 10000), RO, True, "In-flight (acquired) records per share-partition."),
    d("group.share.min.partition.max.record.locks", INT, 100, between(100, 2000), RO, True, "Lower bound of share.partition.max.record.locks (group config)."),
    d("group.share.max.partition.max.record.locks", INT, 4000, between(2000, 10000), RO, True, "Upper bound of share.partition.max.record.locks (group config)."),
    d("group.share.max.share.sessions", INT, 2000, at_least(1), RO, False, "Share sessions per broker; at least group.share.max.size."),
    d("group.share.persister.class.name", STRING, "org.apache.kafka.server.share.persister.DefaultStatePersister", None,
      RO, False, "Persister of share-partition state.", internal=True),
    d("share.fetch.purgatory.purge.interval.requests", INT, 1000, None, RO, False, "Purge interval (requests) of the share fetch purgatory."),
    # KIP-1071 streams groups (kcompat.group.streams_groups); the bounds also bound the streams.* group configs
    d("group.streams.session.timeout.ms", INT, 45000, at_least(1), RO, True, "Session timeout (ms) of streams group members."),
    d("group.streams.min.session.timeout.ms", INT, 45000, at_least(1), RO, True, "Lower bound of streams session timeouts."),
    d("group.streams.max.session.timeout.ms", INT, 60000, at_least(1), RO, True, "Upper bound of streams session timeouts."),
    d("group.streams.heartbeat.interval.ms", INT, 5000, at_least(1), RO, True, "Heartbeat interval (ms) of streams group members."),
    d("group.streams.min.heartbeat.interval.ms", INT, 5000, at_least(1), RO, True, "Lower bound of streams heartbeat intervals."),
    d("group.streams.max.heartbeat.interval.ms", INT, 15000, at_least(1), RO, True, "Upper bound of streams heartbeat intervals."),
    d("group.streams.max.size", INT, INT_MAX, at_least(1), RO, True, "Maximum streams clients of one streams group."),
    d("group.streams.num.standby.replicas", INT, 0, at_least(0), RO, True, "Standby replicas of each streams task."),
    d("group.streams.max.standby.replicas", INT, 2, at_least(0), RO, True, "Upper bound of streams.num.standby.replicas."),
    d("group.streams.initial.rebalance.delay.ms", INT, 3000, at_least(0), RO, True, "Wait (ms) for more streams clients before the first rebalance."),
    d("group.streams.assignment.interval.ms", INT, 1000, at_least(0), CW, True, "Interval (ms) between assignment updates of a streams group."),
    d("group.streams.min.assignment.interval.ms", INT, 0, at_least(0), RO, True, "Lower bound of group.streams.assignment.interval.ms."),
    d("group.streams.max.assignment.interval.ms", INT, 15000, at_least(0), RO, True, "Upper bound of group.streams.assignment.interval.ms."),
]
