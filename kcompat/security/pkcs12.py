"""PKCS12 key and trust stores (``ssl.keystore.type=PKCS12``, ``ssl.truststore.type=PKCS12``), read
with the ``cryptography`` package when it is installed (``pip install cryptography``); without it
kcompat reads PEM stores only and says so. JKS is never read (Java's own format).

Python's ``ssl`` loads keys from files only: :func:`keystore_pem` hands the private key back
re-encrypted with a one-time random password, so the PEM that
:mod:`kcompat.security.ssl_context` writes to a private temporary file for ``load_cert_chain``
never holds the key in clear.

Errors are :class:`kcompat.config.ConfigError` naming the config key, without any password.
"""

from __future__ import annotations

import secrets

from kcompat.config.errors import ConfigError


def _pkcs12(type_key: str):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:   # pragma: no cover - the test environment has it
        raise ConfigError(type_key, f"Invalid value PKCS12 for configuration {type_key}: reading PKCS12 stores needs "
                                    "the 'cryptography' package (pip install cryptography); or use PEM") from None
    return pkcs12


def _read(path: str, password: str | None, key_name: str, type_key: str, what: str):
    pkcs12 = _pkcs12(type_key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(key_name, f"Failed to load SSL {what} {path} of type PKCS12: {e.strerror}") from None
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except (ValueError, TypeError) as e:
        reason = "wrong password or damaged file" if "password" in str(e).lower() or "mac" in str(e).lower() \
            else type(e).__name__
        raise ConfigError(key_name, f"Failed to load SSL {what} {path} of type PKCS12: {reason}") from None


def keystore_pem(path: str, password: str, key_name: str, type_key: str) -> tuple[str, str, str]:
    """(certificate chain PEM, private key PEM encrypted with a one-time password, that password)
    of the PKCS12 key store at ``path``. ConfigError if it cannot be read or holds no key."""
    from cryptography.hazmat.primitives import serialization

    store = _read(path, password, key_name, type_key, "keystore")
    if store.key is None or store.cert is None:
        raise ConfigError(key_name, f"Failed to load SSL keystore {path} of type PKCS12: no private key entry")
    one_time = secrets.token_urlsafe(24)
    key_pem = store.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(one_time.encode())).decode()
    certs = [store.cert.certificate, *(c.certificate for c in store.additional_certs)]
    chain_pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
    return chain_pem, key_pem, one_time


def truststore_pem(path: str, password: str | None, key_name: str, type_key: str) -> str:
    """The certificates of the PKCS12 trust store at ``path`` as PEM (Java's trusted-certificate
    entries and any key entry's certificate). ConfigError if it cannot be read or holds none."""
    from cryptography.hazmat.primitives import serialization

    store = _read(path, password, key_name, type_key, "truststore")
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise ConfigError(key_name, f"Failed to load SSL truststore {path} of type PKCS12: no certificate")
    return "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
