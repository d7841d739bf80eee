"""kcompat's configuration: Kafka 4.3.1's broker, topic and group configs (names, defaults, types;
the 3.9 keys Kafka 4.0 removed load with no effect and a warning; DESIGN.md section 9).

Entry points for the broker::

    cfg = BrokerConfig.load("server.properties", ["num.partitions=3"])   # raises ConfigError
    cfg.listeners, cfg.advertised_broker_listeners, cfg.log_dirs, cfg.node_id, cfg.get("num.partitions")
    log_config_for(topic_overrides, cfg)      # typed effective topic configs for the log layer
    describe_topic(...), describe_broker(...) # DescribeConfigs
    validate_topic_configs(...), apply_incremental(...)   # CreateTopics / (Incremental)AlterConfigs
    effective_group_config(cfg, image.group_config(g))    # a group's typed configs (GROUP resources, KIP-932)
    validate_group_configs(...), describe_group(...)      # group configs: AlterConfigs, DescribeConfigs

Modules: :mod:`.definitions` (broker config table), :mod:`.compat_defs` (accepted-only keys),
:mod:`.topic` (topic configs and synonyms), :mod:`.group` (dynamic group configs, Kafka 4.3),
:mod:`.client_metrics` (client metrics subscriptions, KIP-714), :mod:`.cordoned` (``cordoned.log.dirs``, KIP-1066),
:mod:`.group_defs` (group.share.* / group.streams.* broker configs), :mod:`.broker` (``BrokerConfig``),
:mod:`.describe`, :mod:`.properties` (server.properties syntax), :mod:`.endpoints` (listeners, quorum voters),
:mod:`.types` (types, validators, Kafka's value strings), :mod:`.errors` (``ConfigError``).
"""

from __future__ import annotations

from typing import Any, Mapping

from .broker import BrokerConfig
from .definitions import BROKER_CONFIGS, KCOMPAT_DEFAULTS, broker_config_synonyms
from .describe import (OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, ConfigEntry, ConfigSynonym, apply_incremental,
                       describe_broker, describe_group, describe_topic)
from .endpoints import Listener, Voter
from .errors import ConfigError
from .group import GROUP_CONFIGS, GroupConfigs, ShareAutoOffsetReset, effective_group_config, validate_group_configs
from .keydef import ConfigKey
from .properties import load_properties, parse_properties
from .topic import TOPIC_CONFIGS, TOPIC_SYNONYMS, effective_topic_values, validate_topic_configs
from .types import ConfigSource, ConfigType, UpdateMode

__all__ = [
    "BROKER_CONFIGS", "GROUP_CONFIGS", "KCOMPAT_DEFAULTS", "TOPIC_CONFIGS", "TOPIC_SYNONYMS",
    "BrokerConfig", "ConfigEntry", "ConfigError", "ConfigKey", "ConfigSource", "ConfigSynonym", "ConfigType",
    "GroupConfigs", "Listener", "ShareAutoOffsetReset", "UpdateMode", "Voter",
    "OP_APPEND", "OP_DELETE", "OP_SET", "OP_SUBTRACT",
    "apply_incremental", "broker_config_synonyms", "describe_broker", "describe_group", "describe_topic",
    "effective_group_config", "load_properties", "log_config_for", "parse_properties", "validate_group_configs",
    "validate_topic_configs",
]


def log_config_for(topic_overrides: Mapping[str, str], broker: BrokerConfig) -> dict[str, Any]:
    """Effective typed configs of one topic, keyed by topic config name, for the log layer.

    Every topic config is present: the topic override if set, else the broker-derived value
    (``KafkaConfig.extractLogConfigMap``), else the topic default. Units are Kafka's: ``segment.ms``,
    ``retention.ms`` (-1 = no limit), ``flush.ms``, ``file.delete.delay.ms``, ``segment.jitter.ms``,
    ``delete.retention.ms`` ... in milliseconds; ``segment.bytes``, ``segment.index.bytes``,
    ``retention.bytes`` (-1 = no limit), ``index.interval.bytes``, ``max.message.bytes`` in bytes;
    ``cleanup.policy`` a list of "delete"/"compact"; ``message.timestamp.type`` "CreateTime" or
    "LogAppendTime"; ``message.timestamp.{before,after}.max.ms`` in ms (Kafka 4.x defaults: Long.MAX_VALUE
    and one hour, KIP-937).
    """
    return effective_topic_values(topic_overrides, broker)
