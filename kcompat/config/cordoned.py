"""``cordoned.log.dirs`` (KIP-1066, Kafka 4.3): log dirs of this broker that take no new replicas.

A LIST, default empty, dynamic per broker (``DynamicBrokerConfig.PER_BROKER_CONFIGS``; Kafka's
``DynamicLogConfig`` reconfigures it). Its entries are entries of ``log.dirs`` (else ``log.dir``),
compared as strings, or the single value ``*``: every log dir (``AbstractKafkaConfig.
cordonedLogDirs``). Checked as Kafka's ``KafkaConfig.validateCordonedLogDirs`` (``require``, so
the message starts with "requirement failed: "; a dynamic update failing it is INVALID_REQUEST,
as ``ConfigAdminManager.validateBrokerConfigChange`` turns non-API exceptions into): by the broker
the change names, before it forwards the change to the controller, which cannot see its paths.
(Kafka's controller, asked directly with ``--bootstrap-controller``, only lets entries be removed,
``ConfigurationControlManager.isCordonedLogDirsInvalid``; kcompat cannot tell a direct request from
a forwarded one and does not make that check.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .endpoints import csv_list
from .errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from .broker import BrokerConfig

CORDONED_LOG_DIRS = "cordoned.log.dirs"
ALL = "*"   # ServerLogConfigs.CORDONED_LOG_DIRS_ALL


def configured_log_dirs(cfg: BrokerConfig) -> list[str]:
    """``log.dirs`` if set, else ``log.dir``: the entries as written (Kafka ``logDirs()``)."""
    value = cfg.get("log.dirs")
    return csv_list(cfg.get("log.dir") if value is None else value)


def cordoned_entries(cfg: BrokerConfig) -> list[str]:
    """The cordoned log dirs as configured, ``*`` expanded to every log dir (Kafka's
    ``AbstractKafkaConfig.cordonedLogDirs``)."""
    entries = cfg.get(CORDONED_LOG_DIRS) or []
    return configured_log_dirs(cfg) if ALL in entries else list(dict.fromkeys(entries))


def check_cordoned(log_dirs: list[str], entries: list[str], *, error: str = "INVALID_CONFIG") -> None:
    """``KafkaConfig.validateCordonedLogDirs``: ``*`` alone, or entries of ``log_dirs``.
    Raises :class:`ConfigError` (``error`` names the protocol error for a request)."""
    if ALL in entries:
        if len(set(entries)) != 1:
            raise ConfigError(CORDONED_LOG_DIRS, f"requirement failed: When {CORDONED_LOG_DIRS} is set to {ALL}, "
                                                 f"it must not contain other values", error=error)
        return
    missing = [e for e in dict.fromkeys(entries) if e not in log_dirs]
    if missing:
        raise ConfigError(CORDONED_LOG_DIRS, f"requirement failed: All entries in {CORDONED_LOG_DIRS} must be present "
                                             f"in log.dirs or log.dir. Missing entries : {', '.join(missing)}",
                          error=error)


def check_cordoned_update(cfg: BrokerConfig, value: str | None) -> None:
    """A dynamic update of this broker's ``cordoned.log.dirs`` to ``value`` (None: deleted),
    checked against its log dirs as Kafka's broker does before forwarding the change to the
    controller (``ConfigAdminManager.preprocess``). Raises :class:`ConfigError` (INVALID_REQUEST)."""
    if value is not None and value.strip():
        check_cordoned(configured_log_dirs(cfg), csv_list(value), error="INVALID_REQUEST")
