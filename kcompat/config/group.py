"""Dynamic group configs (ConfigResource type GROUP = 32; KIP-848, KIP-932, KIP-1071, KIP-1240):
Kafka 4.3's ``org.apache.kafka.coordinator.group.GroupConfig`` (names, types, defaults, ranges,
``validate`` and ``evaluate`` as in Kafka 4.3.1's jars; DescribeConfigs as its ``ConfigHelper``).

A group's configs are overrides stored as ``ConfigRecord(resource_type=32, resource_name=<group
id>)`` in the metadata log, set with IncrementalAlterConfigs / AlterConfigs
(``kafka-configs.sh --entity-type groups --entity-name G --alter --add-config k=v``) and shown by
DescribeConfigs. A group need not exist to have configs, and deleting a group keeps them (as in
Kafka). Every other value comes from the broker: the group config's broker synonym
(``share.record.lock.duration.ms`` <- ``group.share.record.lock.duration.ms``), or the
GroupConfig default for the three without one (``share.auto.offset.reset`` latest,
``share.isolation.level`` read_uncommitted, ``share.renew.acknowledge.enable`` true).

For the coordinators (no import of the broker needed)::

    from kcompat.config.group import effective_group_config
    overrides = broker.image.group_config(group_id)          # {name: value} set on the group
    gc = effective_group_config(broker.config, overrides, group_id)
    gc.share_record_lock_duration_ms      # int, ms
    gc.share_delivery_count_limit         # int
    gc.share_partition_max_record_locks   # int
    gc.share_auto_offset_reset.strategy   # "earliest" | "latest" | "by_duration"
    gc.share_auto_offset_reset.start_timestamp(now_ms)   # by_duration: now_ms - duration (ms)
    gc.share_isolation_level              # "read_uncommitted" | "read_committed"
    gc.consumer_session_timeout_ms, gc.share_heartbeat_interval_ms, ...   # every config, typed

``effective_group_config`` is Kafka's ``GroupConfigManager.updateGroupConfig``: an override outside
the broker's current bounds (the bounds changed after it was set) is capped into them
(``GroupConfig.evaluate``), and an override that does not parse (never written by kcompat) is
ignored, so a coordinator never fails on a stored value.

Validation (:func:`validate_group_configs`, run on the group's whole resulting set of overrides
as Kafka's ``ControllerConfigurationValidator`` does) answers INVALID_CONFIG (40) with Kafka's
messages: ``Unknown group config name: x``; ``Invalid value 500 for configuration
share.record.lock.duration.ms: Value must be at least 1000`` (the GroupConfig range);
``share.record.lock.duration.ms must be greater than or equal to
group.share.min.record.lock.duration.ms`` (the broker bounds); ``share.session.timeout.ms must be
greater than share.heartbeat.interval.ms``; ``Null value not supported for group configs: x``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Mapping, Protocol

from .errors import ConfigError, invalid_value
from .keydef import BOOLEAN, INT, RO, STRING, ConfigKey, define
from .types import LONG_MAX, Custom, ValidString, at_least, format_value

RESOURCE_GROUP = 32  # ConfigResource.Type.GROUP

_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE | re.ASCII)


def parse_iso_duration_ns(text: str) -> int:
    """Java's ``Duration.parse(text)`` in nanoseconds: ISO-8601 ``PnDTnHnMn.nS``, letters in any
    case, signed parts, up to 9 fraction digits, a lone ``T`` refused; ``ValueError`` where Java
    throws (``DateTimeParseException``, or an overflow of its ``long`` seconds)."""
    m = _ISO_DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or all(m.group(i) is None for i in (2, 4, 5, 6)):
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    secs = 0
    for group, unit in ((2, 86400), (4, 3600), (5, 60), (6, 1)):
        if m.group(group) is not None:
            part = int(m.group(group)) * unit
            if not -(2**63) <= part <= LONG_MAX:
                raise ValueError(f"Text cannot be parsed to a Duration: {text}")
            secs += part
    if not -(2**63) <= secs <= LONG_MAX:
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    nanos = int(m.group(7).ljust(9, "0")) if m.group(7) else 0
    if m.group(7) and m.group(6).startswith("-"):
        nanos = -nanos
    total = secs * 1_000_000_000 + nanos
    return -total if m.group(1) == "-" else total


@dataclass(frozen=True)
class ShareAutoOffsetReset:
    """``share.auto.offset.reset`` parsed (Kafka's ``ShareGroupAutoOffsetResetStrategy``).

    ``strategy`` is ``"earliest"``, ``"latest"`` or ``"by_duration"``; ``duration_ms`` (>= 0) only
    for by_duration; ``str()`` is the config value (``by_duration:PT1H``)."""

    strategy: str
    duration_ms: int | None = None
    text: str = ""

    def start_timestamp(self, now_ms: int) -> int | None:
        """by_duration: the timestamp (ms) to start from, ``now_ms - duration_ms``; else None."""
        return None if self.duration_ms is None else now_ms - self.duration_ms

    def __str__(self) -> str:
        return self.text or self.strategy


def parse_share_auto_offset_reset(value: str) -> ShareAutoOffsetReset:
    """``latest`` | ``earliest`` | ``by_duration:<ISO-8601 duration>`` (case-sensitive names, a
    duration that is not negative; ``duration_ms`` is Java's ``Duration.toMillis``); ``ConfigError``
    with Kafka's validator message otherwise (``AutoOffsetResetStrategy.fromString``)."""
    if value in ("latest", "earliest"):
        return ShareAutoOffsetReset(value, None, value)
    if value.startswith("by_duration:"):
        try:
            ns = parse_iso_duration_ns(value[len("by_duration:"):])
        except ValueError:
            ns = -1
        if ns >= 0:
            return ShareAutoOffsetReset("by_duration", ns // 1_000_000, value)
    raise invalid_value("share.auto.offset.reset", value,
                        f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be "
                        "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def _check_reset(name: str, value: str) -> None:
    parse_share_auto_offset_reset(value)


def _g(name: str, ctype, default, validator, doc: str) -> ConfigKey:
    return define(name, ctype, default, validator, RO, True, doc)


# GroupConfig.CONFIG_DEF of Kafka 4.3.1, in its definition order (the order values are parsed in).
_GROUP_LIST: list[ConfigKey] = [
    _g("consumer.session.timeout.ms", INT, 45000, at_least(1),
       "The timeout to detect client failures when using the consumer group protocol."),
    _g("consumer.heartbeat.interval.ms", INT, 5000, at_least(1),
       "The heartbeat interval given to the members of a consumer group."),
    _g("consumer.assignment.interval.ms", INT, 1000, at_least(0),
       "The interval between assignment updates for a consumer group."),
    _g("share.session.timeout.ms", INT, 45000, at_least(1),
       "The timeout to detect client failures when using the share group protocol."),
    _g("share.heartbeat.interval.ms", INT, 5000, at_least(1),
       "The heartbeat interval given to the members of a share group."),
    _g("share.record.lock.duration.ms", INT, 30000, at_least(1000),
       "The record acquisition lock duration in milliseconds for share groups."),
    _g("share.delivery.count.limit", INT, 5, at_least(2),
       "The maximum number of delivery attempts for a record delivered to a share group."),
    _g("share.partition.max.record.locks", INT, 2000, at_least(100),
       "Share-group record lock limit per share-partition."),
    _g("share.auto.offset.reset", STRING, "latest",
       Custom(_check_reset, "[latest, earliest, by_duration:PnDTnHnMn.nS]"),
       "The strategy to initialize the share-partition start offset: earliest, latest, or "
       "by_duration:<ISO-8601 duration> (from that long before the current time; not negative)."),
    _g("share.isolation.level", STRING, "read_uncommitted", ValidString(["read_committed", "read_uncommitted"]),
       'Controls how to read records written transactionally. If set to "read_committed", the share group will '
       'only deliver transactional records which have been committed. If set to "read_uncommitted", the share '
       "group will return all messages, even transactional messages which have been aborted. Non-transactional "
       "records will be returned unconditionally in either mode."),
    _g("share.renew.acknowledge.enable", BOOLEAN, True, None,
       "Whether the renew acknowledge type is enabled for the share group."),
    _g("share.assignment.interval.ms", INT, 1000, at_least(0),
       "The interval between assignment updates for a share group."),
    _g("streams.session.timeout.ms", INT, 45000, at_least(1),
       "The timeout to detect client failures when using the streams group protocol."),
    _g("streams.heartbeat.interval.ms", INT, 5000, at_least(1), "The heartbeat interval given to the members."),
    _g("streams.num.standby.replicas", INT, 0, at_least(0), "The number of standby replicas for each task."),
    _g("streams.initial.rebalance.delay.ms", INT, 3000, at_least(0),
       "The amount of time the group coordinator will wait for more streams clients to join a new group before "
       "performing the first rebalance. A longer delay means potentially fewer rebalances."),
    _g("streams.assignment.interval.ms", INT, 1000, at_least(0),
       "The interval between assignment updates for a streams group."),
]
GROUP_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in _GROUP_LIST}

# GroupConfig.ALL_GROUP_CONFIG_SYNONYMS: the broker config that supplies a group config's default.
GROUP_CONFIG_SYNONYMS: dict[str, str | None] = {
    name: (None if name in ("share.auto.offset.reset", "share.isolation.level", "share.renew.acknowledge.enable")
           else "group." + name)
    for name in GROUP_CONFIGS
}

# GroupConfig.validateValues / evaluateValues, in Kafka's order: group config -> (broker lower
# bound, upper bound); None = unbounded on that side (streams.num.standby.replicas has only a maximum).
def _range(kind: str, what: str) -> tuple[str, tuple[str | None, str | None]]:
    return f"{kind}.{what}", (f"group.{kind}.min.{what}", f"group.{kind}.max.{what}")


GROUP_CONFIG_BOUNDS: dict[str, tuple[str | None, str | None]] = dict([
    _range("consumer", "heartbeat.interval.ms"), _range("consumer", "session.timeout.ms"),
    _range("consumer", "assignment.interval.ms"),
    _range("share", "heartbeat.interval.ms"), _range("share", "session.timeout.ms"),
    _range("share", "record.lock.duration.ms"), _range("share", "delivery.count.limit"),
    _range("share", "partition.max.record.locks"), _range("share", "assignment.interval.ms"),
    _range("streams", "heartbeat.interval.ms"), _range("streams", "session.timeout.ms"),
    ("streams.num.standby.replicas", (None, "group.streams.max.standby.replicas")),
    _range("streams", "assignment.interval.ms"),
])
_SESSION_OVER_HEARTBEAT = [(f"{k}.session.timeout.ms", f"{k}.heartbeat.interval.ms")
                           for k in ("consumer", "share", "streams")]


class _BrokerView(Protocol):
    def get(self, name: str) -> Any: ...


def group_config_defaults(broker: _BrokerView) -> dict[str, Any]:
    """Typed value of every group config when the group sets none (``extractGroupConfigMap``):
    the broker synonym's effective value, else the GroupConfig default. The dynamic assignment
    intervals are capped into their bounds (``GroupCoordinatorConfig.clampDynamicConfigs``)."""
    out: dict[str, Any] = {}
    for name, key in GROUP_CONFIGS.items():
        syn = GROUP_CONFIG_SYNONYMS[name]
        value = broker.get(syn) if syn is not None else key.typed_default()
        if name.endswith(".assignment.interval.ms"):
            lo, hi = GROUP_CONFIG_BOUNDS[name]
            value = min(max(value, broker.get(lo)), broker.get(hi))
        out[name] = value
    return out


def _holds(a: int, b: int, op: str) -> bool:
    return a >= b if op == ">=" else a <= b


def validate_group_configs(configs: Mapping[str, str | None], broker: _BrokerView) -> dict[str, str]:
    """Validate a group's complete set of overrides (what it would have after the change) and
    return it normalised (each value in Kafka's string form: trimmed, ``+5`` -> ``5``).

    Kafka 4.3's ``GroupConfig.validate`` over the overrides merged onto the broker-derived
    defaults: names, then types and GroupConfig ranges in definition order, then the broker
    bounds of each config, then session timeout > heartbeat interval per group type. Raises
    :class:`ConfigError` (INVALID_CONFIG) with Kafka's message.
    """
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise ConfigError(nulls[0], "Null value not supported for group configs: " + ",".join(nulls))
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise ConfigError(name, f"Unknown group config name: {name}")
    typed = {name: GROUP_CONFIGS[name].parse(configs[name]) for name in GROUP_CONFIGS if name in configs}
    merged = {**group_config_defaults(broker), **typed}
    for name, (lo, hi) in GROUP_CONFIG_BOUNDS.items():
        for bound, op, word in ((lo, ">=", "greater than or equal to"), (hi, "<=", "less than or equal to")):
            if bound is not None and not _holds(merged[name], broker.get(bound), op):
                raise ConfigError(name, f"{name} must be {word} {bound}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if merged[session] <= merged[heartbeat]:
            raise ConfigError(session, f"{session} must be greater than {heartbeat}")
    return {name: format_value(GROUP_CONFIGS[name].type, value) for name, value in typed.items()}  # type: ignore[misc]


@dataclass(frozen=True)
class GroupConfigs:
    """A group's effective configs (Kafka's ``GroupConfig``); times in ms.

    Attributes mirror the config names (``share.record.lock.duration.ms`` ->
    ``share_record_lock_duration_ms``); ``overridden`` names the configs the group sets itself.
    """

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    consumer_assignment_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_delivery_count_limit: int
    share_partition_max_record_locks: int
    share_auto_offset_reset: ShareAutoOffsetReset
    share_isolation_level: str
    share_renew_acknowledge_enable: bool
    share_assignment_interval_ms: int
    streams_session_timeout_ms: int
    streams_heartbeat_interval_ms: int
    streams_num_standby_replicas: int
    streams_initial_rebalance_delay_ms: int
    streams_assignment_interval_ms: int
    overridden: frozenset[str] = frozenset()

    @property
    def share_read_committed(self) -> bool:
        """``share.isolation.level=read_committed``: deliver only committed transactional records."""
        return self.share_isolation_level == "read_committed"


def effective_group_config(broker: _BrokerView, overrides: Mapping[str, str] | None = None,
                           group_id: str | None = None) -> GroupConfigs:
    """The effective configs of a group with ``overrides`` (``MetadataImage.group_config``) on
    ``broker`` (a ``BrokerConfig``): overrides capped into the broker's current bounds
    (``GroupConfig.evaluate``), every other config from :func:`group_config_defaults`. Unknown
    names and values that do not parse are ignored. ``group_id`` is only for the reader's logs."""
    values = group_config_defaults(broker)
    used: set[str] = set()
    for name, raw in (overrides or {}).items():
        key = GROUP_CONFIGS.get(name)
        if key is None or raw is None:
            continue
        try:
            value = key.parse(raw)
        except ConfigError:
            continue
        bounds = GROUP_CONFIG_BOUNDS.get(name)
        if bounds is not None:
            lo, hi = bounds
            if lo is not None:
                value = max(value, broker.get(lo))
            if hi is not None:
                value = min(value, broker.get(hi))
        values[name] = value
        used.add(name)
    values["share.auto.offset.reset"] = parse_share_auto_offset_reset(values["share.auto.offset.reset"])
    kwargs = {f.name: values[f.name.replace("_", ".")] for f in fields(GroupConfigs) if f.name != "overridden"}
    return GroupConfigs(**kwargs, overridden=frozenset(used))
