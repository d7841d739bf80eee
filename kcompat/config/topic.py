"""Topic-level configs of Kafka 4.3 and their broker-level synonyms.

Source: kafka.apache.org/43/documentation "3.2 Topic-Level Configs" (``TopicConfig``,
``LogConfig``) and ``ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS``, which lists for each
topic config the broker configs that supply its default, highest priority first, with unit
conversions (``log.roll.hours`` -> ms). A topic override beats every broker synonym.

The broker-derived value of a topic config is what ``KafkaConfig.extractLogConfigMap`` puts in the
topic's ``LogConfig``: first synonym whose effective broker value is not null, converted; a
negative retention time means "no limit" (-1).

Message timestamps follow Kafka 4.x (KIP-937, finished in 4.0): ``message.timestamp.after.max.ms``
defaults to one hour, ``message.timestamp.before.max.ms`` to Long.MAX_VALUE. Kafka 4.0 removed
``message.timestamp.difference.max.ms``, ``message.format.version`` and
``message.downconversion.enable``: they are unknown topic configs, as in Kafka 4.3 (a stored
override of one is ignored; IncrementalAlterConfigs may DELETE it). Like Kafka 4, kcompat reads
and writes only record format v2 (Fetch v4+), so there is nothing left to down-convert.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

from .errors import ConfigError, invalid_value
from .keydef import BOOLEAN, DOUBLE, INT, LIST, LONG, RO, STRING, ConfigKey, define
from .types import LONG_MAX, Custom, ValidList, ValidString, at_least, between, format_value, one_of_or_range

HOUR_MS = 3_600_000
MINUTE_MS = 60_000
MIN_SEGMENT_BYTES = 1024 * 1024   # segment.bytes and log.segment.bytes: atLeast(1024 * 1024) since Kafka 4.1


def _throttled(name: str, value: list[str]) -> None:
    """``ThrottledReplicaListValidator``: ``*`` or ``partition:broker,...``."""
    import re
    if "".join(value).strip() == "*":
        return
    if all(re.fullmatch(r"([0-9]+:[0-9]+)?", v.strip()) for v in value):
        return
    raise invalid_value(name, ",".join(value), f"{name} must be the literal '*' or a list of replicas in the following "
                        "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


_THROTTLED = Custom(_throttled, "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _t(name, ctype, default, validator, implemented, doc) -> ConfigKey:
    return define(name, ctype, default, validator, RO, implemented, doc)


_TOPIC_LIST: list[ConfigKey] = [
    _t("cleanup.policy", LIST, "delete", ValidList(["compact", "delete"]), True,
       "Retention policy of old segments: delete (by time/size), compact (latest value per key), or both."),
    _t("compression.gzip.level", INT, -1, one_of_or_range([-1], between(1, 9)), True,
       "gzip level if compression.type is gzip (KIP-390)."),
    _t("compression.lz4.level", INT, 9, between(1, 17), True, "lz4 level if compression.type is lz4 (KIP-390)."),
    _t("compression.type", STRING, "producer", ValidString(["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), True,
       "Final compression of the topic: a codec, uncompressed, or producer (keep what the producer sent)."),
    _t("compression.zstd.level", INT, 3, between(-131072, 22), True, "zstd level if compression.type is zstd (KIP-390)."),
    _t("delete.retention.ms", LONG, 86400000, at_least(0), True,
       "Time (ms) tombstones are retained on compacted topics (also bounds a full-read of the topic)."),
    _t("file.delete.delay.ms", LONG, 60000, at_least(0), True, "Time (ms) to wait before deleting a file from the filesystem."),
    _t("flush.messages", LONG, LONG_MAX, at_least(1), True, "Messages written before an fsync is forced."),
    _t("flush.ms", LONG, LONG_MAX, at_least(0), True, "Time (ms) after which an fsync is forced."),
    _t("follower.replication.throttled.replicas", LIST, "", _THROTTLED, False,
       "Replicas whose replication is throttled on the follower side, or *."),
    _t("index.interval.bytes", INT, 4096, at_least(0), True, "Bytes of log between two offset index entries."),
    _t("leader.replication.throttled.replicas", LIST, "", _THROTTLED, False,
       "Replicas whose replication is throttled on the leader side, or *."),
    _t("local.retention.bytes", LONG, -2, at_least(-2), False,
       "Local size (bytes) kept of a tiered partition; -2 = retention.bytes."),
    _t("local.retention.ms", LONG, -2, at_least(-2), False, "Local time (ms) kept of a tiered partition; -2 = retention.ms."),
    _t("max.compaction.lag.ms", LONG, LONG_MAX, at_least(1), True, "Maximum time (ms) a record stays ineligible for compaction."),
    _t("max.message.bytes", INT, 1048588, at_least(0), True, "Largest record batch size (bytes) allowed (after compression)."),
    _t("message.timestamp.after.max.ms", LONG, HOUR_MS, at_least(0), True,
       "How far (ms) a CreateTime timestamp may be ahead of the broker's clock (KIP-937; 1 hour since Kafka 4.0)."),
    _t("message.timestamp.before.max.ms", LONG, LONG_MAX, at_least(0), True,
       "How far (ms) a CreateTime timestamp may be behind the broker's clock (KIP-937)."),
    _t("message.timestamp.type", STRING, "CreateTime", ValidString(["CreateTime", "LogAppendTime"]), True,
       "CreateTime (the producer's timestamp) or LogAppendTime (the broker's)."),
    _t("min.cleanable.dirty.ratio", DOUBLE, 0.5, between(0, 1), True, "Minimum dirty/total ratio before the log is compacted."),
    _t("min.compaction.lag.ms", LONG, 0, at_least(0), True, "Minimum age (ms) of a record before it can be compacted."),
    _t("min.insync.replicas", INT, 1, at_least(1), True, "With acks=all, replicas that must have a write."),
    _t("preallocate", BOOLEAN, False, None, False, "Preallocate segment files."),
    _t("remote.log.copy.disable", BOOLEAN, False, None, False, "Stop copying to tiered storage (KIP-950)."),
    _t("remote.log.delete.on.disable", BOOLEAN, False, None, False, "Delete tiered data when tiering is disabled (KIP-950)."),
    _t("remote.storage.enable", BOOLEAN, False, None, False, "Enable tiered storage for the topic (KIP-405)."),
    _t("retention.bytes", LONG, -1, None, True, "Maximum partition size (bytes) before old segments are deleted; -1 = no limit."),
    _t("retention.ms", LONG, 604800000, at_least(-1), True, "Maximum age (ms) of a segment before deletion; -1 = no limit."),
    _t("segment.bytes", INT, 1073741824, at_least(MIN_SEGMENT_BYTES), True,
       "Segment file size (bytes); at least 1 MiB since Kafka 4.1 (internal.segment.bytes for tests)."),
    _t("segment.index.bytes", INT, 10485760, at_least(4), True, "Size (bytes) of the offset index of a segment."),
    _t("segment.jitter.ms", LONG, 0, at_least(0), True, "Maximum random jitter (ms) subtracted from segment.ms."),
    _t("segment.ms", LONG, 604800000, at_least(1), True, "Time (ms) after which the active segment is rolled."),
    _t("unclean.leader.election.enable", BOOLEAN, False, None, True, "Allow out-of-sync replicas to become leader."),
]
TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in _TOPIC_LIST}
# LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG (defineInternal: any INT, no default): when set, the
# segment size instead of segment.bytes, for tests that need small segments. Accepted by
# CreateTopics and AlterConfigs, described only when set, as Kafka 4.3 does.
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"
TOPIC_CONFIGS[INTERNAL_SEGMENT_BYTES] = define(INTERNAL_SEGMENT_BYTES, INT, None, None, RO, True,
                                              "The maximum size of a single log file. This should be used for "
                                              "testing only.", internal=True)


def segment_size(configured: int, internal: int | None) -> int:
    """The segment size (bytes) a log uses: ``internal`` (``internal.segment.bytes``, or the
    metadata log's ``internal.metadata.log.segment.bytes``) when set, else ``configured``. Kafka
    takes any INT there; the floor is 14 bytes (LogConfig's), a segment holds a batch at least."""
    return configured if internal is None else max(14, internal)


# topic config -> ((broker config, multiplier to the topic unit), ...), highest priority first.
TOPIC_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
}
# LogConfig.CONFIGS_WITH_NO_SERVER_DEFAULTS
NO_SERVER_DEFAULT = frozenset(k for k, v in TOPIC_CONFIGS.items() if not v.internal) - frozenset(TOPIC_SYNONYMS)


class _BrokerView(Protocol):
    def get(self, name: str) -> Any: ...


def server_synonym(topic_name: str) -> str | None:
    """The highest-priority broker synonym ("Server Default Property" in Kafka's docs)."""
    syns = TOPIC_SYNONYMS.get(topic_name)
    return syns[0][0] if syns else None


def broker_default(topic_name: str, broker: _BrokerView) -> Any:
    """The typed value a topic without an override gets from the broker (``extractLogConfigMap``)."""
    key = TOPIC_CONFIGS[topic_name]
    syns = TOPIC_SYNONYMS.get(topic_name)
    if not syns:
        return key.typed_default()
    value: Any = None
    for broker_name, mult in syns:
        value = broker.get(broker_name)
        if value is not None:
            if mult != 1:
                value = value * mult
            break
    if value is None:
        return key.typed_default()
    if topic_name == "retention.ms" and value < 0:
        return -1
    if isinstance(value, list):
        return list(value)
    return value


def parse_topic_value(name: str, raw: Any) -> Any:
    """Parse and validate one topic config value; ``ConfigError`` for unknown names or bad values."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise ConfigError(name, f"Unknown topic config name: {name}")
    return key.parse(raw)


def effective_topic_values(overrides: Mapping[str, str], broker: _BrokerView) -> dict[str, Any]:
    """Typed value of every topic config: the override if present, else the broker-derived value.

    Overrides of names that are no topic config (one stored before kcompat followed Kafka 4.0 in
    dropping ``message.timestamp.difference.max.ms``, ``message.format.version`` or
    ``message.downconversion.enable``) are ignored, as Kafka's ``LogConfig`` does.
    """
    out: dict[str, Any] = {}
    for name in TOPIC_CONFIGS:
        if name in overrides and overrides[name] is not None:
            out[name] = parse_topic_value(name, overrides[name])
        else:
            out[name] = broker_default(name, broker)
    return out


def validate_topic_configs(configs: Mapping[str, str | None], broker: _BrokerView | None = None, *,
                           remote_storage_system_enabled: bool = False) -> dict[str, str]:
    """Validate CreateTopics / AlterConfigs topic configs and normalise their values.

    Returns ``{name: value}`` with each value in Kafka's canonical string form (trimmed, lists
    joined with ``,``). Raises :class:`ConfigError` (answer ``INVALID_CONFIG``) for a null value,
    an unknown name (``Unknown topic config name: x``), a value of the wrong type or out of range,
    ``min.compaction.lag.ms`` > ``max.compaction.lag.ms``, or ``remote.storage.enable=true``
    unless ``remote_storage_system_enabled`` (the broker's ``remote.log.storage.system.enable``),
    on a compacted topic, or with ``local.retention.bytes/ms`` above ``retention.bytes/ms``
    (Kafka ``LogConfig.validateTopicLogConfigValues``, KIP-405).
    """
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise ConfigError(nulls[0], "Null value not supported for topic configs: " + ",".join(nulls))
    out: dict[str, str] = {}
    typed: dict[str, Any] = {}
    for name, raw in configs.items():
        value = parse_topic_value(name, raw)
        typed[name] = value
        out[name] = format_value(TOPIC_CONFIGS[name].type, value)  # type: ignore[assignment]

    def merged(n: str) -> Any:
        if n in typed:
            return typed[n]
        return broker_default(n, broker) if broker is not None else TOPIC_CONFIGS[n].typed_default()

    lo, hi = merged("min.compaction.lag.ms"), merged("max.compaction.lag.ms")
    if lo > hi:
        raise ConfigError("min.compaction.lag.ms", f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                                                   f"max.compaction.lag.ms ({hi})")
    if typed.get("remote.storage.enable"):
        _validate_remote_storage(merged, remote_storage_system_enabled)
    return out


def _validate_remote_storage(merged: Callable[[str], Any], system_enabled: bool) -> None:
    if not system_enabled:
        raise ConfigError("remote.storage.enable", "Tiered Storage functionality is disabled in the broker. "
                                                   "Topic cannot be configured with remote log storage "
                                                   "(remote.storage.enable).")
    if "compact" in merged("cleanup.policy"):
        raise ConfigError(None, "Remote log storage is unsupported for the compacted topics")
    for total, local, unlimited in (("retention.bytes", "local.retention.bytes", -1),
                                    ("retention.ms", "local.retention.ms", -1)):
        t, lv = merged(total), merged(local)
        if t != unlimited and lv != -2:
            if lv == -1:
                raise invalid_value(local, lv, f"Value must not be -1 as {total} value is set as {t}.")
            if lv > t:
                raise invalid_value(local, lv, f"Value must not be more than {total} property value: {t}")
