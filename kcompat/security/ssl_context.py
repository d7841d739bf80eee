"""TLS contexts of the broker's listeners and of its own connections to other nodes, built from
Kafka's ``ssl.*`` configs (``SslConfigs``, ``DefaultSslEngineFactory``) with the standard ``ssl``
module.

* :func:`server_context` ``(config, listener_name) -> ssl.SSLContext | None``: the context a
  listener accepts with; ``None`` when its protocol (``listener.security.protocol.map``) is
  PLAINTEXT or SASL_PLAINTEXT.
* :func:`client_context` ``(config, listener_name) -> ssl.SSLContext | None``: the context the
  broker connects with to another node's listener of that name (inter-broker replication, Raft,
  broker-to-controller); ``None`` for a plaintext listener. It trusts the listener's trust store,
  presents the listener's key store if one is set, and checks the peer's host name unless
  ``ssl.endpoint.identification.algorithm`` is empty (Kafka's default ``https`` checks it).

Each ``ssl.X`` is looked up as Kafka's ``ListenerName.configPrefix`` does: first
``listener.name.<listener in lower case>.ssl.X``, then ``ssl.X``, then the default.

Supported: ``ssl.keystore.type=PEM`` (``ssl.keystore.location`` naming a PEM file with the private
key and the certificate chain, or ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` inline;
``ssl.key.password`` for an encrypted key), ``ssl.truststore.type=PEM``
(``ssl.truststore.location`` or ``ssl.truststore.certificates``; neither = the system's CAs, as
Java falls back to its ``cacerts``), ``ssl.client.auth`` none/requested/required,
``ssl.enabled.protocols`` and ``ssl.protocol`` (TLSv1.2, TLSv1.3: the range between the lowest and
highest enabled, capped by ``ssl.protocol``), ``ssl.cipher.suites`` (IANA names as Java takes
them; TLS 1.2 suites are passed to OpenSSL, TLS 1.3 suites cannot be narrowed by Python's ``ssl``,
so a list naming no TLS 1.3 suite disables TLS 1.3 and one naming only TLS 1.3 suites disables
TLS 1.2, as the JSSE would). PKCS12 stores (``ssl.keystore.password``; the key decrypted with
it) are read when the ``cryptography`` package is installed (:mod:`kcompat.security.pkcs12`); JKS
stores are refused with a :class:`ConfigError` saying that kcompat reads PEM and PKCS12.

Errors are :class:`kcompat.config.ConfigError` naming the key at fault with Kafka's
``InvalidConfigurationException`` wording; no message ever carries a key, a password or PEM text.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import tempfile
from typing import Any

from kcompat.config.definitions import BROKER_CONFIGS
from kcompat.config.errors import ConfigError

from . import pkcs12
from .ssl_principal import SslPrincipalMapper

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
PEM = "PEM"
PKCS12 = "PKCS12"
_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_PROTOCOL_CAP = {"TLS": ssl.TLSVersion.TLSv1_3, "TLSv1.3": ssl.TLSVersion.TLSv1_3, "TLSv1.2": ssl.TLSVersion.TLSv1_2,
                 "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1, "SSL": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def listener_config(config, listener_name: str, name: str) -> Any:
    """The typed value of ``name`` for ``listener_name``: ``listener.name.<l>.<name>`` if set, else
    the broker-wide value (``BrokerConfig.get``). ``ConfigError`` naming the prefixed key if its
    value does not parse."""
    prefixed = f"listener.name.{listener_name.lower()}.{name}"
    raw = config.raw(prefixed)
    if raw is not None and name in BROKER_CONFIGS:
        try:
            return BROKER_CONFIGS[name].parse(raw)
        except ConfigError as e:
            raise ConfigError(prefixed, e.message.replace(name, prefixed)) from None
    return config.get(name)


def _key(listener_name: str, name: str, config) -> str:
    """The key name an error should cite: the prefixed one when that is what was set."""
    prefixed = f"listener.name.{listener_name.lower()}.{name}"
    return prefixed if config.raw(prefixed) is not None else name


def is_tls(config, listener_name: str) -> bool:
    """True if ``listener_name`` is SSL or SASL_SSL in ``listener.security.protocol.map``."""
    return config.listener_security_protocol_map.get(listener_name.upper()) in TLS_PROTOCOLS


def normalize_pem(text: str) -> str:
    """PEM blocks of ``text`` re-wrapped at 64 columns: inline PEM in server.properties arrives with
    its line breaks removed by backslash continuations (Kafka's ``PemParser`` ignores whitespace
    inside a block). ``""`` when ``text`` holds no PEM block."""
    out = []
    for kind, body in _PEM_BLOCK.findall(text):
        b64 = "".join(body.split())
        lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        out.append(f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----\n")
    return "".join(out)


def _load_key_store(ctx: ssl.SSLContext, config, listener: str) -> bool:
    """Load the listener's key store into ``ctx``; False when none is configured. Kafka's
    ``DefaultSslEngineFactory.createKeystore`` checks and messages."""
    g = lambda n: listener_config(config, listener, n)   # noqa: E731
    kind, path, password = g("ssl.keystore.type"), g("ssl.keystore.location"), g("ssl.keystore.password")
    key_password, key, chain = g("ssl.key.password"), g("ssl.keystore.key"), g("ssl.keystore.certificate.chain")
    type_key = _key(listener, "ssl.keystore.type", config)
    if key is not None:
        if kind != PEM:
            raise ConfigError(type_key, f"SSL private key can be specified only for PEM, but key store type is {kind}.")
        if chain is None:
            raise ConfigError(_key(listener, "ssl.keystore.certificate.chain", config),
                              "SSL private key is specified, but certificate chain is not specified.")
        if path is not None:
            raise ConfigError(_key(listener, "ssl.keystore.location", config),
                              "Both SSL key store location and separate private key are specified.")
        if password is not None:
            raise ConfigError(_key(listener, "ssl.keystore.password", config), "SSL key store password cannot be "
                              "specified with PEM format, only key password may be specified.")
        chain_pem, key_pem = normalize_pem(chain), normalize_pem(key)
        if not chain_pem or not key_pem:
            raise ConfigError(_key(listener, "ssl.keystore.key" if not key_pem else "ssl.keystore.certificate.chain",
                                   config), "Invalid PEM keystore configs: no PEM block found")
        _load_pem_texts(ctx, chain_pem, key_pem, key_password, _key(listener, "ssl.keystore.key", config))
        return True
    if chain is not None:
        raise ConfigError(_key(listener, "ssl.keystore.certificate.chain", config),
                          "SSL certificate chain is specified, but private key is not specified")
    if path is None:
        if password is not None:
            raise ConfigError(_key(listener, "ssl.keystore.password", config),
                              "SSL key store is not specified, but key store password is specified.")
        return False
    if kind == PKCS12:
        if password is None:
            raise ConfigError(_key(listener, "ssl.keystore.password", config),
                              "SSL key store is specified, but key store password is not specified.")
        location_key = _key(listener, "ssl.keystore.location", config)
        chain_pem, key_pem, one_time = pkcs12.keystore_pem(path, password, location_key, type_key)
        _load_pem_texts(ctx, chain_pem, key_pem, one_time, location_key)
        return True
    if kind != PEM:
        raise ConfigError(type_key, f"Invalid value {kind} for configuration {type_key}: kcompat reads PEM and PKCS12 "
                          f"key stores (convert a JKS store with: keytool -importkeystore -srckeystore store.jks "
                          f"-destkeystore store.p12 -deststoretype PKCS12)")
    if password is not None:
        raise ConfigError(_key(listener, "ssl.keystore.password", config), "SSL key store password cannot be "
                          "specified with PEM format, only key password may be specified")
    _load_chain(ctx, path, path, key_password, _key(listener, "ssl.keystore.location", config))
    return True


def _load_pem_texts(ctx: ssl.SSLContext, chain_pem: str, key_pem: str, password: str | None, key_name: str) -> None:
    """``load_cert_chain`` of PEM texts: Python's ssl reads files only, so they are written to a
    private (0700) temporary directory that is removed at once."""
    tmp = tempfile.mkdtemp(prefix="kcompat-pem-")
    try:
        cert_file, key_file = os.path.join(tmp, "chain.pem"), os.path.join(tmp, "key.pem")
        for file, text in ((cert_file, chain_pem), (key_file, key_pem)):
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
        _load_chain(ctx, cert_file, key_file, password, key_name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_chain(ctx: ssl.SSLContext, cert_file: str, key_file: str, password: str | None, key_name: str) -> None:
    try:
        # an empty password rather than None: OpenSSL would prompt on the terminal for an encrypted key
        ctx.load_cert_chain(cert_file, key_file, password=password if password is not None else "")
    except (ssl.SSLError, OSError) as e:
        reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or type(e).__name__
        raise ConfigError(key_name, f"Failed to load PEM SSL keystore ({key_name}): {reason} (a private key and its "
                                    "certificate chain in PEM, the key decrypted with ssl.key.password if "
                                    "encrypted)") from None


def _load_trust_store(ctx: ssl.SSLContext, config, listener: str, purpose: ssl.Purpose) -> None:
    """Kafka's ``createTruststore``; no store: the system's default CAs (Java's cacerts)."""
    g = lambda n: listener_config(config, listener, n)   # noqa: E731
    kind, path, password, certs = (g("ssl.truststore.type"), g("ssl.truststore.location"),
                                   g("ssl.truststore.password"), g("ssl.truststore.certificates"))
    type_key = _key(listener, "ssl.truststore.type", config)
    if certs is not None:
        if kind != PEM:
            raise ConfigError(type_key, f"SSL trust store certs can be specified only for PEM, but trust store type "
                                        f"is {kind}.")
        if path is not None:
            raise ConfigError(_key(listener, "ssl.truststore.location", config),
                              "Both SSL trust store location and separate trust certificates are specified.")
        if password is not None:
            raise ConfigError(_key(listener, "ssl.truststore.password", config),
                              "SSL trust store password cannot be specified for PEM format.")
        pem = normalize_pem(certs)
        try:
            ctx.load_verify_locations(cadata=pem) if pem else None
        except ssl.SSLError as e:
            raise ConfigError(_key(listener, "ssl.truststore.certificates", config),
                              f"Invalid PEM truststore configs: {e.reason}") from None
        if not pem:
            raise ConfigError(_key(listener, "ssl.truststore.certificates", config),
                              "At least one certificate expected, but none found")
        return
    if path is None:
        if password is not None:
            raise ConfigError(_key(listener, "ssl.truststore.password", config),
                              "SSL trust store is not specified, but trust store password is specified.")
        ctx.load_default_certs(purpose)
        return
    if kind == PKCS12:
        location_key = _key(listener, "ssl.truststore.location", config)
        pem = pkcs12.truststore_pem(path, password, location_key, type_key)
        ctx.load_verify_locations(cadata=pem)
        return
    if kind != PEM:
        raise ConfigError(type_key, f"Invalid value {kind} for configuration {type_key}: kcompat reads PEM and PKCS12 "
                          f"trust stores (convert a JKS store with: keytool -importkeystore -srckeystore store.jks "
                          f"-destkeystore store.p12 -deststoretype PKCS12)")
    if password is not None:
        raise ConfigError(_key(listener, "ssl.truststore.password", config),
                          "SSL trust store password cannot be specified for PEM format.")
    try:
        ctx.load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError) as e:
        reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or type(e).__name__
        raise ConfigError(_key(listener, "ssl.truststore.location", config),
                          f"Failed to load PEM SSL truststore {path}: {reason}") from None


def _set_protocols(ctx: ssl.SSLContext, config, listener: str) -> None:
    enabled = listener_config(config, listener, "ssl.enabled.protocols") or []
    proto = listener_config(config, listener, "ssl.protocol")
    enabled_key = _key(listener, "ssl.enabled.protocols", config)
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown:
        raise ConfigError(enabled_key, f"Invalid value {','.join(enabled)} for configuration {enabled_key}: "
                          f"unsupported protocol {unknown[0]} (supported: {', '.join(_VERSIONS)})")
    if not enabled:
        raise ConfigError(enabled_key, f"Invalid value  for configuration {enabled_key}: no protocol enabled")
    if proto not in _PROTOCOL_CAP:
        key = _key(listener, "ssl.protocol", config)
        raise ConfigError(key, f"Invalid value {proto} for configuration {key}: {proto} SSLContext not available")
    versions = sorted(_VERSIONS[p] for p in enabled)
    low, high = versions[0], min(versions[-1], _PROTOCOL_CAP[proto])
    suites = listener_config(config, listener, "ssl.cipher.suites") or []
    if suites:
        tls13 = [s for s in suites if _is_tls13_suite(s)]
        tls12 = [_openssl_cipher_name(s) for s in suites if not _is_tls13_suite(s)]
        if not tls13:
            high = min(high, ssl.TLSVersion.TLSv1_2)
        if not tls12:
            low = max(low, ssl.TLSVersion.TLSv1_3)
        else:
            key = _key(listener, "ssl.cipher.suites", config)
            try:
                ctx.set_ciphers(":".join(tls12))
            except ssl.SSLError:
                raise ConfigError(key, f"Invalid value {','.join(suites)} for configuration {key}: "
                                       "no cipher suite of the list is supported") from None
    if low > high:
        raise ConfigError(enabled_key, f"Invalid value {','.join(enabled)} for configuration {enabled_key}: no "
                          f"enabled protocol is allowed by ssl.protocol={proto} and ssl.cipher.suites")
    ctx.minimum_version, ctx.maximum_version = low, high


def _is_tls13_suite(name: str) -> bool:
    return name.startswith("TLS_") and "_WITH_" not in name


def _openssl_cipher_name(iana: str) -> str:
    """``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` -> ``ECDHE-RSA-AES128-GCM-SHA256`` (the names the
    JSSE takes -> OpenSSL's); a name without ``_WITH_`` is passed through."""
    if "_WITH_" not in iana:
        return iana
    kx, cipher = iana.removeprefix("TLS_").removeprefix("SSL_").split("_WITH_", 1)
    cipher = re.sub(r"^AES_(\d+)", r"AES\1", cipher).replace("_CBC", "")
    cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305")
    parts = ([] if kx == "RSA" else [kx.replace("_", "-")]) + [cipher.replace("_", "-")]
    name = "-".join(parts)
    return name.replace("-SHA1", "-SHA") if name.endswith("-SHA1") else name


def server_context(config, listener_name: str) -> ssl.SSLContext | None:
    """The TLS context of listener ``listener_name``, or ``None`` if it is not SSL/SASL_SSL.
    Raises :class:`ConfigError` (missing or unreadable key store, non-PEM store types, bad
    protocols or cipher suites)."""
    if not is_tls(config, listener_name):
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, config, listener_name)
    if not _load_key_store(ctx, config, listener_name):
        raise ConfigError(_key(listener_name, "ssl.keystore.location", config),
                          f"SSL listener {listener_name.upper()} has no key store: set ssl.keystore.location (PEM) or "
                          "ssl.keystore.certificate.chain and ssl.keystore.key, optionally with the prefix "
                          f"listener.name.{listener_name.lower()}.")
    auth = listener_config(config, listener_name, "ssl.client.auth")
    if listener_config(config, listener_name, "ssl.engine.factory.class") is not None:
        raise ConfigError(_key(listener_name, "ssl.engine.factory.class", config),
                          "custom SSL engine factories (Java classes) cannot be loaded by kcompat")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        _load_trust_store(ctx, config, listener_name, ssl.Purpose.CLIENT_AUTH)
    # the mapping rules are checked at start-up: an invalid rule must stop it, as in Kafka
    rules_key = _key(listener_name, "ssl.principal.mapping.rules", config)
    try:
        SslPrincipalMapper(listener_config(config, listener_name, "ssl.principal.mapping.rules"))
    except ValueError as e:
        raise ConfigError(rules_key, f"Invalid value for configuration {rules_key}: {e}") from None
    return ctx


def client_context(config, listener_name: str) -> ssl.SSLContext | None:
    """The TLS context for connecting to other nodes' listener ``listener_name``, or ``None`` if
    it is not SSL/SASL_SSL. The peer's certificate must chain to the trust store; its host name
    is checked unless ``ssl.endpoint.identification.algorithm`` is empty. Raises ConfigError."""
    if not is_tls(config, listener_name):
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = listener_config(config, listener_name, "ssl.endpoint.identification.algorithm")
    ctx.check_hostname = bool(algorithm)
    ctx.verify_mode = ssl.CERT_REQUIRED
    _set_protocols(ctx, config, listener_name)
    _load_key_store(ctx, config, listener_name)
    _load_trust_store(ctx, config, listener_name, ssl.Purpose.SERVER_AUTH)
    return ctx


def keystore_leaf_der(config, listener_name: str) -> bytes | None:
    """The DER of the first certificate of the listener's key store (its own certificate), None
    without a key store. Raises ConfigError when the store cannot be read."""
    g = lambda n: listener_config(config, listener_name, n)   # noqa: E731
    kind, path, chain = g("ssl.keystore.type"), g("ssl.keystore.location"), g("ssl.keystore.certificate.chain")
    location_key = _key(listener_name, "ssl.keystore.location", config)
    if chain is not None:
        text = chain
    elif path is None:
        return None
    elif kind == PKCS12:
        text = pkcs12.keystore_pem(path, g("ssl.keystore.password") or "", location_key,
                                   _key(listener_name, "ssl.keystore.type", config))[0]
    else:
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(location_key, f"Failed to load PEM SSL keystore {path}: {e.strerror}") from None
    for block in re.finditer(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", normalize_pem(text), re.S):
        return ssl.PEM_cert_to_DER_cert(block.group(0))
    return None


def reload_client_context(ctx: ssl.SSLContext, config, listener_name: str) -> None:
    """Load ``listener_name``'s current key store into the client context ``ctx`` in place (new
    connections present the new certificate) and add its trust store's certificates (OpenSSL
    cannot forget trusted CAs; a removed CA stays trusted until the next start). Raises
    ConfigError, leaving ``ctx`` unchanged, when the new stores do not load."""
    client_context(config, listener_name)   # the whole configuration loads, or nothing changes
    _load_key_store(ctx, config, listener_name)
    _load_trust_store(ctx, config, listener_name, ssl.Purpose.SERVER_AUTH)


def validate_listeners(config) -> None:
    """Build the server context of every SSL/SASL_SSL listener of ``config.listeners`` (and the
    client context of the controller listeners a broker-only node connects to), so a bad TLS
    config stops the start with a :class:`ConfigError`."""
    names = [ep.name for ep in config.listeners]
    for name in names:
        server_context(config, name)
    for name in config.controller_listener_names:
        if name not in names:
            client_context(config, name)
