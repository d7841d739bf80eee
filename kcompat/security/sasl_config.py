"""The SASL settings of one listener, read from Kafka's broker configs.

Kafka resolves a listener's SASL configs with the listener prefix, and for per-mechanism ones the
listener-and-mechanism prefix first (``ListenerName.saslMechanismConfigPrefix``):
``listener.name.<listener, lower case>.<mechanism, lower case>.<config>``, then
``listener.name.<listener>.<config>``, then the bare ``<config>``:

- ``sasl.enabled.mechanisms`` (default GSSAPI, which kcompat does not implement);
- ``sasl.jaas.config`` per mechanism: ``PlainLoginModule`` with ``user_<name>="<password>"``
  options for PLAIN's users, and ``username``/``password`` for the broker's own connections;
- ``connections.max.reauth.ms`` per mechanism (KIP-368);
- ``sasl.server.max.receive.size``;
- OAUTHBEARER: ``sasl.server.callback.handler.class`` (unset = Kafka's unsecured validator),
  ``sasl.oauthbearer.jwks.endpoint.url``, ``expected.audience``, ``expected.issuer``,
  ``sub.claim.name``, ``scope.claim.name``, ``clock.skew.seconds``.

The broker as a client (inter-broker, controller traffic) uses ``sasl.mechanism.inter.broker.protocol``
or ``sasl.mechanism.controller.protocol`` and the same listener's JAAS ``username``/``password``
(:func:`client_credentials`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcompat.config.endpoints import csv_list
from kcompat.security.jaas import JaasEntry, first_entry

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SECURED_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
SECURED_VALIDATOR_OLD = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"


def listener_value(config, listener: str, name: str, mechanism: str | None = None):
    """The raw value of ``name`` for ``listener`` (and ``mechanism``), most specific first; the
    typed broker value for the bare name; None when unset everywhere."""
    prefix = f"listener.name.{listener.lower()}."
    keys = ([prefix + mechanism.lower() + "." + name] if mechanism else []) + [prefix + name]
    for key in keys:
        raw = config.raw(key)
        if raw is not None:
            return raw
    try:
        return config.get(name)
    except KeyError:
        return config.raw(name)


def _as_list(value) -> list[str]:
    return list(value) if isinstance(value, list) else csv_list(value)


@dataclass
class ListenerSasl:
    """What a SASL listener's authenticator needs (built once per listener)."""

    listener: str
    protocol: str
    mechanisms: list[str]
    jaas: dict[str, JaasEntry | None] = field(default_factory=dict)
    reauth_ms: dict[str, int] = field(default_factory=dict)
    max_receive_size: int = 524288
    oauth: dict[str, object] = field(default_factory=dict)


def listener_sasl(config, listener: str) -> ListenerSasl | None:
    """The SASL settings of ``listener``, None unless its security protocol is SASL_PLAINTEXT or
    SASL_SSL. Raises ValueError for a malformed JAAS configuration (the broker refuses to start)."""
    try:
        protocol = config.security_protocol(listener)
    except Exception:   # no entry in the map: not a SASL listener (the config check reports it)
        return None
    if protocol not in SASL_PROTOCOLS:
        return None
    mechanisms = _as_list(listener_value(config, listener, "sasl.enabled.mechanisms"))
    out = ListenerSasl(listener, protocol, mechanisms,
                       max_receive_size=int(listener_value(config, listener, "sasl.server.max.receive.size")))
    for mech in mechanisms:
        out.jaas[mech] = first_entry(listener_value(config, listener, "sasl.jaas.config", mech))
        out.reauth_ms[mech] = int(listener_value(config, listener, "connections.max.reauth.ms", mech) or 0)
    if "OAUTHBEARER" in mechanisms:
        def oauth(name):
            return listener_value(config, listener, name, "OAUTHBEARER")
        audience = oauth("sasl.oauthbearer.expected.audience")
        out.oauth = {
            "callback_handler": oauth("sasl.server.callback.handler.class"),
            "jwks_url": oauth("sasl.oauthbearer.jwks.endpoint.url"),
            "audience": _as_list(audience) if audience else [],
            "issuer": oauth("sasl.oauthbearer.expected.issuer"),
            "sub_claim": oauth("sasl.oauthbearer.sub.claim.name") or "sub",
            "scope_claim": oauth("sasl.oauthbearer.scope.claim.name") or "scope",
            "clock_skew_s": int(oauth("sasl.oauthbearer.clock.skew.seconds") or 30),
            "jwks_refresh_ms": int(oauth("sasl.oauthbearer.jwks.endpoint.refresh.ms") or 3600000),
            "jwks_backoff_max_ms": int(oauth("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms") or 10000),
        }
    return out


def client_mechanism(config, listener: str) -> str | None:
    """The mechanism this broker uses on its own connections to ``listener`` (a SASL listener):
    ``sasl.mechanism.controller.protocol`` for a controller listener, else
    ``sasl.mechanism.inter.broker.protocol``; None if ``listener`` is not a SASL listener."""
    try:
        if config.security_protocol(listener) not in SASL_PROTOCOLS:
            return None
    except Exception:
        return None
    if listener.upper() in config.controller_listener_names:
        return config.get("sasl.mechanism.controller.protocol")
    return config.get("sasl.mechanism.inter.broker.protocol")


def client_credentials(config, listener: str, mechanism: str) -> JaasEntry | None:
    """The JAAS entry (``username``/``password`` options) the broker authenticates with on
    ``listener``: the listener's entry for ``mechanism`` as Kafka's inter-broker clients use it."""
    return first_entry(listener_value(config, listener, "sasl.jaas.config", mechanism))
