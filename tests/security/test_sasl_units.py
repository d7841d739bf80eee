"""The pure parts of SASL: the JAAS parser, the PLAIN/SCRAM/OAUTHBEARER exchanges, the SCRAM
credential control (Kafka's ScramControlManager / ScramImage errors), the image's SCRAM records
and the connection state machine's gate (what Kafka's SaslServerAuthenticator lets through)."""

from __future__ import annotations

import json
import time

import jwt
import pytest
import scramp
from cryptography.hazmat.primitives.asymmetric import ec

from kcompat.kraft import scram_control
from kcompat.kraft.image import MetadataImage
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest as AReq
from kcompat.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest as DReq
from kcompat.security.jaas import parse_jaas_config, plain_users
from kcompat.security.oauth import JwksValidator, OAuthBearerServerExchange, UnsecuredValidator, unsecured_token
from kcompat.security.sasl_config import ListenerSasl
from kcompat.security.sasl_plain import PlainServerExchange, SaslFailure
from kcompat.security.sasl_server import AUTHENTICATE, COMPLETE, FAILED, SaslSession
from kcompat.security.scram import ScramAuthenticationError, ScramServerExchange, make_credential


# -- JAAS --------------------------------------------------------------------------------------------

def test_jaas_entries_options_and_escapes():
    entries = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="a\\"b\\\\c" user_admin="x" user_bob=plainword;\n'
        'org.apache.kafka.common.security.scram.ScramLoginModule optional;')
    assert [e.module.rsplit(".", 1)[1] for e in entries] == ["PlainLoginModule", "ScramLoginModule"]
    assert entries[0].options["password"] == 'a"b\\c' and entries[1].flag == "optional"
    assert plain_users(entries[0]) == {"admin": "x", "bob": "plainword"}


@pytest.mark.parametrize("text,message", [
    ("x.Module", "control flag"),
    ("x.Module sometimes;", "control flag"),
    ('x.Module required user_a="s3cret"', "not terminated by semi-colon"),
    ("x.Module required user_a;", "malformed option"),
])
def test_jaas_errors_never_repeat_values(text, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_jaas_config(text)
    assert "s3cret" not in str(info.value)


# -- PLAIN -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("token,message", [
    (b"alice\0pw", "expected 3 tokens, got 2"),
    (b"\0\0pw", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"\0alice\0wrong", "Invalid username or password"),
    (b"\0nobody\0pw", "Invalid username or password"),
    (b"bob\0alice\0pw", "authorization id that is different"),
])
def test_plain_failures(token, message):
    with pytest.raises(SaslFailure, match=message):
        PlainServerExchange({"alice": "pw"}).evaluate(token)


# -- SCRAM -------------------------------------------------------------------------------------------

def _lookup(password="pw-1", iterations=4096):
    cred = make_credential(2, password, iterations)
    return lambda user: cred if user == "alice" else None


def test_scram_exchange_with_scramp_client():
    server = ScramServerExchange("SCRAM-SHA-512", _lookup())
    client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "pw-1")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())
    assert server.complete and server.username == "alice"


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "pw-1")])
def test_scram_failures_say_the_same(user, password):
    server = ScramServerExchange("SCRAM-SHA-512", _lookup())
    client = scramp.ScramClient(["SCRAM-SHA-512"], user, password)
    with pytest.raises(ScramAuthenticationError) as info:
        client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
        server.evaluate(client.get_client_final().encode())
    assert info.value.message == ("Authentication failed during authentication due to invalid credentials "
                                  "with SASL mechanism SCRAM-SHA-512")


def test_scram_authzid_refused():
    server = ScramServerExchange("SCRAM-SHA-512", _lookup())
    with pytest.raises(ScramAuthenticationError, match="invalid credentials") as info:
        server.evaluate(b"n,a=bob,n=alice,r=abcdefgh")
    assert "authzid" in info.value.detail


# -- SCRAM credentials in the metadata log -------------------------------------------------------------

def _upsert(name, mechanism=1, iterations=4096):
    return AReq.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations,
                                         salt=b"salt-1234", salted_password=b"\x01" * 32)


def _apply(image, records):
    for i, r in enumerate(records):
        image.apply(r, image.offset + 1 + i)


def test_alter_credentials_errors_as_kafka():
    image = MetadataImage()
    records, resp = scram_control.alter_credentials(image, AReq(deletions=[
        AReq.ScramCredentialDeletion(name="ghost", mechanism=1),
        AReq.ScramCredentialDeletion(name="", mechanism=1),
    ], upsertions=[
        _upsert("alice"), _upsert("few", iterations=100), _upsert("many", iterations=20000),
        _upsert("odd", mechanism=3), _upsert("twice"), _upsert("twice", mechanism=2),
    ]))
    got = {r.user: (r.error_code, r.error_message) for r in resp.results}
    assert got == {
        "alice": (0, None),
        "ghost": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "odd": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
    }
    assert [(type(r).__name__, r.name) for r in records] == [("UserScramCredentialRecord", "alice")]
    assert b"\x01" * 32 not in (records[0].stored_key + records[0].server_key)   # never the salted password


def test_credentials_replayed_described_deleted_and_in_snapshots():
    image = MetadataImage()
    records, _ = scram_control.alter_credentials(image, AReq(upsertions=[_upsert("alice"), _upsert("bob", 2, 8192)]))
    _apply(image, records)
    copy = MetadataImage()
    _apply(copy, image.to_records())
    assert set(copy.scram) == {(1, "alice"), (2, "bob")}
    resp = scram_control.describe_credentials(image, DReq(users=None))
    assert {(r.user, tuple((c.mechanism, c.iterations) for c in r.credential_infos)) for r in resp.results} == \
        {("alice", ((1, 4096),)), ("bob", ((2, 8192),))}
    resp = scram_control.describe_credentials(image, DReq(users=[DReq.UserName(name=n) for n in ("x", "bob", "bob")]))
    assert [(r.user, r.error_code) for r in resp.results] == \
        [("x", ErrorCode.RESOURCE_NOT_FOUND), ("bob", ErrorCode.DUPLICATE_RESOURCE)]
    records, resp = scram_control.alter_credentials(image, AReq(deletions=[AReq.ScramCredentialDeletion(name="bob",
                                                                                                        mechanism=2)]))
    _apply(image, records)
    assert resp.results[0].error_code == 0 and set(image.scram) == {(1, "alice")}


# -- OAUTHBEARER -------------------------------------------------------------------------------------

def _message(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def test_unsecured_validator_claims_and_scope():
    v = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "user", "unsecuredValidatorRequiredScope": "a b"})
    ex = OAuthBearerServerExchange(v)
    assert ex.evaluate(_message(unsecured_token("carol", claim="user", scope=["a", "b", "c"]))) == b"" \
        and ex.username == "carol"
    ex = OAuthBearerServerExchange(v)
    assert ex.evaluate(_message(unsecured_token("carol", claim="user", scope="a b"))) == \
        b'{"status":"insufficient_scope", "scope":"[a, b]"}'
    with pytest.raises(SaslFailure, match='insufficient_scope'):
        ex.evaluate(b"\x01")
    ex = OAuthBearerServerExchange(UnsecuredValidator({}))
    with pytest.raises(SaslFailure, match="authorization id \\(mallory\\)"):
        ex.evaluate(_message(unsecured_token("carol"), authzid="mallory"))
    with pytest.raises(SaslFailure, match="invalid credentials with SASL mechanism OAUTHBEARER"):
        OAuthBearerServerExchange(UnsecuredValidator({})).evaluate(b"n,,\x01auth=Basic x y\x01\x01")


def test_jwks_validator_issuer_audience_and_kid(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk["kid"] = "ec1"
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    v = JwksValidator({"jwks_url": f"file://{tmp_path / 'jwks.json'}", "audience": ["aud-1"], "issuer": "iss-1",
                       "sub_claim": "client_id", "clock_skew_s": 0})
    now = int(time.time())

    def token(kid="ec1", **claims):
        body = {"client_id": "svc", "aud": "aud-1", "iss": "iss-1", "exp": now + 60, **claims}
        return jwt.encode(body, key, algorithm="ES256", headers={"kid": kid})
    principal, exp_ms = v.validate(token())
    assert principal == "svc" and exp_ms == (now + 60) * 1000
    for bad in (token(iss="other"), token(aud="other"), token(kid="nope"), token(exp=now - 5)):
        assert json.loads(OAuthBearerServerExchange(v).evaluate(_message(bad))) == {"status": "invalid_token"}


# -- the connection's gate ----------------------------------------------------------------------------

class _Conn:
    peer = "127.0.0.1:1"

    def __init__(self):
        self.closed = None

    def close(self, reason=None):
        self.closed = reason


def _frame(api_key: int, version: int = 0) -> bytes:
    return api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\0" * 8


def _session():
    settings = ListenerSasl("SASL_PLAINTEXT", "SASL_PLAINTEXT", ["PLAIN"], jaas={"PLAIN": parse_jaas_config(
        'x.PlainLoginModule required user_alice="pw";')[0]}, reauth_ms={"PLAIN": 0})
    return SaslSession(settings, MetadataImage(), {})


@pytest.mark.parametrize("keys,closed_at,answered", [
    ([18, 17, 36], None, False),         # ApiVersions, handshake, authenticate
    ([17, 36], None, False),             # no ApiVersions first
    ([18, 18], 1, False),                # ApiVersions twice
    ([3], 0, False),                     # Metadata before anything
    ([18, 17, 18], 2, True),             # ApiVersions after the handshake: ILLEGAL_SASL_STATE, then closed
    ([17, 17], 1, True),                 # a second handshake before authenticating: likewise
])
def test_gate_before_authentication(keys, closed_at, answered):
    s, conn = _session(), _Conn()
    for i, key in enumerate(keys):
        consumed = s.intercept(conn, _frame(key, 1))
        if closed_at == i:
            assert s.state == FAILED
            if answered:   # the connection answers it with ILLEGAL_SASL_STATE, then closes
                assert not consumed and conn.closed is None and s.reject_reason
            else:
                assert consumed and conn.closed and s.reject_reason is None
            assert s.intercept(conn, _frame(3, 1)) and conn.closed   # nothing more is served
            return
        assert not consumed and conn.closed is None
        if key == 17:
            assert s.handshake("PLAIN", 1)[0] == 0 and s.state == AUTHENTICATE
    assert closed_at is None


def test_gate_after_authentication_and_reauthentication():
    s, conn = _session(), _Conn()
    s.intercept(conn, _frame(17, 1))
    s.handshake("PLAIN", 1)
    assert s.authenticate(b"\0alice\0pw", 2)[0] == 0 and s.state == COMPLETE
    assert not s.intercept(conn, _frame(3, 9))                 # anything once authenticated
    assert not s.intercept(conn, _frame(17, 1))                # re-authentication begins
    assert s.handshake("SCRAM-SHA-256", 1)[0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM   # not enabled
    s2, conn2 = _session(), _Conn()
    s2.intercept(conn2, _frame(17, 1))
    s2.handshake("PLAIN", 1)
    s2.authenticate(b"\0alice\0pw", 0)                          # v0: the client cannot re-authenticate
    assert not s2.intercept(conn2, _frame(17, 1)) and s2.state == COMPLETE   # KafkaApis answers ILLEGAL_SASL_STATE


def _jwks(*keys_and_kids) -> str:
    out = []
    for key, kid in keys_and_kids:
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
        jwk["kid"] = kid
        out.append(jwk)
    return json.dumps({"keys": out})


def _es256(key, kid, sub="svc"):
    return jwt.encode({"sub": sub, "exp": int(time.time()) + 60}, key, algorithm="ES256", headers={"kid": kid})


def test_jwks_over_http_is_fetched_off_the_request_path_and_refetched_for_a_new_kid():
    import http.server
    import threading
    from kcompat.testing.process import wait_for
    k1, k2 = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    served = {"body": _jwks((k1, "k1"))}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = served["body"].encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        v = JwksValidator({"jwks_url": f"http://127.0.0.1:{server.server_port}/jwks", "audience": [],
                           "jwks_backoff_max_ms": 100})
        assert v.validate(_es256(k1, "k1"))[0] == "svc"
        served["body"] = _jwks((k1, "k1"), (k2, "k2"))   # the issuer rotates in a new key
        with pytest.raises(Exception, match="kid"):
            v.validate(_es256(k2, "k2"))                  # not known yet: refused, a fetch is triggered

        def accepted():
            try:
                return v.validate(_es256(k2, "k2"))[0] == "svc"
            except Exception:
                return False
        wait_for(accepted, 30, what="the rotated key fetched")
    finally:
        server.shutdown()


def test_jwks_file_is_read_again_when_it_changes(tmp_path):
    import os
    k1, k2 = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    path = tmp_path / "jwks.json"
    path.write_text(_jwks((k1, "k1")))
    v = JwksValidator({"jwks_url": f"file://{path}", "audience": []})
    assert v.validate(_es256(k1, "k1"))[0] == "svc"
    path.write_text(_jwks((k2, "k2")))
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))   # a new mtime even on coarse clocks
    assert v.validate(_es256(k2, "k2"))[0] == "svc"
    with pytest.raises(Exception, match="kid"):
        v.validate(_es256(k1, "k1"))


# -- bad input: only the exchanges' own failures, never another exception -------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


_TOKEN_TEXT = st.text(alphabet="n,=arcpsivyA01\x00\x01 auth=Bearer.", max_size=80).map(str.encode)


@settings(max_examples=300, deadline=None)
@given(first=st.one_of(st.binary(max_size=200), _TOKEN_TEXT), second=st.one_of(st.binary(max_size=200), _TOKEN_TEXT))
def test_random_tokens_only_fail_as_authentication_failures(first, second):
    exchanges = [PlainServerExchange({"alice": "pw"}), ScramServerExchange("SCRAM-SHA-256", _lookup()),
                 OAuthBearerServerExchange(UnsecuredValidator({}))]
    for ex in exchanges:
        try:
            ex.evaluate(first)
            ex.evaluate(second)
        except (SaslFailure, ScramAuthenticationError):
            pass
