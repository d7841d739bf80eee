"""kcompat in a container: configuration from the environment as the apache/kafka image takes it,
and a health check that speaks the Kafka protocol.

``kcompat container`` (the image's entry point):

- every ``KAFKA_*`` environment variable is a broker property: the prefix stripped, lower-cased,
  ``___`` -> ``_``, ``__`` -> ``-``, ``_`` -> ``.`` (``KAFKA_LISTENER_SECURITY_PROTOCOL_MAP`` ->
  ``listener.security.protocol.map``), except the JVM and log4j variables of Kafka's scripts
  (:data:`NOT_PROPERTIES`), which are accepted and ignored. ``CLUSTER_ID`` formats new log dirs.
- with no ``KAFKA_*`` variable the node is apache/kafka's default: one broker+controller listening
  on 9092 (all interfaces, advertised as ``localhost:9092``) with its controller on 9093, internal
  topics at replication factor 1. With variables, they are the configuration (Kafka's defaults for
  the rest), as in apache/kafka; like its ``configure`` script, ``KAFKA_PROCESS_ROLES`` requires
  ``CLUSTER_ID``, and ``listeners`` defaults to ``advertised.listeners`` with every host 0.0.0.0.
- data lives in :data:`DATA_DIR` (the image's volume) unless ``KAFKA_LOG_DIRS``/``KAFKA_LOG_DIR``
  says otherwise.
- a malformed or unknown variable, or a bad value, stops the start with exit status 2 and a
  message naming the variable, before anything is written.

``kcompat healthcheck``: an ApiVersions round trip to the node's first client listener (exit 0), or
exit 1 with the reason - proof that the broker answers the protocol, not only that a port is open.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping

from kcompat.config import BrokerConfig, ConfigError

DATA_DIR = "/var/lib/kcompat/data"
# the variables of Kafka's start scripts and images that are not broker properties
NOT_PROPERTIES = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPT", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS",
    "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_DEBUG",
    "KAFKA_HOME",
})
# apache/kafka's default single node (its docker server.properties, one client listener on 9092)
DEFAULTS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
    "advertised.listeners": "PLAINTEXT://localhost:9092",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@localhost:9093",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}
HTTP_LISTENERS = "HTTP://0.0.0.0:8090"   # kcompat's HTTP listener (not in apache/kafka): EXPOSE 8090
_NAME = re.compile(r"^[A-Za-z0-9]+(?:_{1,3}[A-Za-z0-9]+)*$")
_HOST = re.compile(r"://[^:/]*:")


class ContainerConfigError(ValueError):
    """The environment cannot configure a node; the message names the variable."""


def property_name(variable: str) -> str:
    """The broker property of ``KAFKA_<NAME>``: lower case, ``___`` -> ``_``, ``__`` -> ``-``,
    ``_`` -> ``.``. Raises ContainerConfigError for a name that maps to no property (empty, a
    leading, trailing or fourfold underscore, characters other than letters, digits and ``_``)."""
    name = variable[len("KAFKA_"):]
    if not _NAME.match(name):
        raise ContainerConfigError(f"environment variable {variable}: not a property name "
                                   f"(KAFKA_ then words of letters and digits joined by _, __ or ___)")
    return name.replace("___", "\0").replace("__", "-").replace("_", ".").replace("\0", "_").lower()


def properties_from_env(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(properties, property -> variable) of the ``KAFKA_*`` variables of ``environ``."""
    props: dict[str, str] = {}
    source: dict[str, str] = {}
    for variable in sorted(environ):
        if not variable.startswith("KAFKA_") or variable in NOT_PROPERTIES:
            continue
        name = property_name(variable)
        if name in source:
            raise ContainerConfigError(f"environment variables {source[name]} and {variable} both set {name}")
        props[name] = environ[variable]
        source[name] = variable
    return props, source


def node_properties(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], str | None]:
    """(properties, property -> variable, cluster id) of a container node; see the module doc.
    Raises ContainerConfigError."""
    props, source = properties_from_env(environ)
    cluster_id = environ.get("CLUSTER_ID") or None
    if not props:
        props = dict(DEFAULTS)
    else:
        if "process.roles" in props and cluster_id is None:
            raise ContainerConfigError("environment variable CLUSTER_ID is not set (KAFKA_PROCESS_ROLES "
                                       "is: every node of the cluster must be formatted with the same id)")
        if "listeners" not in props and "advertised.listeners" in props \
                and props.get("process.roles", "broker") != "controller":
            props["listeners"] = _HOST.sub("://0.0.0.0:", props["advertised.listeners"])
            source["listeners"] = "KAFKA_ADVERTISED_LISTENERS"
    if "log.dirs" not in props and "log.dir" not in props:
        props["log.dirs"] = DATA_DIR
    if "http.listeners" not in props:
        props["http.listeners"] = HTTP_LISTENERS   # metrics and console on the documented port
    return props, source, cluster_id


def load_config(environ: Mapping[str, str]) -> tuple[BrokerConfig, str | None]:
    """The validated BrokerConfig and cluster id of the environment. Raises ContainerConfigError
    naming the variable of a bad value (or the property, for one the variables did not set)."""
    props, source, cluster_id = node_properties(environ)
    try:
        config = BrokerConfig.load(None, [f"{k}={v}" for k, v in props.items()])
    except ConfigError as e:
        variable = source.get(e.key or "")
        where = f"environment variable {variable}" if variable else "configuration"
        raise ContainerConfigError(f"{where}: {e}") from None
    return config, cluster_id


def client_address(config: BrokerConfig) -> tuple[str, int]:
    """(host, port) of the node's first client (non-controller) listener; a wildcard host is
    reached on 127.0.0.1. Raises ContainerConfigError if it has none (a controller-only node:
    its controller listener is checked instead)."""
    controllers = set(config.controller_listener_names)
    listeners = list(config.listeners)
    chosen = next((lst for lst in listeners if lst[0] not in controllers), listeners[0] if listeners else None)
    if chosen is None:
        raise ContainerConfigError("no listener configured")
    _name, host, port = chosen
    return (host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"), port


async def api_versions_ok(host: str, port: int, timeout_s: float, ssl_context=None) -> str | None:
    """None if ``host:port`` answers ApiVersions v3 without error within ``timeout_s``; else why not.
    ``ssl_context``: TLS for an SSL/SASL_SSL listener (kcompat.security.ssl_context)."""
    from kcompat.broker.node_client import NodeConnection
    from kcompat.protocol.messages.api_versions import ApiVersionsRequest

    conn = NodeConnection(host, port, "kcompat-healthcheck", ssl_context=ssl_context)
    try:
        await conn.connect(timeout_s)
        resp = await conn.send(ApiVersionsRequest(client_software_name="kcompat-healthcheck",
                                                  client_software_version="1"), 3, timeout_s)
    except (OSError, asyncio.TimeoutError) as e:
        return f"{host}:{port}: {e or type(e).__name__}"
    finally:
        conn.close()
    return None if resp.error_code == 0 else f"{host}:{port}: ApiVersions error code {resp.error_code}"


def _listener_ssl(config: BrokerConfig, port: int):
    """The node's own client TLS context for its listener on ``port`` (its key store answers a
    ``ssl.client.auth=required`` listener), without the host name check: the health check reaches
    the node on 127.0.0.1, which its certificate need not name. None for a plaintext listener."""
    from kcompat.security.ssl_context import client_context

    name = next((lst[0] for lst in config.listeners if lst[2] == port), None)
    ctx = client_context(config, name) if name is not None else None
    if ctx is not None:
        ctx.check_hostname = False
    return ctx


def healthcheck(environ: Mapping[str, str], bootstrap: str | None, timeout_s: float) -> tuple[int, str]:
    """(exit status, message) of one health check against ``bootstrap`` (``host:port``) or the
    node the environment configures."""
    ssl_context = None
    if bootstrap:
        host, _, port = bootstrap.rpartition(":")
        address = (host or "127.0.0.1", int(port))
    else:
        config = load_config(environ)[0]
        address = client_address(config)
        ssl_context = _listener_ssl(config, address[1])
    problem = asyncio.run(api_versions_ok(*address, timeout_s, ssl_context))
    if problem is None:
        return 0, f"ok: {address[0]}:{address[1]} answers ApiVersions"
    return 1, f"unhealthy: {problem}"
