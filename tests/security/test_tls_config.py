"""TLS configuration (issue 19): Kafka's ``SslPrincipalMapper`` rules (cases of Kafka's
SslPrincipalMapperTest), subject DNs as Java prints them, the ``ssl.*`` checks and messages of
Kafka's ``DefaultSslEngineFactory``, per-listener overrides, and the contexts at work on real
sockets: host name checks of the broker's own connections, enabled protocols, cipher suites."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from kcompat.broker.tls import tls_protocol_factory
from kcompat.config import BrokerConfig, ConfigError
from kcompat.security.ssl_context import client_context, normalize_pem, server_context
from kcompat.security.ssl_principal import NoMatchingRule, SslPrincipalMapper, subject_dn
from tests.security.certs import TestCA


# ---------------------------------------------------------------------------- principal mapping

@pytest.mark.parametrize("rules", [
    "DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/", "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules):
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)


def test_mapping_as_kafka():
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT"]))
    assert mapper.get_name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.get_name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.get_name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.get_name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.get_name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    comma = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert comma.get_name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=x$/y/").get_name("CN=z")


@pytest.mark.parametrize("expected,rules", [
    ("[]", ""), ("[DEFAULT]", "DEFAULT"), ("[RULE:/]", "RULE://"), ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"), ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "), ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "), ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected, rules):
    assert repr(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def _der(cert) -> bytes:
    first = cert.chain_pem.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    return ssl.PEM_cert_to_DER_cert(first)


def test_subject_dn_as_java_prints_it(tmp_path):
    ca = TestCA(tmp_path)
    alice = ca.issue("alice", subject={"OU": "Eng", "O": "Acme, Inc.", "L": "Zürich", "C": "CH"})
    assert subject_dn(_der(alice)) == "CN=alice,OU=Eng,O=Acme\\, Inc.,L=Zürich,C=CH"
    assert subject_dn(_der(ca.issue("svc", subject={"DC": "example"}))) == "CN=svc,DC=example"


# ---------------------------------------------------------------------------- configuration

@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def cert(ca):
    return ca.issue("broker", key_password="hush-123")


def _cfg(tmp_path, **props) -> BrokerConfig:
    base = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "log.dirs": str(tmp_path / "d")}
    return BrokerConfig({**base, **{k.replace("_", "."): v for k, v in props.items()}})


def _error(cfg, listener="SSL") -> ConfigError:
    with pytest.raises(ConfigError) as e:
        server_context(cfg, listener)
    return e.value


def test_store_rules_and_messages(tmp_path, ca, cert):
    pem = {"ssl.keystore.type": "PEM"}
    cases = [
        ({"ssl.keystore.location": str(cert.keystore_path)}, "ssl.keystore.type",
         "Invalid value JKS for configuration ssl.keystore.type: kcompat reads PEM and PKCS12 key stores"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tmp_path / "none.p12"),
          "ssl.keystore.password": "p"}, "ssl.keystore.location", "Failed to load SSL keystore"),
        ({"ssl.keystore.key": cert.key_pem}, "ssl.keystore.type",
         "SSL private key can be specified only for PEM, but key store type is JKS."),
        ({**pem, "ssl.keystore.key": cert.key_pem}, "ssl.keystore.certificate.chain",
         "SSL private key is specified, but certificate chain is not specified."),
        ({**pem, "ssl.keystore.certificate.chain": cert.chain_pem}, "ssl.keystore.certificate.chain",
         "SSL certificate chain is specified, but private key is not specified"),
        ({**pem, "ssl.keystore.key": cert.key_pem, "ssl.keystore.certificate.chain": cert.chain_pem,
          "ssl.keystore.location": str(cert.keystore_path)}, "ssl.keystore.location",
         "Both SSL key store location and separate private key are specified."),
        ({**pem, "ssl.keystore.location": str(cert.keystore_path), "ssl.keystore.password": "p"},
         "ssl.keystore.password", "SSL key store password cannot be specified with PEM format"),
        ({}, "ssl.keystore.location", "SSL listener SSL has no key store"),
        ({**pem, "ssl.keystore.location": str(cert.keystore_path), "ssl.key.password": "not-it"},
         "ssl.keystore.location", "Failed to load PEM SSL keystore"),
        ({**pem, "ssl.keystore.location": str(cert.keystore_path), "ssl.key.password": "hush-123",
          "ssl.client.auth": "required", "ssl.truststore.certificates": ca.ca_pem}, "ssl.truststore.type",
         "SSL trust store certs can be specified only for PEM, but trust store type is JKS."),
        ({**pem, "ssl.keystore.location": str(cert.keystore_path), "ssl.key.password": "hush-123",
          "ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "ssl.enabled.protocols", "unsupported protocol SSLv3"),
        ({**pem, "ssl.keystore.location": str(cert.keystore_path), "ssl.key.password": "hush-123",
          "ssl.cipher.suites": "TLS_NOT_A_SUITE_WITH_NOTHING"}, "ssl.cipher.suites", "no cipher suite"),
    ]
    for props, key, fragment in cases:
        e = _error(_cfg(tmp_path, **props))
        assert e.key == key, (props, e)
        assert fragment in e.message, (props, e.message)
        assert "hush-123" not in e.message and "not-it" not in e.message
        assert "PRIVATE KEY" not in e.message


def test_per_listener_overrides_win(tmp_path, ca, cert):
    cfg = _cfg(tmp_path, listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
               **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
                  **ca.broker_ssl_props(cert), "ssl.client.auth": "none",
                  "listener.name.mtls.ssl.client.auth": "required",
                  "listener.name.mtls.ssl.enabled.protocols": "TLSv1.2"})
    assert server_context(cfg, "PLAINTEXT") is None and client_context(cfg, "PLAINTEXT") is None
    assert server_context(cfg, "SSL").verify_mode == ssl.CERT_NONE
    mtls = server_context(cfg, "MTLS")
    assert mtls.verify_mode == ssl.CERT_REQUIRED
    assert mtls.maximum_version == ssl.TLSVersion.TLSv1_2
    assert "listener.name.mtls.ssl.client.auth" not in cfg.ignored_keys()
    bad = _cfg(tmp_path, **{"listener.name.ssl.ssl.client.auth": "sometimes", **ca.broker_ssl_props(cert)})
    assert _error(bad).key == "listener.name.ssl.ssl.client.auth"


def test_inline_pem_joined_lines_are_rewrapped(cert):
    joined = cert.key_pem.replace("\n", "")
    assert normalize_pem(joined) == cert.key_pem


# ---------------------------------------------------------------------------- on real sockets

class _Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


async def _exchange(server_cfg, client_ctx, server_hostname="127.0.0.1"):
    """Serve ``server_cfg``'s SSL listener (kcompat's TLS accept path) with an echo, connect with
    ``client_ctx``: (TLS version, cipher) of the session. Raises the client's SSL error."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(tls_protocol_factory(_Echo, server_cfg, "SSL"), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname=server_hostname), 30)
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.readexactly(4), 30) == b"ping"
        obj = writer.get_extra_info("ssl_object")
        result = obj.version(), obj.cipher()[0]
        writer.close()
        return result
    finally:
        server.close()


def test_broker_client_checks_host_names_unless_disabled(tmp_path, ca):
    elsewhere = ca.issue("elsewhere", hosts=("broker.example.invalid",))
    props = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL", **ca.broker_ssl_props(elsewhere)}
    cfg = _cfg(tmp_path, **props)
    with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch|Hostname mismatch"):
        asyncio.run(_exchange(cfg, client_context(cfg, "SSL")))
    lax = _cfg(tmp_path, **props, **{"listener.name.ssl.ssl.endpoint.identification.algorithm": ""})
    assert asyncio.run(_exchange(lax, client_context(lax, "SSL")))[0] in ("TLSv1.2", "TLSv1.3")
    other = TestCA(tmp_path / "other")   # a server certificate of an untrusted CA fails even without the check
    untrusted = _cfg(tmp_path, **{**props, **other.broker_ssl_props(),
                                  "listener.name.ssl.ssl.endpoint.identification.algorithm": ""})
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(_exchange(untrusted, client_context(lax, "SSL")))


def test_enabled_protocols_and_cipher_suites(tmp_path, ca, cert):
    props = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL", **ca.broker_ssl_props(cert)}
    client = ssl.create_default_context(cafile=str(ca.ca_path))
    assert asyncio.run(_exchange(_cfg(tmp_path, **props), client))[0] == "TLSv1.3"
    v12 = _cfg(tmp_path, **props, **{"ssl.enabled.protocols": "TLSv1.2"})
    assert asyncio.run(_exchange(v12, client))[0] == "TLSv1.2"
    suite = _cfg(tmp_path, **props, **{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"})
    assert asyncio.run(_exchange(suite, client)) == ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    v13_only = ssl.create_default_context(cafile=str(ca.ca_path))
    v13_only.minimum_version = ssl.TLSVersion.TLSv1_3
    with pytest.raises((ssl.SSLError, ConnectionError)):   # an alert, or the close that follows it
        asyncio.run(_exchange(v12, v13_only))


def test_pkcs12_stores(tmp_path, ca, cert):
    """PKCS12 key and trust stores (read with the cryptography package), Kafka's password rule,
    and a wrong password refused without being echoed."""
    store = ca.pkcs12_keystore(cert, "p12-secret")
    props = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
             "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
             "ssl.keystore.password": "p12-secret", "ssl.truststore.type": "PKCS12",
             "ssl.truststore.location": str(ca.pkcs12_truststore("t-secret")), "ssl.truststore.password": "t-secret",
             "ssl.client.auth": "required"}
    cfg = _cfg(tmp_path, **props)
    client = ssl.create_default_context(cafile=str(ca.ca_path))
    alice = ca.issue("alice")
    client.load_cert_chain(str(alice.cert_path), str(alice.key_path))
    assert asyncio.run(_exchange(cfg, client))[0] == "TLSv1.3"
    # the broker's client side with the same stores (its inter-broker connections)
    assert asyncio.run(_exchange(cfg, client_context(cfg, "SSL")))[0] == "TLSv1.3"
    e = _error(_cfg(tmp_path, **{**props, "ssl.keystore.password": "not-it"}))
    assert e.key == "ssl.keystore.location" and "wrong password" in e.message and "not-it" not in e.message
    e = _error(_cfg(tmp_path, **{k: v for k, v in props.items() if k != "ssl.keystore.password"}))
    assert e.message.endswith("SSL key store is specified, but key store password is not specified.")
    e = _error(_cfg(tmp_path, **{**props, "ssl.keystore.type": "JKS"}))
    assert "kcompat reads PEM and PKCS12 key stores" in e.message


def test_a_dn_no_rule_maps_fails_the_authentication(tmp_path, ca, cert):
    """Kafka's principal builder throws when no mapping rule applies: the connection is closed
    after the handshake, with a log line."""
    cfg = _cfg(tmp_path, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
                            **ca.broker_ssl_props(cert), "ssl.client.auth": "required",
                            "ssl.principal.mapping.rules": "RULE:^CN=(svc-.*)$/$1/"})
    made = []

    class _App(_Echo):
        def connection_made(self, transport):
            made.append(transport)
            super().connection_made(transport)

        def close(self, reason):
            made.append(reason)
            self.transport.close()
    client = ssl.create_default_context(cafile=str(ca.ca_path))
    alice = ca.issue("alice")
    client.load_cert_chain(str(alice.cert_path), str(alice.key_path))

    async def run():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(tls_protocol_factory(_App, cfg, "SSL"), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="127.0.0.1")
        writer.write(b"ping")
        data = await asyncio.wait_for(reader.read(4), 30)
        writer.close()
        server.close()
        return data
    assert asyncio.run(run()) == b""
    assert len(made) == 2 and "failed authentication on TLS listener SSL: No rules apply to CN=alice" in made[1]


def test_rotation_reaches_the_brokers_own_client_contexts(tmp_path, ca):
    """KIP-226 on the client side: a new ``listener.name.ssl.ssl.keystore.location`` is loaded in
    place into the context the broker's NodeClients already hold (inter-broker and controller
    connections), so the next connection presents the new certificate."""
    from kcompat.broker.tls import inter_broker_ssl, reload_listener_contexts

    node_a, node_b = ca.issue("node-a"), ca.issue("node-b")
    cfg = _cfg(tmp_path, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
                            "inter.broker.listener.name": "SSL", "ssl.client.auth": "required",
                            "ssl.allow.dn.changes": "true",   # node-a -> node-b changes the DN
                            **ca.broker_ssl_props(node_a, prefix="listener.name.ssl.")})

    class _WhoAreYou(asyncio.Protocol):
        def connection_made(self, transport):
            cert = transport.get_extra_info("ssl_object").getpeercert()
            transport.write(dict(x[0] for x in cert["subject"])["commonName"].encode())
            transport.close()

    async def run() -> None:
        server = await asyncio.get_running_loop().create_server(
            tls_protocol_factory(_WhoAreYou, cfg, "SSL"), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def peer_name_seen() -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="127.0.0.1")
            name = await asyncio.wait_for(reader.read(100), 30)
            writer.close()
            return name

        assert await peer_name_seen() == b"node-a"
        assert reload_listener_contexts(cfg) == []
        cfg.alter_dynamic({"listener.name.ssl.ssl.keystore.location": str(node_b.keystore_path)}, per_broker=True)
        assert reload_listener_contexts(cfg) == ["SSL", "SSL (client)"]   # the listener's server side too
        assert await peer_name_seen() == b"node-b"
        cfg.alter_dynamic({"listener.name.ssl.ssl.keystore.location": str(tmp_path / "gone.pem")}, per_broker=True)
        assert reload_listener_contexts(cfg) == []    # logged; the current stores stay
        assert await peer_name_seen() == b"node-b"
        server.close()

    client = inter_broker_ssl(cfg)
    asyncio.run(run())


def test_rotation_keeps_the_identity_unless_allowed(tmp_path, ca, caplog):
    """Kafka's SslFactory rule for a key store replaced at runtime: the new certificate keeps the
    subject DN (``ssl.allow.dn.changes``) and every SAN of the old one (``ssl.allow.san.changes``)."""
    from kcompat.broker.tls import reload_listener_contexts

    old = ca.issue("broker", file_stem="id-old")
    fewer_sans = ca.issue("broker", hosts=("localhost",), file_stem="id-fewer")
    more_sans = ca.issue("broker", hosts=("localhost", "127.0.0.1", "broker.example"), file_stem="id-more")
    cfg = _cfg(tmp_path, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
                            **ca.broker_ssl_props(old, prefix="listener.name.ssl.")})
    tls_protocol_factory(_Echo, cfg, "SSL")

    def rotate(cfg, cert) -> list[str]:
        cfg.alter_dynamic({"listener.name.ssl.ssl.keystore.location": str(cert.keystore_path)}, per_broker=True)
        return reload_listener_contexts(cfg)
    assert rotate(cfg, fewer_sans) == []
    assert "Keystore SubjectAltNames do not match" in caplog.text and "IP:127.0.0.1" in caplog.text
    assert rotate(cfg, more_sans) == ["SSL"]
    lax = _cfg(tmp_path, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
                            **ca.broker_ssl_props(old, prefix="listener.name.ssl."), "ssl.allow.san.changes": "true"})
    tls_protocol_factory(_Echo, lax, "SSL")
    assert rotate(lax, fewer_sans) == ["SSL"]
