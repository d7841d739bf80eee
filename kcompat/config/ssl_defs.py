"""The ``ssl.*`` broker configs (Kafka's ``SslConfigs`` / ``BrokerSecurityConfigs``): names, types,
defaults and update modes as Kafka 3.9 defines them.

``implemented=True`` marks the ones :mod:`kcompat.security.ssl_context` acts on when it builds a
TLS listener's context (PEM key and trust stores, client authentication, protocols, cipher suites,
host name checks of the broker's own connections, principal mapping). Each may also be set per
listener as ``listener.name.<listener>.<config>`` (Kafka's ``ListenerName.configPrefix``), which
wins over the broker-wide value. The store types keep Kafka's default (``JKS``), but kcompat reads
``PEM`` and (with the ``cryptography`` package) ``PKCS12`` stores and refuses a JKS one.
"""

from __future__ import annotations

from .keydef import BOOLEAN, CLASS, LIST, PASSWORD, PB, RO, STRING, ConfigKey
from .keydef import define as _define
from .types import ValidString

_DOCS = {
    "ssl.protocol": "SSLContext protocol: TLSv1.3 (default), TLSv1.2 or TLS; caps the highest enabled version.",
    "ssl.enabled.protocols": "TLS versions a connection may use (TLSv1.2, TLSv1.3).",
    "ssl.keystore.type": "Key store format: PEM, or PKCS12 with the cryptography package (JKS is refused).",
    "ssl.keystore.location": "PEM file holding the private key and the certificate chain.",
    "ssl.keystore.password": "PKCS12 key store password; not allowed with PEM (use ssl.key.password).",
    "ssl.key.password": "Password of an encrypted private key (PKCS#8).",
    "ssl.keystore.key": "Private key in PEM (PKCS#8), inline; with ssl.keystore.certificate.chain.",
    "ssl.keystore.certificate.chain": "Certificate chain in PEM, inline; with ssl.keystore.key.",
    "ssl.truststore.type": "Trust store format: PEM, or PKCS12 with the cryptography package (JKS is refused).",
    "ssl.truststore.location": "PEM file of trusted CA certificates.",
    "ssl.truststore.password": "PKCS12 trust store password (optional); not allowed with PEM.",
    "ssl.truststore.certificates": "Trusted CA certificates in PEM, inline.",
    "ssl.endpoint.identification.algorithm": "https: the broker's own TLS connections check the peer's host "
                                             "name against its certificate; empty: no check.",
    "ssl.client.auth": "Client certificates on TLS listeners: required, requested or none.",
    "ssl.cipher.suites": "Cipher suites (IANA names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); empty: the defaults.",
    "ssl.principal.mapping.rules": "Rules mapping a client certificate's subject DN to the principal name "
                                   "(DEFAULT, RULE:pattern/replacement/[LU]).",
    "ssl.allow.dn.changes": "Whether a key store replaced at runtime may carry a different subject DN.",
    "ssl.allow.san.changes": "Whether a key store replaced at runtime may drop subject alternative names.",
}
_IGNORED = "TLS setting of the JSSE (accepted for compatibility; kcompat uses OpenSSL through Python's ssl)."


def _d(name, ctype, default, validator, mode) -> ConfigKey:
    doc = _DOCS.get(name)
    return _define(name, ctype, default, validator, mode, doc is not None, doc or _IGNORED)


SSL_CONFIGS: list[ConfigKey] = [
    _d("ssl.protocol", STRING, "TLSv1.3", None, PB),
    _d("ssl.provider", STRING, None, None, PB),
    _d("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", None, PB),
    _d("ssl.keystore.type", STRING, "JKS", None, PB),
    _d("ssl.keystore.location", STRING, None, None, PB),
    _d("ssl.keystore.password", PASSWORD, None, None, PB),
    _d("ssl.key.password", PASSWORD, None, None, PB),
    _d("ssl.keystore.key", PASSWORD, None, None, PB),
    _d("ssl.keystore.certificate.chain", PASSWORD, None, None, PB),
    _d("ssl.truststore.type", STRING, "JKS", None, PB),
    _d("ssl.truststore.location", STRING, None, None, PB),
    _d("ssl.truststore.password", PASSWORD, None, None, PB),
    _d("ssl.truststore.certificates", PASSWORD, None, None, PB),
    _d("ssl.keymanager.algorithm", STRING, "SunX509", None, PB),
    _d("ssl.trustmanager.algorithm", STRING, "PKIX", None, PB),
    _d("ssl.endpoint.identification.algorithm", STRING, "https", None, PB),
    _d("ssl.secure.random.implementation", STRING, None, None, PB),
    _d("ssl.client.auth", STRING, "none", ValidString(["required", "requested", "none"]), PB),
    _d("ssl.cipher.suites", LIST, "", None, PB),
    _d("ssl.principal.mapping.rules", STRING, "DEFAULT", None, RO),
    _d("ssl.engine.factory.class", CLASS, None, None, PB),
    _d("ssl.allow.dn.changes", BOOLEAN, False, None, RO),
    _d("ssl.allow.san.changes", BOOLEAN, False, None, RO),
]
