"""A throw-away certificate authority made at run time (never a committed key), shared by the
conformance suite's ``security`` group (:mod:`conformance.security`) and kcompat's TLS tests
(``tests/security/certs.py`` re-exports it).

Uses the ``cryptography`` package (test dependency). Keys are EC P-256 (fast to generate; Java,
librdkafka, kafka-python and OpenSSL all take them), private keys are PKCS#8 PEM (what Kafka's
``ssl.keystore.type=PEM`` reads).

API::

    ca = TestCA(tmp_path)                       # CA key + self-signed cert; ca.ca_path, ca.ca_pem
    server = ca.issue("broker")                 # SANs localhost and 127.0.0.1 by default
    alice = ca.issue("alice", subject={"OU": "eng", "O": "Acme"}, key_password="s3cret")
    server.keystore_path      # PEM file: private key + certificate chain (ssl.keystore.location)
    server.cert_path, server.key_path   # certificate (chain) and key alone (librdkafka, kafka-python)
    server.chain_pem, server.key_pem    # the same as text (ssl.keystore.certificate.chain / .key)
    alice.dn                  # "CN=alice,OU=eng,O=Acme" as Kafka prints it (X500Principal.getName())
    ca.broker_ssl_props()     # ssl.* broker properties for a keystore (default: a fresh "broker" cert)
    ca.pkcs12_keystore(server, "pw"), ca.pkcs12_truststore()   # the same as PKCS12 files (Paths)
    other = TestCA(tmp_path / "other")          # an unrelated CA, for "untrusted" cases

``issue(name, *, subject=None, hosts=("localhost", "127.0.0.1"), key_password=None, days=2,
file_stem=None)``: ``name`` is the CN and the file stem (unless ``file_stem``: a renewal of a
certificate without overwriting its files); ``subject`` adds attributes (keys C, ST, L, O, OU, DC, UID,
STREET, ordered as given after CN, most specific first as Java prints them); ``hosts`` become DNS
or IP subject alternative names; ``key_password`` encrypts the key (PKCS#8, PBES2); certificates
are valid for server and client authentication.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_OIDS = {"CN": NameOID.COMMON_NAME, "C": NameOID.COUNTRY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME,
         "L": NameOID.LOCALITY_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
         "DC": NameOID.DOMAIN_COMPONENT, "UID": NameOID.USER_ID, "STREET": NameOID.STREET_ADDRESS}


@dataclass(frozen=True)
class IssuedCert:
    """One issued certificate and its key, as files and as PEM text; ``dn`` as Kafka prints it."""

    name: str
    dn: str
    cert_path: Path
    key_path: Path
    keystore_path: Path
    chain_pem: str
    key_pem: str
    key_password: str | None


def _pem_key(key, password: str | None) -> str:
    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc).decode()


class TestCA:
    """A CA in ``directory`` (created): ``ca_path`` (PEM certificate), ``ca_pem``; :meth:`issue`."""

    __test__ = False   # not a pytest test class

    def __init__(self, directory: Path, name: str = "kcompat test CA") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(hours=1))
                      .not_valid_after(now + datetime.timedelta(days=30))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()),
                                     critical=False)
                      .sign(self._key, hashes.SHA256()))
        self.ca_pem = self._cert.public_bytes(serialization.Encoding.PEM).decode()
        self.ca_path = self.dir / "ca.pem"
        self.ca_path.write_text(self.ca_pem)

    def issue(self, name: str, *, subject: dict[str, str] | None = None,
              hosts: tuple[str, ...] = ("localhost", "127.0.0.1"), key_password: str | None = None,
              days: int = 2, file_stem: str | None = None) -> IssuedCert:
        """A certificate for ``name`` signed by this CA (see the module docstring)."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [("CN", name), *(subject or {}).items()]
        # X.509 Names list RDNs most general first; Java prints them most specific first
        rdn = x509.Name([x509.NameAttribute(_OIDS[k], v) for k, v in reversed(attrs)])
        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(rdn).issuer_name(self._cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=days))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                                  critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        chain_pem = cert.public_bytes(serialization.Encoding.PEM).decode() + self.ca_pem
        key_pem = _pem_key(key, key_password)
        stem = file_stem or name
        cert_path, key_path, store = (self.dir / f"{stem}.crt", self.dir / f"{stem}.key",
                                      self.dir / f"{stem}-keystore.pem")
        cert_path.write_text(chain_pem)
        key_path.write_text(key_pem)
        store.write_text(key_pem + chain_pem)
        for p in (key_path, store):
            p.chmod(0o600)
        dn = ",".join(f"{k}={v}" for k, v in attrs)
        return IssuedCert(name, dn, cert_path, key_path, store, chain_pem, key_pem, key_password)

    def pkcs12_keystore(self, cert: IssuedCert, password: str) -> Path:
        """``cert`` with its key and the CA as a PKCS12 file protected by ``password``
        (``ssl.keystore.type=PKCS12``)."""
        key = serialization.load_pem_private_key(
            cert.key_pem.encode(), cert.key_password.encode() if cert.key_password else None)
        leaf = x509.load_pem_x509_certificate(cert.chain_pem.encode())
        data = pkcs12.serialize_key_and_certificates(
            cert.name.encode(), key, leaf, [self._cert], serialization.BestAvailableEncryption(password.encode()))
        path = self.dir / f"{cert.name}-keystore.p12"
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def pkcs12_truststore(self, password: str | None = None) -> Path:
        """The CA certificate alone in a PKCS12 file (``ssl.truststore.type=PKCS12``)."""
        enc = serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
        data = pkcs12.serialize_key_and_certificates(None, None, None, [self._cert], enc)
        path = self.dir / "truststore.p12"
        path.write_bytes(data)
        return path

    def broker_ssl_props(self, cert: IssuedCert | None = None, prefix: str = "") -> dict[str, str]:
        """Broker properties for a PEM key store and this CA as trust store; ``prefix`` e.g.
        ``listener.name.internal.`` for per-listener settings."""
        cert = cert or self.issue("broker")
        props = {f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(cert.keystore_path),
                 f"{prefix}ssl.truststore.type": "PEM", f"{prefix}ssl.truststore.location": str(self.ca_path)}
        if cert.key_password:
            props[f"{prefix}ssl.key.password"] = cert.key_password
        return props
