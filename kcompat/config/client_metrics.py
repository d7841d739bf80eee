"""Client metrics subscriptions (ConfigResource type CLIENT_METRICS = 16, KIP-714) as Kafka 4.3.1's
``org.apache.kafka.server.metrics.ClientMetricsConfigs`` defines and validates them.

A subscription is a named set of dynamic configs, stored as ``ConfigRecord(resource_type=16,
resource_name=<subscription name>)`` in the metadata log like group configs, set with
IncrementalAlterConfigs / AlterConfigs (``kafka-client-metrics.sh --alter --name N --metrics m1,m2
--interval 1000 --match client_id=app.*``) and listed by ListConfigResources; a subscription
whose configs are all deleted no longer exists. The three configs:

- ``metrics`` (LIST, default empty): metric name prefixes the matching clients push; ``*`` = all.
- ``interval.ms`` (INT, default 300000 ms): push interval, 100 to 3600000 ms.
- ``match`` (LIST, default empty = every client): ``selector=regex`` items, selectors
  ``client_instance_id``, ``client_id``, ``client_software_name``, ``client_software_version``,
  ``client_source_address``, ``client_source_port``.

kcompat stores and shows subscriptions but pushes nothing: telemetry itself (GetTelemetrySubscriptions
and PushTelemetry, keys 71/72) is not advertised, as in Kafka without a ClientTelemetry plugin.
Values are stored as sent (as Kafka's ConfigRecords) and shown as Kafka's ``ConfigDef`` formats the
parsed value (a list joined by ``,`` without the spaces around items or repeated items).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from .describe import ConfigEntry, ConfigSynonym
from .errors import ConfigError
from .keydef import INT, LIST, RO, ConfigKey, define
from .types import ConfigSource, Custom, format_value, java_trim, parse_value

RESOURCE_CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                   "client_source_address", "client_source_port")


def _no_empty_item(name: str, values: list[str]) -> None:
    """``ConfigDef.ValidList.anyNonDuplicateValues(true, false)`` on a list :func:`parse_config`
    has already de-duplicated: the empty list is allowed, an empty item is not."""
    if any(v == "" for v in values):
        raise ConfigError(name, f"Configuration '{name}' values must not be empty.")


_VALID_LIST = Custom(_no_empty_item, "")

# ClientMetricsConfigs.CONFIG, in definition order (the order ConfigDef.parse checks them).
CLIENT_METRICS_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in (
    define("metrics", LIST, (), _VALID_LIST, RO, False, "Telemetry metric name prefix list"),
    define("interval.ms", INT, 300_000, None, RO, False, "Metrics push interval in milliseconds"),
    define("match", LIST, (), _VALID_LIST, RO, False, "Client match criteria"),
)}


def parse_config(name: str, raw: str) -> Any:
    """The typed value of client metrics config ``name`` (``ConfigDef.parseValue``): lists lose
    repeated items first (Kafka 4.3 drops the duplicates of a ValidList config with a warning:
    ``a,a`` is ``a``), then the validator runs. Raises :class:`ConfigError` (INVALID_CONFIG)."""
    key = CLIENT_METRICS_CONFIGS[name]
    value = parse_value(name, key.type, raw)
    if key.type is LIST:
        value = list(dict.fromkeys(value))
    if key.validator is not None:
        key.validator(name, value)
    return value


def _java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split(sep)`` for a literal one-char separator: trailing empty parts dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_match(patterns: Iterable[str]) -> dict[str, re.Pattern]:
    """``ClientMetricsConfigs.parseMatchingPatterns``: ``["client_id=app.*", ...]`` ->
    ``{"client_id": compiled regex}``. Each item splits at ``=`` into exactly two parts, the
    selector (trimmed) one of :data:`MATCH_SELECTORS`, the value (trimmed) a regular expression;
    else ConfigError(INVALID_CONFIG) ``Illegal client matching pattern: <item>``."""
    out: dict[str, re.Pattern] = {}
    for pattern in patterns:
        pair = _java_split(pattern, "=")
        if len(pair) != 2 or java_trim(pair[0]) not in MATCH_SELECTORS:
            raise ConfigError("match", f"Illegal client matching pattern: {pattern}")
        try:
            out[java_trim(pair[0])] = re.compile(java_trim(pair[1]))
        except re.error:
            raise ConfigError("match", f"Illegal client matching pattern: {pattern}") from None
    return out


def validate_client_metrics_configs(name: str, configs: Mapping[str, str | None]) -> None:
    """Validate a subscription's complete set of configs (what it would have after the change),
    as Kafka's ``ControllerConfigurationValidator`` and ``ClientMetricsConfigs.validate`` do, in
    their order. Raises :class:`ConfigError` with Kafka's message and error code:

    - a null value: INVALID_CONFIG ``Null value not supported for client metrics configs: x``;
    - the empty name: INVALID_REQUEST ``Subscription name can't be empty``;
    - an unknown name: INVALID_REQUEST ``Unknown client metrics configuration: x``;
    - a value that does not parse (``Invalid value x for configuration interval.ms: Not a number
      of type INT``) or an empty list item: INVALID_CONFIG (a repeated item is dropped, not refused);
    - ``interval.ms`` out of range: INVALID_REQUEST ``Invalid value 50 for interval.ms, interval
      must be between 100 and 3600000 (1 hour)``;
    - a bad ``match`` item: INVALID_CONFIG (:func:`parse_match`).
    """
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise ConfigError(nulls[0], "Null value not supported for client metrics configs: " + ",".join(nulls))
    if not name:
        raise ConfigError(None, "Subscription name can't be empty", error="INVALID_REQUEST")
    for key in configs:
        if key not in CLIENT_METRICS_CONFIGS:
            raise ConfigError(key, f"Unknown client metrics configuration: {key}", error="INVALID_REQUEST")
    parsed = {key: parse_config(key, configs[key]) for key in CLIENT_METRICS_CONFIGS if key in configs}
    interval = parsed.get("interval.ms")
    if interval is not None and not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise ConfigError("interval.ms", f"Invalid value {interval} for interval.ms, interval must be between "
                          f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)", error="INVALID_REQUEST")
    if "match" in parsed:
        parse_match(parsed["match"])


def describe_client_metrics(configs: Mapping[str, str], *, include_synonyms: bool = False,
                            keys: Iterable[str] | None = None, include_documentation: bool = True) -> list[ConfigEntry]:
    """DescribeConfigs for a CLIENT_METRICS resource with the subscription's stored ``configs``
    (empty for a name that has none: Kafka describes it with the defaults).

    Kafka 4.3.1's ``ConfigHelper.createClientMetricsConfigEntry``: the three configs (or only
    ``keys``; an empty ``keys`` means all) sorted by name, never read-only nor sensitive; a set
    config has source CLIENT_METRICS_CONFIG (7) and itself as its only synonym, an unset one its
    default with source DEFAULT_CONFIG (5) and no synonyms.
    """
    wanted = set(keys) if keys else None
    out: list[ConfigEntry] = []
    for name in sorted(CLIENT_METRICS_CONFIGS):
        if wanted is not None and name not in wanted:
            continue
        key = CLIENT_METRICS_CONFIGS[name]
        stored = configs.get(name)
        text = key.default_str if stored is None else format_value(key.type, parse_config(name, stored))
        synonyms = [] if stored is None else [ConfigSynonym(name, text, int(ConfigSource.CLIENT_METRICS_CONFIG))]
        source = synonyms[0].source if synonyms else int(ConfigSource.DEFAULT_CONFIG)
        out.append(ConfigEntry(name, text, source, False, False, int(key.type),
                               key.doc if include_documentation else None, synonyms if include_synonyms else []))
    return out
