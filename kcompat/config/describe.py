"""What DescribeConfigs, CreateTopics, AlterConfigs and IncrementalAlterConfigs need; pure functions.

Values, sources and synonyms follow Kafka 3.9's ``ConfigHelper`` exactly, including its quirks:

* A config's synonyms are collected layer by layer (dynamic per-broker, dynamic cluster default,
  static, default), each layer in the synonym order of ``DynamicBrokerConfig.brokerConfigSynonyms``,
  and then everything *before the first synonym with the described name* is dropped. So a topic's
  ``retention.ms`` (server synonym ``log.retention.ms``) reports ``log.retention.ms`` and whatever
  follows it, but when only ``log.retention.hours`` is set, the value is derived from it while
  the source is DEFAULT_CONFIG and the synonym list is empty — as ``kafka-configs.sh --describe``
  prints ``retention.ms=604800000 ... synonyms={}`` against a stock ``server.properties``.
* Topic entries are never read-only; broker entries are read-only unless dynamically updatable.
* PASSWORD (and unknown, e.g. ``listener.name.*``) configs are sensitive: value ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple

from .broker import BrokerConfig, _listener_base
from .definitions import BROKER_CONFIGS, DESCRIBED_AS_LIST, DYNAMIC_CONFIGS, broker_config_synonyms
from .errors import ConfigError
from .group import GROUP_CONFIG_SYNONYMS, GROUP_CONFIGS, group_config_defaults
from .topic import TOPIC_CONFIGS, broker_default, parse_topic_value, server_synonym, validate_topic_configs
from .types import ConfigSource, ConfigType, format_value

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

__all__ = ["ConfigEntry", "ConfigSynonym", "describe_topic", "describe_broker", "describe_group",
           "validate_topic_configs", "apply_incremental", "OP_SET", "OP_DELETE", "OP_APPEND", "OP_SUBTRACT"]


class ConfigSynonym(NamedTuple):
    """One DescribeConfigs synonym: (name, value or None if sensitive, ConfigSource number)."""

    name: str
    value: str | None
    source: int


@dataclass
class ConfigEntry:
    """One DescribeConfigs result entry (``DescribeConfigsResourceResult``)."""

    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    config_type: int
    documentation: str | None = None
    synonyms: list[ConfigSynonym] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0 ``is_default``: the value is the built-in default."""
        return self.source == ConfigSource.DEFAULT_CONFIG


def _config_synonyms(broker: BrokerConfig, name: str, synonyms: list[str], sensitive: bool) -> list[ConfigSynonym]:
    """``ConfigHelper.configSynonyms``."""
    out: list[ConfigSynonym] = []
    layers = ((broker.dynamic_per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
              (broker.dynamic_cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
              (broker._static, ConfigSource.STATIC_BROKER_CONFIG))  # noqa: SLF001 - same package
    for layer, source in layers:
        for s in synonyms:
            if s in layer:
                out.append(ConfigSynonym(s, None if sensitive else layer[s], int(source)))
    for s in synonyms:
        default = broker.default_str(s)
        if default is not None:
            out.append(ConfigSynonym(s, None if sensitive else default, int(ConfigSource.DEFAULT_CONFIG)))
    while out and out[0].name != name:
        out.pop(0)
    return out


def _select(names: Iterable[str], keys: Iterable[str] | None) -> list[str]:
    names = sorted(names)
    if keys:
        wanted = set(keys)
        names = [n for n in names if n in wanted]
    return names


def describe_topic(overrides: Mapping[str, str], broker: BrokerConfig, *, include_synonyms: bool = False,
                   keys: Iterable[str] | None = None, include_documentation: bool = True) -> list[ConfigEntry]:
    """DescribeConfigs for a topic with the given dynamic topic ``overrides``.

    Every topic config is reported (or only ``keys``; unknown requested names are left out),
    sorted by name; an internal one (``internal.segment.bytes``) only when the topic sets it. A
    value comes from the topic override (source DYNAMIC_TOPIC_CONFIG), else from the broker's
    effective config through the synonym chain, else the topic default.
    """
    out: list[ConfigEntry] = []
    for name in _select(TOPIC_CONFIGS, keys):
        key = TOPIC_CONFIGS[name]
        overridden = name in overrides and overrides[name] is not None
        if key.internal and not overridden:   # internal.segment.bytes: only when set, as in Kafka 4.3
            continue
        value = parse_topic_value(name, overrides[name]) if overridden else broker_default(name, broker)
        sensitive = key.sensitive
        text = None if sensitive else format_value(key.type, value)
        synonyms: list[ConfigSynonym] = []
        srv = server_synonym(name)
        if srv is not None:
            synonyms = _config_synonyms(broker, srv, broker_config_synonyms(srv), sensitive)
        if overridden:
            synonyms.insert(0, ConfigSynonym(name, text, int(ConfigSource.TOPIC_CONFIG)))
        source = synonyms[0].source if synonyms else int(ConfigSource.DEFAULT_CONFIG)
        out.append(ConfigEntry(name, text, source, False, sensitive, int(key.type),
                               key.doc if include_documentation else None,
                               synonyms if include_synonyms else []))
    return out


def _key_for(name: str):
    """Definition of a broker config; ``listener.name.<l>.<config>`` takes ``<config>``'s
    (``KafkaConfig.configType``)."""
    return BROKER_CONFIGS.get(name) or BROKER_CONFIGS.get(_listener_base(name))


def _broker_value_text(broker: BrokerConfig, name: str) -> tuple[str | None, bool, int]:
    """(value text, sensitive, config type) of one broker config as ConfigHelper shows it."""
    key = _key_for(name)
    if key is None:  # pass-through key of unknown type: Kafka treats it as sensitive
        return None, True, int(ConfigType.UNKNOWN)
    ctype = int(ConfigType.LIST) if name in DESCRIBED_AS_LIST else int(key.type)
    if key.sensitive:
        return None, True, ctype
    value: Any = broker.get(name)
    text = value if isinstance(value, str) else format_value(key.type, value)
    return text, False, ctype


def describe_broker(broker: BrokerConfig, node_id: int | str | None, *, include_synonyms: bool = False,
                    keys: Iterable[str] | None = None, include_documentation: bool = True) -> list[ConfigEntry]:
    """DescribeConfigs for resource BROKER ``node_id``; ``None`` or ``""`` is the cluster default.

    Per-broker: every known (non-internal) config plus anything set statically or dynamically.
    Cluster default: only the keys set in ``dynamic_cluster_default``, with only
    DYNAMIC_DEFAULT_BROKER_CONFIG synonyms (Kafka ``createBrokerConfigEntry(perBrokerConfig=false)``).
    Raises :class:`ConfigError` (``INVALID_REQUEST``) for another broker's id.
    """
    per_broker = not (node_id is None or node_id == "")
    if per_broker:
        try:
            requested = int(node_id)  # type: ignore[arg-type]
        except ValueError:
            raise ConfigError(None, f"Broker id must be an integer, but it is: {node_id}", error="INVALID_REQUEST") from None
        if requested != broker.node_id:
            raise ConfigError(None, f"Unexpected broker id, expected {broker.node_id} or empty string, but received "
                                    f"{node_id}", error="INVALID_REQUEST")
        names = {k for k, v in BROKER_CONFIGS.items() if not v.internal}
        names |= set(broker._static) | set(broker.dynamic_cluster_default) | set(broker.dynamic_per_broker)  # noqa: SLF001
    else:
        names = set(broker.dynamic_cluster_default)
    out: list[ConfigEntry] = []
    for name in _select(names, keys):
        if per_broker:
            text, sensitive, ctype = _broker_value_text(broker, name)
        else:
            key = _key_for(name)
            sensitive = key is None or key.sensitive
            ctype = int(key.type) if key is not None else int(ConfigType.UNKNOWN)
            text = None if sensitive else broker.dynamic_cluster_default[name]
        synonyms = _config_synonyms(broker, name, broker_config_synonyms(name), sensitive)
        if not per_broker:
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        source = synonyms[0].source if synonyms else int(ConfigSource.DEFAULT_CONFIG)
        key = BROKER_CONFIGS.get(name)
        doc = key.doc if (include_documentation and key is not None) else None
        out.append(ConfigEntry(name, text, source, name not in DYNAMIC_CONFIGS, sensitive, ctype, doc,
                               synonyms if include_synonyms else []))
    return out


def describe_group(overrides: Mapping[str, str], broker: BrokerConfig, *, include_synonyms: bool = False,
                   keys: Iterable[str] | None = None, include_documentation: bool = True) -> list[ConfigEntry]:
    """DescribeConfigs for resource GROUP (32) with the group's dynamic ``overrides``.

    Kafka 4.3's ``ConfigHelper.createGroupConfigEntry``: every group config (or only ``keys``),
    sorted by name, never read-only. An override has source GROUP_CONFIG (8, the Java client's
    DYNAMIC_GROUP_CONFIG) and comes first among the synonyms; then the broker synonym's layers
    (``group.share.record.lock.duration.ms`` as DYNAMIC/STATIC_BROKER_CONFIG or DEFAULT_CONFIG),
    or for the three configs without one their GroupConfig default (DEFAULT_CONFIG). Values are
    shown as set, not capped into the broker's bounds (as Kafka shows them).
    """
    defaults = group_config_defaults(broker)
    out: list[ConfigEntry] = []
    for name in _select(GROUP_CONFIGS, keys):
        key = GROUP_CONFIGS[name]
        overridden = overrides.get(name) is not None
        value: Any = defaults[name]
        if overridden:
            try:
                value = key.parse(overrides[name])
            except ConfigError:
                value = overrides[name]
        text = value if isinstance(value, str) else format_value(key.type, value)
        syn = GROUP_CONFIG_SYNONYMS[name]
        if syn is not None:
            synonyms = _config_synonyms(broker, syn, broker_config_synonyms(syn), False)
        else:
            synonyms = [ConfigSynonym(name, key.default_str, int(ConfigSource.DEFAULT_CONFIG))]
        if overridden:
            synonyms.insert(0, ConfigSynonym(name, text, int(ConfigSource.GROUP_CONFIG)))
        source = synonyms[0].source if synonyms else int(ConfigSource.DEFAULT_CONFIG)
        out.append(ConfigEntry(name, text, source, False, False, int(key.type),
                               key.doc if include_documentation else None,
                               synonyms if include_synonyms else []))
    return out


def apply_incremental(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]], *,
                      resource: str = "topic", remote_storage_system_enabled: bool = False) -> dict[str, str]:
    """IncrementalAlterConfigs (KIP-339) on a set of overrides; returns the new overrides.

    ``ops`` are ``(name, op, value)`` with op 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT. APPEND and
    SUBTRACT work on LIST configs only (else ``Can't APPEND to key x because its type is not
    LIST.``, INVALID_CONFIG); they start from the current override or, if none, the config's
    *default* (as Kafka's controller does), add missing / remove present comma-separated items.
    For ``resource="topic"`` the result is validated and normalised with
    :func:`validate_topic_configs`, and an unknown name is INVALID_CONFIG (``Unknown topic config
    name: x``) except for DELETE, which Kafka 4.3 accepts (so an override of a config Kafka 4.0
    removed, ``message.timestamp.difference.max.ms``, can be cleared); for ``"broker"`` names are checked and the caller validates
    the values with ``BrokerConfig.validate_dynamic_update``; for ``"group"`` the caller validates
    the result with :func:`kcompat.config.group.validate_group_configs` (no group config is a
    LIST, so APPEND and SUBTRACT always fail, as in Kafka 4.3); for ``"client_metrics"`` (KIP-714)
    the caller validates with :func:`kcompat.config.client_metrics.validate_client_metrics_configs`,
    and APPEND and SUBTRACT fail too, even on the LIST configs ``metrics`` and ``match``: Kafka
    4.3.1's controller knows only broker and topic config types (``KafkaRaftServer.configSchema``).
    A key given twice, a null value for any operation but DELETE (``Null value not supported for :
    a, b``), or an unknown operation, is INVALID_REQUEST.
    """
    if resource not in ("topic", "broker", "group", "client_metrics"):
        raise ValueError(f"resource must be 'topic', 'broker', 'group' or 'client_metrics', not {resource!r}")
    ops = list(ops)
    nulls = [name for name, op, value in ops if op != OP_DELETE and value is None]
    if nulls:   # ConfigAdminManager.preprocess, before anything else, for every resource type
        raise ConfigError(nulls[0], "Null value not supported for : " + ", ".join(nulls), error="INVALID_REQUEST")
    result = dict(current)
    seen: set[str] = set()
    for name, op, value in ops:
        if name in seen:
            raise ConfigError(name, f"Error due to duplicate config keys: {name}", error="INVALID_REQUEST")
        seen.add(name)
        if resource == "topic":
            key = TOPIC_CONFIGS.get(name)
            if key is None and op != OP_DELETE:   # deleting one is fine, as in Kafka 4.3
                raise ConfigError(name, f"Unknown topic config name: {name}")
        elif resource == "group":
            key = GROUP_CONFIGS.get(name)
        elif resource == "client_metrics":
            key = None
        else:
            key = BROKER_CONFIGS.get(_listener_base(name))
        if op == OP_SET:
            result[name] = value
        elif op == OP_DELETE:
            result.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if key is None or key.type is not ConfigType.LIST:
                raise ConfigError(name, f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.")
            cur = result.get(name)
            if cur is None:
                cur = key.default_str
            parts = [p.strip() for p in (cur or "").split(",") if p.strip()]
            for item in (p.strip() for p in (value or "").split(",")):
                if not item:
                    continue
                if op == OP_APPEND and item not in parts:
                    parts.append(item)
                elif op == OP_SUBTRACT and item in parts:
                    parts.remove(item)
            result[name] = ",".join(parts)
        else:
            raise ConfigError(name, f"Unknown alter config operation type {op} for {name}", error="INVALID_REQUEST")
    if resource == "topic":
        return validate_topic_configs(result, remote_storage_system_enabled=remote_storage_system_enabled)
    return result
