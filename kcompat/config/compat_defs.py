"""Kafka 3.9 broker configs kcompat accepts for compatibility but does not act on.

They exist so that a ``server.properties`` copied from a Kafka installation (security, ZooKeeper,
metrics, quotas, tiered storage, the newer group protocols) loads. Types, defaults and update
modes are Kafka's (``KafkaConfig`` / ``SslConfigs`` / ``SaslConfigs`` / ``BrokerSecurityConfigs`` /
``ZkConfigs`` / ``MetricConfigs`` / ``QuotaConfigs`` / ``RemoteLogManagerConfig`` /
``GroupCoordinatorConfig`` / ``DelegationTokenManagerConfigs`` / ``PasswordEncoderConfigs``).
Every key here is ``implemented=False`` (setting it logs a warning at start-up), except the
tiered-storage keys of :mod:`kcompat.config.remote_defs`, the ``ssl.*`` keys, defined in
:mod:`kcompat.config.ssl_defs` and acted on by
:mod:`kcompat.security.ssl_context`, and the ``sasl.*`` keys and ``connections.max.reauth.ms``,
defined in :mod:`kcompat.config.sasl_defs` (those SASL authentication acts on are implemented).
"""

from __future__ import annotations

import re

from .errors import invalid_value
from .keydef import BOOLEAN, CLASS, CW, INT, LIST, LONG, PASSWORD, PB, RO, STRING, ConfigKey
from .keydef import define as _define
from .remote_defs import REMOTE_LOG_CONFIGS
from .sasl_defs import SASL_CONFIGS
from .ssl_defs import SSL_CONFIGS
from .types import LONG_MAX, Custom, ValidString, at_least

INT_MAX = 2**31 - 1

_SHORT_VERSIONS = ["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1"] + \
    [f"2.{i}" for i in range(9)] + [f"3.{i}" for i in range(10)]


def _check_metadata_version(name: str, value: str) -> None:
    """``MetadataVersionValidator``: ``MetadataVersion.fromVersionString`` must accept it."""
    segments = value.split(".")
    keep = 3 if value.startswith("0.") else 2
    key = value if keep >= len(segments) else ".".join(segments[:keep])
    base = key.split("-IV", 1)[0]
    if base in _SHORT_VERSIONS and (key == base or re.fullmatch(r"[0-9.]+-IV[0-9]+", key)):
        return
    raise invalid_value(name, value, f"Version {value} is not a valid version")


METADATA_VERSION = Custom(_check_metadata_version, "[0.8.0, ..., 3.9-IV0]")

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


_ZK_DOC = "ZooKeeper-mode setting (kcompat runs KRaft only; ignored)."
_MET_DOC = "JMX/metrics setting (ignored by kcompat)."
_QUOTA_DOC = "Replication quota sampling setting (ignored by kcompat)."

COMPAT_CONFIGS: list[ConfigKey] = [
    # general
    _d("broker.id.generation.enable", BOOLEAN, True, None, RO, "Generate broker ids (ZooKeeper mode)."),
    _d("reserved.broker.max.id", INT, 1000, at_least(0), RO, "Largest configurable broker.id (ZooKeeper mode)."),
    _d("num.replica.alter.log.dirs.threads", INT, None, None, RO, "Threads moving replicas between log directories."),
    _d("early.start.listeners", STRING, None, None, RO, "Listeners started before the authorizer is ready."),
    # implemented (issue 19, kcompat.security.authorizer): ACLs enforced when the class is set
    _define("authorizer.class.name", STRING, "", AUTHORIZER_CLASS, RO, True,
            "Authorizer class: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or Kafka 3.x's "
            "kafka.security.authorizer.AclAuthorizer) enforces ACLs; empty = no authorization."),
    _define("super.users", STRING, None, None, RO, True,
            "Principals allowed everything by the authorizer, semicolon-separated: User:admin;User:broker."),
    _define("allow.everyone.if.no.acl.found", BOOLEAN, False, None, RO, True,
            "Authorizer: allow an operation on a resource that has no ACL at all."),
    _d("config.providers", LIST, "", None, RO, "ConfigProvider names for indirect values (KIP-297)."),
    _d("unstable.api.versions.enable", BOOLEAN, False, None, RO, "Advertise unreleased API versions.", internal=True),
    _d("unstable.feature.versions.enable", BOOLEAN, False, None, RO, "Enable unreleased feature versions.", internal=True),
    _d("unstable.metadata.versions.enable", BOOLEAN, False, None, RO, "Enable unreleased metadata versions.", internal=True),
    _d("server.max.startup.time.ms", LONG, LONG_MAX, at_least(0), RO, "Maximum start-up time (ms).", internal=True),
    # group coordinator (KIP-848 and the new coordinator)
    _d("group.coordinator.threads", INT, 1, at_least(1), RO, "Threads of the group coordinator."),
    _d("group.coordinator.append.linger.ms", INT, 10, at_least(0), RO, "Linger (ms) of group coordinator writes.", internal=True),
    _d("group.coordinator.new.enable", BOOLEAN, False, None, RO, "Use the new group coordinator.", internal=True),
    # dynamic-only throttles (DynamicConfig.Broker / QuotaConfigs)
    _d("leader.replication.throttled.rate", LONG, LONG_MAX, at_least(0), CW, "Leader-side replication throttle (bytes/s)."),
    _d("follower.replication.throttled.rate", LONG, LONG_MAX, at_least(0), CW, "Follower-side replication throttle (bytes/s)."),
    _d("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, at_least(0), CW, "Throttle (bytes/s) of log-dir moves."),
    _d("client.quota.callback.class", CLASS, None, None, RO, "ClientQuotaCallback implementation."),
    # delegation tokens (KIP-48, implemented: kcompat.kraft.token_control) and password encoding
    _define("delegation.token.secret.key", PASSWORD, None, None, RO, True, "Secret for delegation tokens."),
    _define("delegation.token.master.key", PASSWORD, None, None, RO, True, "Deprecated alias of delegation.token.secret.key."),
    _define("delegation.token.max.lifetime.ms", LONG, 604800000, at_least(1), RO, True, "Maximum token lifetime (ms)."),
    _define("delegation.token.expiry.time.ms", LONG, 86400000, at_least(1), RO, True, "Token validity (ms) before renewal."),
    _define("delegation.token.expiry.check.interval.ms", LONG, 3600000, at_least(1), RO, True, "Expired-token scan interval (ms)."),
    _d("password.encoder.secret", PASSWORD, None, None, RO, "Secret encoding dynamically configured passwords."),
    _d("password.encoder.old.secret", PASSWORD, None, None, RO, "Previous password.encoder.secret."),
    _d("password.encoder.keyfactory.algorithm", STRING, None, None, RO, "SecretKeyFactory algorithm for passwords."),
    _d("password.encoder.cipher.algorithm", STRING, "AES/CBC/PKCS5Padding", None, RO, "Cipher for encoded passwords."),
    _d("password.encoder.key.length", INT, 128, at_least(8), RO, "Key length for encoded passwords."),
    _d("password.encoder.iterations", INT, 4096, at_least(1024), RO, "Iterations for encoded passwords."),
    *REMOTE_LOG_CONFIGS,  # kcompat.config.remote_defs: tiered storage (KIP-405)
    # metrics (MetricConfigs)
    _d("metric.reporters", LIST, "", None, CW, "MetricsReporter classes."),
    *_many(_MET_DOC, [
        ("metrics.num.samples", INT, 2, at_least(1), RO),
        ("metrics.sample.window.ms", LONG, 30000, at_least(1), RO),
        ("metrics.recording.level", STRING, "INFO", None, RO),
        ("auto.include.jmx.reporter", BOOLEAN, True, None, RO),
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
    # ZooKeeper (ZkConfigs): still defined in 3.9, meaningless for KRaft
    *_many(_ZK_DOC, [
        ("zookeeper.connect", STRING, None, None, RO),
        ("zookeeper.session.timeout.ms", INT, 18000, None, RO),
        ("zookeeper.connection.timeout.ms", INT, None, None, RO),
        ("zookeeper.set.acl", BOOLEAN, False, None, RO),
        ("zookeeper.max.in.flight.requests", INT, 10, at_least(1), RO),
        ("zookeeper.ssl.client.enable", BOOLEAN, False, None, RO),
        ("zookeeper.clientCnxnSocket", STRING, None, None, RO),
        ("zookeeper.ssl.keystore.location", STRING, None, None, RO),
        ("zookeeper.ssl.keystore.password", PASSWORD, None, None, RO),
        ("zookeeper.ssl.keystore.type", STRING, None, None, RO),
        ("zookeeper.ssl.truststore.location", STRING, None, None, RO),
        ("zookeeper.ssl.truststore.password", PASSWORD, None, None, RO),
        ("zookeeper.ssl.truststore.type", STRING, None, None, RO),
        ("zookeeper.ssl.protocol", STRING, "TLSv1.2", None, RO),
        ("zookeeper.ssl.enabled.protocols", LIST, None, None, RO),
        ("zookeeper.ssl.cipher.suites", LIST, None, None, RO),
        ("zookeeper.ssl.endpoint.identification.algorithm", STRING, "HTTPS", None, RO),
        ("zookeeper.ssl.crl.enable", BOOLEAN, False, None, RO),
        ("zookeeper.ssl.ocsp.enable", BOOLEAN, False, None, RO),
    ]),
]
