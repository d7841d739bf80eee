"""Parsing of the address-valued broker configs.

* ``listeners`` / ``advertised.listeners``: ``NAME://host:port,...`` (Kafka ``SocketServerConfigs``
  ``listenerListToEndPoints``; host may be empty, an IPv6 literal in brackets, or ``0.0.0.0``).
* ``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` (``KafkaConfig``
  ``effectiveListenerSecurityProtocolMap``).
* ``controller.quorum.voters``: ``{id}@{host}:{port},...`` (``QuorumConfig.parseVoterConnections``,
  KIP-595).
* ``controller.quorum.bootstrap.servers``: ``{host}:{port},...`` (KIP-853, Kafka 3.8+).

Errors are :class:`~kcompat.config.errors.ConfigError` naming the config key.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .errors import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Kafka: ^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)
_LISTENER_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$", re.ASCII)
# Kafka Utils.HOST_PORT_PATTERN: ^(?:[a-zA-Z0-9-]+://)?\[?([0-9a-zA-Z\-._%:]+)\]?:([0-9]+)$
_HOST_PORT_RE = re.compile(r"^(?:[a-zA-Z0-9-]+://)?\[?([0-9a-zA-Z\-._%:]+)\]?:([0-9]+)$", re.ASCII)
_CSV_RE = re.compile(r"\s*,\s*")


class Listener(NamedTuple):
    """One endpoint of ``listeners`` / ``advertised.listeners``.

    ``name`` is upper-cased as Kafka's ``ListenerName.normalised`` does; ``host`` is ``""`` when the
    config left it empty (bind to all interfaces); ``port`` 0 asks the OS for a free port.
    """

    name: str
    host: str
    port: int


class Voter(NamedTuple):
    """One entry of ``controller.quorum.voters``: node id and controller address."""

    node_id: int
    host: str
    port: int


def csv_list(value: str | None) -> list[str]:
    """Kafka ``Csv.parseCsvList``: split on commas, drop surrounding whitespace and empty items."""
    if value is None:
        return []
    value = value.strip()
    if not value:
        return []
    return [item for item in _CSV_RE.split(value) if item]


def parse_listeners(key: str, value: str | None, *, require_distinct_ports: bool = True) -> list[Listener]:
    """Parse a listener list; raise :class:`ConfigError` on bad syntax or duplicates.

    Listener names must be unique; ports must be unique (except 0, and except one IPv4 plus one
    IPv6 listener sharing a port, KIP-797) when ``require_distinct_ports`` (``listeners``; not
    ``advertised.listeners``).
    """
    out: list[Listener] = []
    for item in csv_list(value):
        m = _LISTENER_RE.match(item)
        if not m:
            raise ConfigError(key, f"Unable to parse {item} to a broker endpoint (config {key})")
        name, host, port_s = m.group(1), m.group(2), m.group(3)
        if not name:
            raise ConfigError(key, f"Unable to parse {item} to a broker endpoint (config {key}): empty listener name")
        port = int(port_s)
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"Invalid port {port} in {key}: {item}")
        out.append(Listener(name.upper(), host, port))
    names = [ep.name for ep in out]
    if len(set(names)) != len(names):
        raise ConfigError(key, f"Each listener must have a different name, {key}: {value}")
    if require_distinct_ports:
        by_port: dict[int, list[Listener]] = {}
        for ep in out:
            if ep.port != 0:
                by_port.setdefault(ep.port, []).append(ep)
        for port, eps in by_port.items():
            if len(eps) == 1:
                continue
            families = sorted(_family(ep.host) for ep in eps)
            if len(eps) == 2 and families == ["ipv4", "ipv6"]:
                continue
            raise ConfigError(key, f"Each listener must have a different port unless exactly one listener has "
                                   f"an IPv4 address and the other IPv6 address, {key}: {value}")
    return out


def _family(host: str) -> str:
    if re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", host):
        return "ipv4"
    if ":" in host:
        return "ipv6"
    return "other"


def parse_protocol_map(key: str, value: str | None) -> dict[str, str]:
    """Parse ``listener.security.protocol.map`` into {LISTENER_NAME: PROTOCOL} (upper-case)."""
    out: dict[str, str] = {}
    for item in csv_list(value):
        idx = item.rfind(":")
        if idx < 0:
            raise ConfigError(key, f"Error parsing configuration property '{key}': entry {item!r} is not NAME:PROTOCOL")
        name, proto = item[:idx].strip().upper(), item[idx + 1:].strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(key, f"Invalid security protocol `{item[idx + 1:].strip()}` defined in {key}")
        if name in out:
            raise ConfigError(key, f"Duplicate listener name {name} in {key}")
        out[name] = proto
    return out


def parse_host_port(key: str, entry: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` allowed), as Kafka's ``Utils.getHost`` / ``getPort``."""
    m = _HOST_PORT_RE.match(entry)
    if not m:
        raise ConfigError(key, f"Failed to parse host name from entry {entry} for the configuration {key}. "
                               "Each entry should be in the form `{host}:{port}`.")
    port = int(m.group(2))
    if port > 65535:
        raise ConfigError(key, f"Invalid port {port} in entry {entry} for the configuration {key}")
    return m.group(1), port


def parse_voters(key: str, value: list[str] | str | None) -> list[Voter]:
    """Parse ``controller.quorum.voters`` (``1@host:9093,2@host2:9093``)."""
    items = csv_list(value) if isinstance(value, str) or value is None else [v for v in value if v]
    out: list[Voter] = []
    seen: set[int] = set()
    for entry in items:
        parts = entry.split("@")
        if len(parts) != 2:
            raise ConfigError(key, f"Invalid configuration value for {key}. Each entry should be in the form "
                                   "`{id}@{host}:{port}`.")
        try:
            node_id = int(parts[0])
        except ValueError:
            raise ConfigError(key, f"Failed to parse node id in {key}: {entry}") from None
        host, port = parse_host_port(key, parts[1])
        if node_id in seen:
            raise ConfigError(key, f"Duplicate voter id {node_id} in {key}")
        seen.add(node_id)
        out.append(Voter(node_id, host, port))
    return out


def parse_bootstrap_servers(key: str, value: list[str] | str | None) -> list[tuple[str, int]]:
    """Parse ``controller.quorum.bootstrap.servers`` (``host:9093,host2:9093``)."""
    items = csv_list(value) if isinstance(value, str) or value is None else [v for v in value if v]
    return [parse_host_port(key, entry) for entry in items]
