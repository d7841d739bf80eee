"""The ``sasl.*`` broker configs (Kafka's ``SaslConfigs`` / ``BrokerSecurityConfigs``) and
``connections.max.reauth.ms``: names, types, defaults and update modes as Kafka 4.3 defines them.

``implemented=True`` marks the ones kcompat's SASL authentication acts on
(:mod:`kcompat.security.sasl_config`): enabled mechanisms, JAAS configurations (PLAIN users,
the broker's own credentials, OAUTHBEARER options), the mechanisms of the broker's own
connections, the pre-authentication frame limit, re-authentication, and the OAUTHBEARER
validator settings. Each may also be set per listener (``listener.name.<listener>.<config>``) and
the per-mechanism ones per listener and mechanism (``listener.name.<listener>.<mechanism>.<config>``),
which win over the broker-wide value. Kerberos (GSSAPI) and the client-side login settings are
accepted for compatibility only.
"""

from __future__ import annotations

from .keydef import BOOLEAN, CLASS, DOUBLE, INT, LIST, LONG, PASSWORD, PB, RO, SHORT, STRING, ConfigKey
from .keydef import define as _define

_DOCS = {
    "connections.max.reauth.ms": "Maximum session lifetime (ms) of a SASL connection before it must "
                                 "re-authenticate (KIP-368); 0 = no limit.",
    "sasl.server.max.receive.size": "Largest frame (bytes) a SASL connection may send before it has authenticated.",
    "sasl.mechanism.controller.protocol": "SASL mechanism of the broker's own connections to a SASL controller listener.",
    "sasl.mechanism.inter.broker.protocol": "SASL mechanism of the broker's own connections to a SASL "
                                            "inter-broker listener.",
    "sasl.jaas.config": "JAAS login configuration: PlainLoginModule user_<name>=\"<password>\" options for "
                        "PLAIN, username/password for the broker's own connections, OAUTHBEARER options.",
    "sasl.enabled.mechanisms": "SASL mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
                               "OAUTHBEARER (GSSAPI is not implemented).",
    "sasl.server.callback.handler.class": "OAUTHBEARER: unset = Kafka's unsecured validator; "
                                          "OAuthBearerValidatorCallbackHandler = signed tokens checked with JWKS.",
    "sasl.oauthbearer.sub.claim.name": "OAUTHBEARER (JWKS): the claim naming the principal.",
    "sasl.oauthbearer.jwks.endpoint.url": "OAUTHBEARER (JWKS): file:// or http(s):// URL of the JSON Web Key Set.",
    "sasl.oauthbearer.clock.skew.seconds": "OAUTHBEARER (JWKS): leeway (s) for exp/nbf/iat checks.",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "OAUTHBEARER (JWKS): how often (ms) an http(s) key set is "
                                                 "fetched again.",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "OAUTHBEARER (JWKS): least time (ms) between two "
                                                           "fetches when a token names an unknown key id.",
    "sasl.oauthbearer.expected.audience": "OAUTHBEARER (JWKS): audiences a token must name (one suffices).",
    "sasl.oauthbearer.expected.issuer": "OAUTHBEARER (JWKS): the issuer a token must name.",
}
_IGNORED = "SASL setting (accepted for compatibility; kcompat does not act on it)."


def _d(name, ctype, default, mode) -> ConfigKey:
    doc = _DOCS.get(name)
    return _define(name, ctype, default, None, mode, doc is not None, doc or _IGNORED)


SASL_CONFIGS: list[ConfigKey] = [
    _d("connections.max.reauth.ms", LONG, 0, RO),
    _d("sasl.server.max.receive.size", INT, 524288, RO),
    _d("sasl.mechanism.controller.protocol", STRING, "GSSAPI", RO),
    _d("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", PB),
    _d("sasl.jaas.config", PASSWORD, None, PB),
    _d("sasl.enabled.mechanisms", LIST, "GSSAPI", PB),
    _d("sasl.server.callback.handler.class", CLASS, None, RO),
    _d("sasl.client.callback.handler.class", CLASS, None, RO),
    _d("sasl.login.class", CLASS, None, RO),
    _d("sasl.login.callback.handler.class", CLASS, None, RO),
    _d("sasl.kerberos.service.name", STRING, None, PB),
    _d("sasl.kerberos.kinit.cmd", STRING, "/usr/bin/kinit", PB),
    _d("sasl.kerberos.ticket.renew.window.factor", DOUBLE, 0.8, PB),
    _d("sasl.kerberos.ticket.renew.jitter", DOUBLE, 0.05, PB),
    _d("sasl.kerberos.min.time.before.relogin", LONG, 60000, PB),
    _d("sasl.kerberos.principal.to.local.rules", LIST, "DEFAULT", PB),
    _d("sasl.login.refresh.window.factor", DOUBLE, 0.8, PB),
    _d("sasl.login.refresh.window.jitter", DOUBLE, 0.05, PB),
    _d("sasl.login.refresh.min.period.seconds", SHORT, 60, PB),
    _d("sasl.login.refresh.buffer.seconds", SHORT, 300, PB),
    _d("sasl.login.connect.timeout.ms", INT, None, RO),
    _d("sasl.login.read.timeout.ms", INT, None, RO),
    _d("sasl.login.retry.backoff.max.ms", LONG, 10000, RO),
    _d("sasl.login.retry.backoff.ms", LONG, 100, RO),
    _d("sasl.oauthbearer.scope.claim.name", STRING, "scope", RO),
    _d("sasl.oauthbearer.sub.claim.name", STRING, "sub", RO),
    _d("sasl.oauthbearer.token.endpoint.url", STRING, None, RO),
    _d("sasl.oauthbearer.jwks.endpoint.url", STRING, None, RO),
    _d("sasl.oauthbearer.jwks.endpoint.refresh.ms", LONG, 3600000, RO),
    _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LONG, 100, RO),
    _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", LONG, 10000, RO),
    _d("sasl.oauthbearer.clock.skew.seconds", INT, 30, RO),
    _d("sasl.oauthbearer.expected.audience", LIST, "", RO),
    _d("sasl.oauthbearer.expected.issuer", STRING, None, RO),
    # Kafka 4.1+'s OAUTHBEARER client-side settings (KIP-1139: JWT bearer assertions)
    _d("sasl.oauthbearer.scope", STRING, None, RO),
    _d("sasl.oauthbearer.client.credentials.client.id", STRING, None, RO),
    _d("sasl.oauthbearer.client.credentials.client.secret", PASSWORD, None, RO),
    _d("sasl.oauthbearer.jwt.retriever.class", CLASS,
       "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever", RO),
    _d("sasl.oauthbearer.jwt.validator.class", CLASS,
       "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator", RO),
    _d("sasl.oauthbearer.assertion.algorithm", STRING, "RS256", RO),
    _d("sasl.oauthbearer.assertion.claim.aud", STRING, None, RO),
    _d("sasl.oauthbearer.assertion.claim.exp.seconds", INT, 300, RO),
    _d("sasl.oauthbearer.assertion.claim.iss", STRING, None, RO),
    _d("sasl.oauthbearer.assertion.claim.jti.include", BOOLEAN, False, RO),
    _d("sasl.oauthbearer.assertion.claim.nbf.seconds", INT, 60, RO),
    _d("sasl.oauthbearer.assertion.claim.sub", STRING, None, RO),
    _d("sasl.oauthbearer.assertion.file", STRING, None, RO),
    _d("sasl.oauthbearer.assertion.private.key.file", STRING, None, RO),
    _d("sasl.oauthbearer.assertion.private.key.passphrase", PASSWORD, None, RO),
    _d("sasl.oauthbearer.assertion.template.file", STRING, None, RO),
]

# listener.name.<l>.<mechanism>.<config>: the mechanism segments Kafka's saslMechanismConfigPrefix uses
MECHANISM_PREFIXES = ("plain", "scram-sha-256", "scram-sha-512", "oauthbearer", "gssapi")
