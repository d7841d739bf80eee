"""Kafka 4.3 broker configs kcompat accepts for compatibility but does not act on.

They exist so that a ``server.properties`` copied from a Kafka installation (security, metrics,
quotas, tiered storage, the newer group protocols) loads. Types, defaults and update modes are
Kafka 4.3.1's (``KafkaConfig`` / ``SslConfigs`` / ``SaslConfigs`` / ``BrokerSecurityConfigs`` /
``MetricConfigs`` / ``QuotaConfigs`` / ``RemoteLogManagerConfig`` / ``GroupCoordinatorConfig`` /
``DelegationTokenManagerConfigs`` / ``QuorumConfig``). The Kafka 3.9 keys Kafka 4.0 removed
(ZooKeeper, password encoding, ...) are :data:`kcompat.config.definitions.REMOVED_KEYS`.
Every key here is ``implemented=False`` (setting it logs a warning at start-up), except the
tiered-storage keys of :mod:`kcompat.config.remote_defs`, the ``ssl.*`` keys, defined in
:mod:`kcompat.config.ssl_defs` and acted on by
:mod:`kcompat.security.ssl_context`, and the ``sasl.*`` keys and ``connections.max.reauth.ms``,
defined in :mod:`kcompat.config.sasl_defs` (those SASL authentication acts on are implemented).
"""

from __future__ import annotations

from .errors import invalid_value
from .keydef import BOOLEAN, CLASS, CW, INT, LIST, LONG, PASSWORD, PB, RO, STRING, ConfigKey
from .keydef import define as _define
from .remote_defs import REMOTE_LOG_CONFIGS
from .sasl_defs import SASL_CONFIGS
from .ssl_defs import SSL_CONFIGS
from .types import LONG_MAX, Custom, at_least

INT_MAX = 2**31 - 1

_AUTHORIZERS = ("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")


def _check_authorizer(name: str, value: str) -> None:
    """Only the authorizers kcompat implements (kcompat.security.authorizer); Kafka would fail to
    load any other class too."""
    if (value or "").strip() not in _AUTHORIZERS:
        raise invalid_value(name, value, "Class " + str(value) + " cannot be found")


AUTHORIZER_CLASS = Custom(_check_authorizer, "[StandardAuthorizer, AclAuthorizer]")


def _d(name, ctype, default, validator, mode, doc, *, internal=False) -> ConfigKey:
    return _define(name, ctype, default, validator, mode, False, doc, internal=internal)


def _many(prefix_doc: str, specs: list[tuple]) -> list[ConfigKey]:
    """Compact form: (name, type, default, validator, mode)."""
    return [_d(n, t, dflt, v, m, prefix_doc) for (n, t, dflt, v, m) in specs]


_MET_DOC = "JMX/metrics setting (ignored by kcompat)."
_QUOTA_DOC = "Replication quota sampling setting (ignored by kcompat)."

COMPAT_CONFIGS: list[ConfigKey] = [
    # general
    _d("num.replica.alter.log.dirs.threads", INT, None, None, RO, "Threads moving replicas between log directories."),
    _d("early.start.listeners", STRING, None, None, RO, "Listeners started before the authorizer is ready."),
    # implemented (issue 19, kcompat.security.authorizer): ACLs enforced when the class is set
    _define("authorizer.class.name", STRING, "", AUTHORIZER_CLASS, RO, True,
            "Authorizer class: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or Kafka 3.x's "
            "kafka.security.authorizer.AclAuthorizer) enforces ACLs; empty = no authorization."),
    # StandardAuthorizer's own configs, outside KafkaConfig: described only when set, as Kafka does
    _define("super.users", STRING, None, None, RO, True,
            "Principals allowed everything by the authorizer, semicolon-separated: User:admin;User:broker.",
            internal=True),
    _define("allow.everyone.if.no.acl.found", BOOLEAN, False, None, RO, True,
            "Authorizer: allow an operation on a resource that has no ACL at all.", internal=True),
    _d("config.providers", LIST, "", None, CW, "ConfigProvider names for indirect values (KIP-297)."),
    _d("unstable.api.versions.enable", BOOLEAN, False, None, RO, "Advertise unreleased API versions.", internal=True),
    _d("unstable.feature.versions.enable", BOOLEAN, False, None, RO, "Enable unreleased feature versions.", internal=True),
    _d("unstable.metadata.versions.enable", BOOLEAN, False, None, RO, "Enable unreleased metadata versions.", internal=True),
    _d("server.max.startup.time.ms", LONG, LONG_MAX, at_least(0), RO, "Maximum start-up time (ms).", internal=True),
    # group coordinator (KIP-848 and the new coordinator)
    _d("group.coordinator.threads", INT, 4, at_least(1), RO, "Threads of the group coordinator."),
    _d("group.coordinator.append.linger.ms", INT, -1, at_least(-1), RO,
       "Linger (ms) of group coordinator writes; -1 = adaptive (Kafka 4.x)."),
    _d("group.coordinator.background.threads", INT, 2, at_least(1), RO, "Threads of the group coordinator's background work."),
    _d("group.coordinator.cached.buffer.max.bytes", INT, 1048588, at_least(524288), CW,
       "Largest write buffer (bytes) the group coordinator keeps for reuse."),
    # transactions (Kafka 4.x TransactionLogConfigs / KIP-939)
    _d("add.partitions.to.txn.retry.backoff.ms", INT, 20, at_least(1), RO,
       "Backoff (ms) of AddPartitionsToTxn retries of the broker's transaction verification."),
    _d("add.partitions.to.txn.retry.backoff.max.ms", INT, 100, at_least(0), RO,
       "Longest backoff (ms) of those retries."),
    _d("transaction.two.phase.commit.enable", BOOLEAN, False, None, RO,
       "Allow transactions prepared for two-phase commit (KIP-939)."),
    # KRaft quorum (Kafka 4.x QuorumConfig, KIP-853)
    _d("controller.quorum.auto.join.enable", BOOLEAN, False, None, RO,
       "A controller not among the voters adds itself (KIP-853)."),
    _d("controller.quorum.fetch.max.bytes", INT, 1048576, at_least(1), RO, "Largest Raft Fetch response (bytes)."),
    _d("controller.quorum.fetch.snapshot.max.bytes", INT, 1048576, at_least(1), RO,
       "Largest Raft FetchSnapshot response (bytes)."),
    _d("group.coordinator.new.enable", BOOLEAN, False, None, RO, "Use the new group coordinator.", internal=True),
    # dynamic-only throttles (DynamicConfig.Broker / QuotaConfigs): outside KafkaConfig, described
    # only when set, as Kafka does
    _d("leader.replication.throttled.rate", LONG, LONG_MAX, at_least(0), CW, "Leader-side replication throttle (bytes/s).",
       internal=True),
    _d("follower.replication.throttled.rate", LONG, LONG_MAX, at_least(0), CW, "Follower-side replication throttle (bytes/s).",
       internal=True),
    _d("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, at_least(0), CW, "Throttle (bytes/s) of log-dir moves.",
       internal=True),
    _d("client.quota.callback.class", CLASS, None, None, RO, "ClientQuotaCallback implementation."),
    # delegation tokens (KIP-48, implemented: kcompat.kraft.token_control)
    _define("delegation.token.secret.key", PASSWORD, None, None, RO, True, "Secret for delegation tokens."),
    _define("delegation.token.max.lifetime.ms", LONG, 604800000, at_least(1), RO, True, "Maximum token lifetime (ms)."),
    _define("delegation.token.expiry.time.ms", LONG, 86400000, at_least(1), RO, True, "Token validity (ms) before renewal."),
    _define("delegation.token.expiry.check.interval.ms", LONG, 3600000, at_least(1), RO, True, "Expired-token scan interval (ms)."),
    *REMOTE_LOG_CONFIGS,  # kcompat.config.remote_defs: tiered storage (KIP-405)
    # metrics (MetricConfigs)
    _d("metric.reporters", LIST, "org.apache.kafka.common.metrics.JmxReporter", None, CW,
       "MetricsReporter classes (Kafka 4.x lists JmxReporter by default, KIP-830)."),
    *_many(_MET_DOC, [
        ("metrics.num.samples", INT, 2, at_least(1), RO),
        ("metrics.sample.window.ms", LONG, 30000, at_least(1), RO),
        ("metrics.recording.level", STRING, "INFO", None, RO),
        ("kafka.metrics.reporters", LIST, "", None, RO),
        ("kafka.metrics.polling.interval.secs", INT, 10, at_least(1), RO),
        ("telemetry.max.bytes", INT, 1048576, at_least(1), RO),
    ]),
    # quotas (QuotaConfigs): client quota windows are kcompat.broker.quota's
    _define("quota.window.num", INT, 11, at_least(1), RO, True,
            "Samples of client quota rates (kcompat.broker.quota)."),
    _define("quota.window.size.seconds", INT, 1, at_least(1), RO, True,
            "Length of one client quota sample, seconds."),
    _define("controller.quota.window.num", INT, 11, at_least(1), RO, True,
            "Samples of the controller mutation token bucket (controller_mutation_rate)."),
    _define("controller.quota.window.size.seconds", INT, 1, at_least(1), RO, True,
            "Length of one controller mutation sample, seconds."),
    *_many(_QUOTA_DOC, [
        ("replication.quota.window.num", INT, 11, at_least(1), RO),
        ("replication.quota.window.size.seconds", INT, 1, at_least(1), RO),
        ("alter.log.dirs.replication.quota.window.num", INT, 11, at_least(1), RO),
        ("alter.log.dirs.replication.quota.window.size.seconds", INT, 1, at_least(1), RO),
    ]),
    # security: general, SSL, SASL (BrokerSecurityConfigs / SslConfigs / SaslConfigs)
    _d("security.providers", STRING, None, None, RO, "Security provider creator classes."),
    _d("principal.builder.class", CLASS, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
       None, PB, "KafkaPrincipalBuilder implementation."),
    *SSL_CONFIGS,   # kcompat.config.ssl_defs: implemented by kcompat.security.ssl_context
    *SASL_CONFIGS,  # kcompat.config.sasl_defs: implemented by kcompat.security.sasl_config
]
