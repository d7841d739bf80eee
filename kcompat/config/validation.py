"""Cross-config validation of a broker configuration (Kafka ``KafkaConfig.validateValues``).

Each rule raises :class:`ConfigError` naming the config at fault, with Kafka's wording where
Kafka has one. kcompat-specific leniency: with ``process.roles=broker,controller`` and no
``controller.listener.names`` the controller runs in-process without a listener of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .cordoned import CORDONED_LOG_DIRS, check_cordoned, configured_log_dirs
from .endpoints import parse_listeners
from .errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from .broker import BrokerConfig


def validate_broker(cfg: "BrokerConfig") -> None:
    """Kafka's cross-config checks (``KafkaConfig.validateValues``) on the effective values."""
    if cfg.raw("broker.id") is not None and cfg.get("broker.id") != cfg.get("node.id"):
        raise ConfigError("node.id", "You must set `node.id` to the same value as `broker.id`.")
    roles = cfg.process_roles
    if not roles:
        raise ConfigError("process.roles", "process.roles must be broker, controller or broker,controller: "
                                           "kcompat runs in KRaft mode only")
    if len(set(roles)) != len(roles):
        raise ConfigError("process.roles", f"Duplicate role names found in `process.roles`: {','.join(roles)}")
    if cfg.node_id < 0:
        raise ConfigError("node.id", "Missing configuration `node.id` which is required when process.roles is defined")
    voters = cfg.controller_quorum_voters
    if not voters and not cfg.controller_quorum_bootstrap_servers:
        raise ConfigError("controller.quorum.voters",
                          "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of "
                          "bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers.")
    if "controller" in roles and voters and cfg.node_id not in {v.node_id for v in voters}:
        raise ConfigError("controller.quorum.voters",
                          f"If process.roles contains the 'controller' role, the node id {cfg.node_id} must be included "
                          f"in the set of voters controller.quorum.voters={sorted(v.node_id for v in voters)}")
    _validate_listeners(cfg, roles)
    if cfg.get("replica.fetch.wait.max.ms") > cfg.get("replica.socket.timeout.ms"):
        raise ConfigError("replica.socket.timeout.ms", "replica.socket.timeout.ms should always be at least "
                                                       "replica.fetch.wait.max.ms to prevent unnecessary socket timeouts")
    if cfg.get("replica.fetch.wait.max.ms") > cfg.get("replica.lag.time.max.ms"):
        raise ConfigError("replica.fetch.wait.max.ms", "replica.fetch.wait.max.ms should always be less than or equal "
                                                       "to replica.lag.time.max.ms to prevent frequent changes in ISR")
    threads = cfg.get("log.cleaner.threads")
    if cfg.get("log.cleaner.enable") and threads > 0 and cfg.get("log.cleaner.dedupe.buffer.size") // threads <= 1024 * 1024:
        raise ConfigError("log.cleaner.dedupe.buffer.size", "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
    if cfg.log_roll_ms < 1:
        raise ConfigError("log.roll.ms", "log.roll.ms must be greater than or equal to 1")
    if cfg.log_roll_jitter_ms < 0:
        raise ConfigError("log.roll.jitter.ms", "log.roll.jitter.ms must be greater than or equal to 0")
    if not (cfg.log_retention_ms >= 1 or cfg.log_retention_ms == -1):
        raise ConfigError("log.retention.ms", "log.retention.ms must be unlimited (-1) or, greater than or equal to 1")
    if not cfg.log_dirs:
        raise ConfigError("log.dirs", "At least one log directory must be defined via log.dirs or log.dir.")
    if "broker" in roles:   # KafkaConfig.validateCordonedLogDirs (KIP-1066)
        check_cordoned(configured_log_dirs(cfg), cfg.get(CORDONED_LOG_DIRS) or [])
    _validate_group_bounds(cfg)


# GroupCoordinatorConfig's and ShareGroupConfig's checks (Kafka 4.3), in Kafka's order:
# (left, op, right); "must be greater than or equal to" / "less than or equal to" / "less than".
def _interval_rules(kind: str) -> list[tuple[str, str, str]]:
    hb, ses = f"group.{kind}.heartbeat.interval.ms", f"group.{kind}.session.timeout.ms"
    return [(f"group.{kind}.max.heartbeat.interval.ms", ">=", f"group.{kind}.min.heartbeat.interval.ms"),
            (hb, ">=", f"group.{kind}.min.heartbeat.interval.ms"),
            (hb, "<=", f"group.{kind}.max.heartbeat.interval.ms"),
            (f"group.{kind}.max.session.timeout.ms", ">=", f"group.{kind}.min.session.timeout.ms"),
            (ses, ">=", f"group.{kind}.min.session.timeout.ms"),
            (ses, "<=", f"group.{kind}.max.session.timeout.ms"),
            (hb, "<", ses)]


def _assignment_rules(kind: str) -> list[tuple[str, str, str]]:
    ai = f"group.{kind}.assignment.interval.ms"
    return [(f"group.{kind}.max.assignment.interval.ms", ">=", f"group.{kind}.min.assignment.interval.ms"),
            (ai, ">=", f"group.{kind}.min.assignment.interval.ms"),
            (ai, "<=", f"group.{kind}.max.assignment.interval.ms")]


GROUP_COORDINATOR_RULES = (
    _interval_rules("consumer") + _assignment_rules("consumer")
    + _interval_rules("share") + _assignment_rules("share")
    + _interval_rules("streams") + _assignment_rules("streams")
    + [("group.streams.num.standby.replicas", "<=", "group.streams.max.standby.replicas")]
)
SHARE_GROUP_RULES = (
    ("group.share.max.delivery.count.limit", ">=", "group.share.delivery.count.limit"),
    ("group.share.delivery.count.limit", ">=", "group.share.min.delivery.count.limit"),
    ("group.share.max.partition.max.record.locks", ">=", "group.share.partition.max.record.locks"),
    ("group.share.partition.max.record.locks", ">=", "group.share.min.partition.max.record.locks"),
    ("group.share.record.lock.duration.ms", ">=", "group.share.min.record.lock.duration.ms"),
    ("group.share.max.record.lock.duration.ms", ">=", "group.share.record.lock.duration.ms"),
    ("group.share.max.share.sessions", ">=", "group.share.max.size"),
)
_WORDS = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}


def _validate_group_bounds(cfg: "BrokerConfig") -> None:
    """``GroupCoordinatorConfig``'s and ``ShareGroupConfig``'s bounds checks of the KIP-848,
    KIP-932 and KIP-1071 intervals and limits, with Kafka's messages (``Utils.require``), e.g.
    ``group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms``."""
    for left, op, right in (*GROUP_COORDINATOR_RULES, *SHARE_GROUP_RULES):
        a, b = cfg.get(left), cfg.get(right)
        if not (a >= b if op == ">=" else a <= b if op == "<=" else a < b):
            raise ConfigError(left, f"{left} must be {_WORDS[op]} {right}")


def _validate_listeners(cfg: "BrokerConfig", roles: list[str]) -> None:
    listeners = parse_listeners("listeners", cfg.get("listeners"))
    listener_names = [ep.name for ep in listeners]
    ctrl = cfg.controller_listener_names
    proto = cfg.listener_security_protocol_map
    for ep in listeners + cfg._advertised_raw():
        if ep.name not in proto:
            raise ConfigError("listener.security.protocol.map", f"No security protocol defined for listener "
                                                                f"{ep.name} (listener.security.protocol.map)")
    advertised = cfg._advertised_raw()
    key = "advertised.listeners" if cfg.get("advertised.listeners") is not None else "listeners"
    for ep in advertised:
        if ep.host == "0.0.0.0":
            raise ConfigError(key, f"{key}: advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                                   "Use a routable IP address.")
        if ep.name not in listener_names:
            raise ConfigError("advertised.listeners", "advertised.listeners listener names must be equal to or a subset "
                              f"of the ones defined in listeners. Found {ep.name}. The valid options based on the "
                              f"current configuration are {','.join(listener_names)}")
    if cfg.raw("inter.broker.listener.name") is not None and cfg.raw("security.inter.broker.protocol") is not None:
        raise ConfigError("inter.broker.listener.name",
                          "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    only_broker, only_controller = roles == ["broker"], roles == ["controller"]
    if (only_broker or only_controller) and not ctrl:
        raise ConfigError("controller.listener.names", "controller.listener.names must contain at least one value "
                                                       f"when running KRaft with process.roles={','.join(roles)}")
    if only_broker:
        clash = [n for n in ctrl if n in listener_names]
        if clash:
            raise ConfigError("controller.listener.names", "controller.listener.names must not contain a value "
                              "appearing in the 'listeners' configuration when running KRaft with just the broker role")
    elif ctrl:
        missing = [n for n in ctrl if n not in listener_names]
        if len(missing) == len(ctrl):
            raise ConfigError("controller.listener.names", "controller.listener.names must contain at least one value "
                              "appearing in the 'listeners' configuration when running the KRaft controller role")
        if only_controller and any(n not in ctrl for n in listener_names):
            raise ConfigError("listeners", "The listeners config must only contain KRaft controller listeners from "
                                           "controller.listener.names when process.roles=controller")
    if "broker" in roles:
        ibl = cfg.inter_broker_listener_name
        if ibl in ctrl:
            raise ConfigError("inter.broker.listener.name", "controller.listener.names must not contain the "
                                                            f"inter-broker listener name {ibl}")
        broker_names = [ep.name for ep in advertised if ep.name not in ctrl]
        if ibl not in broker_names:
            raise ConfigError("inter.broker.listener.name", "inter.broker.listener.name must be a listener name "
                              "defined in advertised.listeners. The valid options based on currently configured "
                              f"listeners are {','.join(broker_names)}")
