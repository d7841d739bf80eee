"""``BrokerConfig``: the broker's configuration, loaded like ``kafka-server-start.sh``.

``BrokerConfig.load(path, overrides)`` reads a ``server.properties`` file (Java properties syntax),
applies ``--override key=value`` strings on top, and validates every value (types, ranges, listener
syntax) plus Kafka's cross-config rules (``KafkaConfig.validateValues``). Unknown keys are an error
(Kafka only warns; kcompat refuses so typos do not go unnoticed), except the pass-through prefixes
Kafka forwards to plugins (``listener.name.<listener>.<config>`` and the like).

Effective value of a config, highest priority first (KIP-226, ``DynamicBrokerConfig``):
dynamic per-broker > dynamic cluster-wide default > static (file / overrides) > default.
Synonym groups resolve over the merged values: ``log.retention.ms`` > ``log.retention.minutes`` >
``log.retention.hours`` (likewise ``log.roll.*``, ``log.roll.jitter.*``, ``log.flush.interval.ms``
> ``log.flush.scheduler.interval.ms``), and ``node.id`` / ``broker.id`` are one value.
"""

from __future__ import annotations

import functools
import logging
import socket
from pathlib import Path
from typing import Any, Iterable, Mapping

from kcompat.coordinator.java_strings import hash_set_copy_table_size, java_hash_order
from .definitions import (BROKER_CONFIGS, DYNAMIC_CONFIGS, LISTENER_ONLY_DYNAMIC_CONFIGS, PER_BROKER_CONFIGS,
                          config_key, is_accepted_key)
from .endpoints import Listener, Voter, csv_list, parse_bootstrap_servers, parse_listeners, parse_protocol_map, parse_voters
from .errors import ConfigError
from .remote_defs import TIERED_PREFIXES
from .properties import load_properties, parse_override
from .sasl_defs import MECHANISM_PREFIXES
from .validation import validate_broker
from .types import ConfigSource

# the HTTP listener of the zero-config node (kcompat.broker.http; documented port 8090)
ZERO_CONFIG_HTTP_LISTENERS = "HTTP://127.0.0.1:8090"

log = logging.getLogger("kcompat.config")

_CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
_SNAKE = {name.replace(".", "_"): name for name in BROKER_CONFIGS}


@functools.lru_cache(maxsize=1)
def _canonical_hostname() -> str:
    """What Kafka advertises for a listener with an empty host (``getCanonicalHostName``)."""
    return socket.getfqdn()


def _java_set(names: Iterable[str]) -> str:
    """``String.valueOf`` of the ``java.util.HashSet`` Kafka 4.3.1's ``DynamicBrokerConfig``
    names the refused keys with: ``[a, b]`` in HashSet iteration order (a copy of the update's
    keys, the refused ones retained)."""
    names = list(names)
    return "[" + ", ".join(java_hash_order(names, hash_set_copy_table_size(len(names)))) + "]"


class BrokerConfig:
    """Typed, validated broker configuration with KIP-226 dynamic layers.

    Attributes:
        dynamic_per_broker: raw values set with AlterConfigs on resource ``BROKER <node id>``.
        dynamic_cluster_default: raw values set on resource ``BROKER ""`` (all brokers).
        source: the file the static values came from, if any.
    """

    def __init__(self, static: Mapping[str, str] | None = None, *, source: str | None = None) -> None:
        props = {str(k): str(v) for k, v in (static or {}).items()}
        # KafkaConfig.populateSynonyms: node.id and broker.id stand for each other.
        if "broker.id" in props and "node.id" not in props:
            props["node.id"] = props["broker.id"]
        elif "node.id" in props and "broker.id" not in props:
            props["broker.id"] = props["node.id"]
        self._static: dict[str, str] = props
        self.source = source
        self.dynamic_per_broker: dict[str, str] = {}
        self.dynamic_cluster_default: dict[str, str] = {}
        self._cache: dict[tuple[str, str], Any] = {}
        self._warned = False
        for key in props:
            if not is_accepted_key(key):
                raise ConfigError(key, f"Unknown broker config '{key}': not a Kafka 4.3 broker config known to kcompat")
        for key, raw in props.items():
            if key in BROKER_CONFIGS:
                self._parse(key, raw)
        self.validate()

    # ------------------------------------------------------------------ construction
    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] | None = ()) -> "BrokerConfig":
        """Load ``path`` (``None`` = no file: kcompat's zero-config defaults) plus ``key=value``
        overrides, which beat the file. Raises :class:`ConfigError`. Logs one warning naming the
        keys that were set but that kcompat accepts without acting on them."""
        props: dict[str, str] = load_properties(path) if path is not None else {}
        if path is None and not overrides:
            # the zero-config node (``kcompat`` and nothing else) serves its console and metrics
            props["http.listeners"] = ZERO_CONFIG_HTTP_LISTENERS
        for arg in overrides or ():
            key, value = parse_override(arg)
            props.pop(key, None)
            props[key] = value
        cfg = cls(props, source=str(path) if path is not None else None)
        cfg.log_ignored_keys()
        return cfg

    # ------------------------------------------------------------------ raw and typed values
    def _parse(self, name: str, raw: str) -> Any:
        ck = (name, raw)
        if ck not in self._cache:
            self._cache[ck] = BROKER_CONFIGS[name].parse(raw)
        value = self._cache[ck]
        return list(value) if isinstance(value, list) else value

    def raw(self, name: str) -> str | None:
        """The effective raw string of ``name`` (dynamic > static), ``None`` if only defaulted."""
        for layer in (self.dynamic_per_broker, self.dynamic_cluster_default, self._static):
            if name in layer:
                return layer[name]
        return None

    def get(self, name: str) -> Any:
        """Typed effective value: bool, int, float, str, list[str], or ``None`` (Kafka null).

        ``KeyError`` for a name kcompat does not know; pass-through keys return their raw string.
        """
        key = config_key(name)
        if key is None:
            if is_accepted_key(name):
                return self.raw(name)
            raise KeyError(name)
        raw = self.raw(name)
        if raw is None:
            if name == "controller.quorum.voters":
                return self._default_voters()
            return key.typed_default()
        return self._parse(name, raw)

    def _default_voters(self) -> list[str]:
        """kcompat's computed default of ``controller.quorum.voters`` (Kafka's is empty).

        Empty when ``controller.quorum.bootstrap.servers`` is set or this node is not a
        controller; otherwise a one-voter quorum of this node at its controller listener
        (advertised address if any, else 127.0.0.1:9093): ``1@127.0.0.1:9093`` with no config.
        """
        if self.get("controller.quorum.bootstrap.servers") or "controller" not in self.get("process.roles"):
            return []
        host, port = "127.0.0.1", 9093
        ctrl = self.controller_listener_names
        if ctrl:
            eps = {ep.name: ep for ep in parse_listeners("listeners", self.get("listeners"))}
            adv = self.get("advertised.listeners")
            if adv is not None:
                eps.update({ep.name: ep for ep in parse_listeners("advertised.listeners", adv,
                                                                      require_distinct_ports=False)})
            ep = eps.get(ctrl[0])
            if ep is not None:
                host, port = ep.host or "127.0.0.1", ep.port
        if ":" in host:
            host = f"[{host}]"
        return [f"{self.get('node.id')}@{host}:{port}"]

    def default_str(self, name: str) -> str | None:
        """The DEFAULT_CONFIG value string of a config (as DescribeConfigs shows it)."""
        key = config_key(name)
        if key is None:
            return None
        if name == "controller.quorum.voters":
            return ",".join(self._default_voters())
        return key.default_str

    def __getattr__(self, attr: str) -> Any:
        """``cfg.num_partitions`` == ``cfg.get("num.partitions")`` for any known config name."""
        name = _SNAKE.get(attr)
        if name is None:
            raise AttributeError(attr)
        return self.get(name)

    def source_of(self, name: str) -> ConfigSource:
        """Where the effective value of exactly this key comes from."""
        if name in self.dynamic_per_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_cluster_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self._static:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    @property
    def static_props(self) -> dict[str, str]:
        """Raw static values (file + overrides, with node.id/broker.id filled in), a copy."""
        return dict(self._static)

    def is_static(self, name: str) -> bool:
        """True if ``name`` was set in the file or with ``--override``."""
        return name in self._static

    @property
    def defaulted_keys(self) -> list[str]:
        """Known configs whose value is the default (not set statically or dynamically)."""
        return sorted(k for k in BROKER_CONFIGS if self.raw(k) is None)

    def ignored_keys(self) -> list[str]:
        """Statically set keys kcompat accepts but does not act on."""
        out = []
        for k in self._static:
            base = _listener_base(k)   # listener.name.<l>.ssl.* acts as ssl.* does (kcompat.security.ssl_context)
            mech, _, rest = base.partition(".")   # listener.name.<l>.<mechanism>.sasl.* (kcompat.security.sasl_config)
            if mech in MECHANISM_PREFIXES and rest:
                base = rest
            prefixed = base.startswith(("ssl.", "sasl.", "connections.max.reauth.ms"))
            key = BROKER_CONFIGS.get(k) or (BROKER_CONFIGS.get(base) if prefixed else None)
            if key is None and k.startswith(TIERED_PREFIXES) and self.get("remote.log.storage.system.enable"):
                continue   # the remote storage backend's and metadata manager's own settings (KIP-405)
            if key is None or not key.implemented:
                out.append(k)
        return sorted(out)

    def log_ignored_keys(self, logger: logging.Logger | None = None) -> None:
        """Log, once per config object, the keys accepted for compatibility with no effect."""
        if self._warned:
            return
        self._warned = True
        keys = self.ignored_keys()
        if keys:
            (logger or log).warning("config keys accepted for Kafka compatibility have no effect in kcompat: %s",
                                    ", ".join(keys))

    # ------------------------------------------------------------------ derived values
    @property
    def node_id(self) -> int:
        return self.get("node.id")

    @property
    def process_roles(self) -> list[str]:
        return self.get("process.roles")

    @property
    def controller_listener_names(self) -> list[str]:
        return [n.upper() for n in csv_list(self.get("controller.listener.names"))]

    @property
    def listeners(self) -> list[Listener]:
        """(name, host, port) to bind; an empty host binds every interface, shown as 0.0.0.0."""
        return [Listener(ep.name, ep.host or "0.0.0.0", ep.port)
                for ep in parse_listeners("listeners", self.get("listeners"))]

    def _advertised_raw(self) -> list[Listener]:
        adv = self.get("advertised.listeners")
        if adv is None:
            return parse_listeners("listeners", self.get("listeners"))
        return parse_listeners("advertised.listeners", adv, require_distinct_ports=False)

    @property
    def advertised_listeners(self) -> list[Listener]:
        """Advertised endpoints (default: ``listeners``); an empty host becomes this host's FQDN."""
        return [Listener(ep.name, ep.host or _canonical_hostname(), ep.port) for ep in self._advertised_raw()]

    @property
    def advertised_broker_listeners(self) -> list[Listener]:
        """Advertised endpoints without the controller listeners: what Metadata responses show."""
        ctrl = set(self.controller_listener_names)
        return [ep for ep in self.advertised_listeners if ep.name not in ctrl]

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        """Effective NAME -> protocol map; KRaft controller listeners default to PLAINTEXT (3.9)."""
        m = parse_protocol_map("listener.security.protocol.map", self.get("listener.security.protocol.map"))
        if self.raw("listener.security.protocol.map") is None:
            ctrl = self.controller_listener_names
            names = ctrl + [ep.name for ep in parse_listeners("listeners", self.get("listeners"))]
            if not any(n in ("SSL", "SASL_SSL", "SASL_PLAINTEXT") for n in names):
                for c in ctrl:
                    m[c] = "PLAINTEXT"
        return m

    def security_protocol(self, listener_name: str) -> str:
        """Security protocol of a listener (``ConfigError`` if the map has none)."""
        proto = self.listener_security_protocol_map.get(listener_name.upper())
        if proto is None:
            raise ConfigError("listener.security.protocol.map",
                              f"No security protocol defined for listener {listener_name.upper()} "
                              "(listener.security.protocol.map)")
        return proto

    @property
    def inter_broker_listener_name(self) -> str:
        """``inter.broker.listener.name``, else the listener named after the inter-broker protocol."""
        name = self.get("inter.broker.listener.name")
        return (name or self.get("security.inter.broker.protocol")).upper()

    @property
    def controller_quorum_voters(self) -> list[Voter]:
        return parse_voters("controller.quorum.voters", self.get("controller.quorum.voters"))

    @property
    def controller_quorum_bootstrap_servers(self) -> list[tuple[str, int]]:
        return parse_bootstrap_servers("controller.quorum.bootstrap.servers", self.get("controller.quorum.bootstrap.servers"))

    @property
    def log_dirs(self) -> list[Path]:
        """``log.dirs`` if set, else ``log.dir`` (kcompat default ``kcompat-data``), as Paths."""
        value = self.get("log.dirs")
        if value is None:
            value = self.get("log.dir")
        return [Path(p) for p in csv_list(value)]

    @property
    def metadata_log_dir(self) -> Path:
        """``metadata.log.dir``, else the first log directory."""
        value = self.get("metadata.log.dir")
        return Path(value) if value else self.log_dirs[0]

    def _ms_or_hours(self, ms: str, hours: str, minutes: str | None = None) -> int:
        value = self.get(ms)
        if value is not None:
            return value
        if minutes is not None and self.get(minutes) is not None:
            return self.get(minutes) * 60_000
        return self.get(hours) * 3_600_000

    @property
    def log_retention_ms(self) -> int:
        """``log.retention.ms`` > ``.minutes`` > ``.hours``, in ms; any negative value -> -1 (no limit)."""
        value = self._ms_or_hours("log.retention.ms", "log.retention.hours", "log.retention.minutes")
        return -1 if value < 0 else value

    @property
    def log_roll_ms(self) -> int:
        """``log.roll.ms`` > ``log.roll.hours``, in ms."""
        return self._ms_or_hours("log.roll.ms", "log.roll.hours")

    @property
    def log_roll_jitter_ms(self) -> int:
        """``log.roll.jitter.ms`` > ``log.roll.jitter.hours``, in ms."""
        return self._ms_or_hours("log.roll.jitter.ms", "log.roll.jitter.hours")

    @property
    def log_flush_interval_ms(self) -> int:
        """``log.flush.interval.ms``, else ``log.flush.scheduler.interval.ms`` (ms)."""
        value = self.get("log.flush.interval.ms")
        return self.get("log.flush.scheduler.interval.ms") if value is None else value

    @property
    def offsets_retention_ms(self) -> int:
        """``offsets.retention.minutes`` in ms."""
        return self.get("offsets.retention.minutes") * 60_000

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Kafka's cross-config checks (``KafkaConfig.validateValues``) on the effective values;
        raises :class:`ConfigError`. See :mod:`kcompat.config.validation`."""
        validate_broker(self)

    # ------------------------------------------------------------------ dynamic configs (KIP-226)
    def validate_dynamic_update(self, updates: Mapping[str, str | None], *, per_broker: bool) -> dict[str, str | None]:
        """Check an AlterConfigs update of this broker (``per_broker``) or of the cluster default.

        ``None`` values mean delete. Mirrors Kafka 4.3.1's ``DynamicBrokerConfig.validateConfigs``:
        read-only keys -> ``Cannot update these configs dynamically: [...]``; SSL store configs
        without a listener prefix; type/range errors; per-broker keys on the cluster default ->
        ``Cannot update these configs at default cluster level, broker id must be specified: [...]``
        (the keys as Java prints its HashSet). Returns the updates unchanged. Raises
        :class:`ConfigError` (an AlterConfigs request answers it INVALID_REQUEST, see
        :func:`kcompat.broker.config_changes.replace_configs`).
        """
        unknown = [k for k in updates if not is_accepted_key(k)]
        if unknown:
            raise ConfigError(unknown[0], f"Unknown broker config '{unknown[0]}'")
        non_dynamic = [k for k in updates if k in BROKER_CONFIGS and k not in DYNAMIC_CONFIGS]
        if non_dynamic:
            raise ConfigError(sorted(non_dynamic)[0], "Cannot update these configs dynamically: " + _java_set(non_dynamic))
        no_prefix = [k for k in updates if k in LISTENER_ONLY_DYNAMIC_CONFIGS]
        if no_prefix:
            raise ConfigError(sorted(no_prefix)[0], "These security configs can be dynamically updated only per-listener "
                                                    "using the listener prefix: " + _java_set(no_prefix))
        for k, v in updates.items():
            base = _listener_base(k)
            if v is not None and base in BROKER_CONFIGS:
                BROKER_CONFIGS[base].parse(v)
        if not per_broker:
            pb = [k for k in updates if k in PER_BROKER_CONFIGS
                  or (_listener_base(k) != k and _listener_base(k) not in _CLUSTER_LEVEL_LISTENER_CONFIGS)]
            if pb:
                raise ConfigError(sorted(pb)[0], "Cannot update these configs at default cluster level, broker id must "
                                                 "be specified: " + _java_set(pb))
        return dict(updates)

    def alter_dynamic(self, updates: Mapping[str, str | None], *, per_broker: bool) -> None:
        """Validate and apply a dynamic update (``None`` deletes a key), then re-run the
        cross-config checks on the result; on any error nothing changes."""
        self.validate_dynamic_update(updates, per_broker=per_broker)
        layer = self.dynamic_per_broker if per_broker else self.dynamic_cluster_default
        before = dict(layer)
        for k, v in updates.items():
            if v is None:
                layer.pop(k, None)
            else:
                layer[k] = v
        try:
            self.validate()
        except ConfigError:
            layer.clear()
            layer.update(before)
            raise

    def set_dynamic(self, per_broker: Mapping[str, str] | None = None,
                    cluster_default: Mapping[str, str] | None = None) -> None:
        """Replace the dynamic layers wholesale (e.g. when replaying the metadata log)."""
        if per_broker is not None:
            self.dynamic_per_broker = dict(per_broker)
        if cluster_default is not None:
            self.dynamic_cluster_default = dict(cluster_default)


def _listener_base(name: str) -> str:
    """``listener.name.<l>.<config>`` -> ``<config>``; other names unchanged."""
    if name.startswith("listener.name."):
        rest = name[len("listener.name."):]
        if "." in rest:
            return rest.split(".", 1)[1]
    return name
