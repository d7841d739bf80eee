"""Delegation tokens (KIP-48) side by side: kcompat and Apache Kafka 4.3.1 with the same SASL
listener and ``delegation.token.secret.key`` get the same raw requests and must answer alike.

Compared (timestamps as differences, token ids and HMACs as labels and lengths): the four APIs
over PLAINTEXT, creating tokens at v1 and v3 (renewers, another owner, a renewer that is not a
``User``), describing them as owner, renewer, another user, with an empty and a named owner list,
renewing and expiring as owner, renewer and stranger and with unknown HMACs, SCRAM logins with
the token (both mechanisms, a wrong HMAC, an unknown token id) and the session lifetime they get,
token requests over a token-authenticated connection, and a login after the token expired.
"""

from __future__ import annotations

import time

from kcompat.protocol.messages.create_delegation_token import CreateDelegationTokenRequest as C
from kcompat.protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest as D
from kcompat.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest as X
from kcompat.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest as RN
from kcompat.testing import wire
from kcompat.testing.process import wait_for
from tests.security.sasl_support import assert_answers_as_kafka, closed_by_broker, reference_probes
from tests.security.token_support import SECRET, call, plain_login, token_login

USERS = {"admin": "admin-secret-7d1", "alice": "alice-secret-93a", "bob": "bob-secret-c4e", "carol": "carol-pw-11"}
PROPS = {
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
        f"password=\"{USERS['admin']}\" " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "delegation.token.secret.key": SECRET,
}
DAY = 24 * 3600 * 1000
WEEK = 7 * DAY


def _login(sasl: str, user: str):
    return plain_login(sasl, user, USERS[user])


def _near(value: int, expected: int, slack: int = 15_000) -> bool:
    return abs(value - expected) <= slack


def _created(r, labels: dict) -> tuple:
    labels.setdefault(r.token_id, f"token{len(labels)}" if r.token_id else "")
    return (r.error_code, r.principal_type, r.principal_name, r.token_requester_principal_type,
            r.token_requester_principal_name, labels[r.token_id], len(bytes(r.hmac)),
            r.expiry_timestamp_ms - r.issue_timestamp_ms if r.error_code == 0 else r.expiry_timestamp_ms,
            r.max_timestamp_ms - r.issue_timestamp_ms if r.error_code == 0 else r.max_timestamp_ms,
            r.error_code == 0 and _near(r.issue_timestamp_ms, int(time.time() * 1000)) or r.issue_timestamp_ms)


def _described(r, labels: dict, hmacs: dict) -> tuple:
    return (r.error_code, sorted(
        (labels.get(t.token_id, "?"), t.principal_type, t.principal_name, t.token_requester_principal_type,
         t.token_requester_principal_name, hmacs.get(t.token_id) == bytes(t.hmac), t.max_timestamp - t.issue_timestamp,
         sorted((w.principal_type, w.principal_name) for w in t.renewers)) for t in r.tokens))


def _expiry(r, period: int) -> tuple:
    if r.error_code:
        return r.error_code, r.expiry_timestamp_ms
    return r.error_code, _near(r.expiry_timestamp_ms, int(time.time() * 1000) + period)


def _wait_visible(sock, count: int) -> None:
    """Until DescribeDelegationToken lists ``count`` tokens: Kafka's broker and controller learn
    of a committed token (or its removal) from their metadata publisher, a moment after the
    request was answered (kcompat's image has it at once)."""
    wait_for(lambda: len(call(sock, D(owners=None), 3).tokens) == count, 30.0, what=f"{count} tokens described")


def _wait_expiry(sock, token_id: str, expiry_ms: int) -> None:
    """Until DescribeDelegationToken shows ``token_id`` expiring at ``expiry_ms``: Kafka's broker
    answers a SCRAM token login from its token cache, which learns of a renewal from its metadata
    publisher a moment after the controller answered RenewDelegationToken (kcompat's at once)."""
    wait_for(lambda: any(t.token_id == token_id and t.expiry_timestamp == expiry_ms
                         for t in call(sock, D(owners=None), 3).tokens),
             30.0, what=f"token {token_id} described as expiring at {expiry_ms}")


def probes(plain: str, sasl: str) -> dict:
    out: dict = {}
    labels: dict = {}
    hmacs: dict = {}
    for name, req, version in (("create", C(renewers=[], max_lifetime_ms=-1), 3), ("describe", D(owners=None), 3),
                               ("renew", RN(hmac=b"x", renew_period_ms=-1), 2),
                               ("expire", X(hmac=b"x", expiry_time_period_ms=-1), 2)):
        r = wire.call(plain, req, version)
        out[f"{name} over PLAINTEXT"] = _created(r, labels) if name == "create" else (
            (r.error_code, len(r.tokens)) if name == "describe" else (r.error_code, r.expiry_timestamp_ms))
    alice, bob, carol = (_login(sasl, u) for u in ("alice", "bob", "carol"))
    bob_renews = [C.CreatableRenewers(principal_type="User", principal_name="bob")]
    r = call(alice, C(renewers=bob_renews, max_lifetime_ms=-1), 3)
    out["create v3 with renewer bob"] = _created(r, labels)
    tok, hmacs[r.token_id] = r, bytes(r.hmac)
    r = call(alice, C(renewers=[], max_lifetime_ms=3_600_000), 1)
    out["create v1 max lifetime 1 h"] = _created(r, labels)
    short, hmacs[r.token_id] = r, bytes(r.hmac)
    r = call(alice, C(owner_principal_type="User", owner_principal_name="carol", renewers=[], max_lifetime_ms=-1), 3)
    out["create v3 for owner carol"] = _created(r, labels)
    hmacs[r.token_id] = bytes(r.hmac)
    _wait_visible(alice, 3)   # Kafka's brokers see a new token once its records reach their image
    # and its controller (a metadata publisher of its own) before it renews or expires it
    wait_for(lambda: call(carol, RN(hmac=short.hmac, renew_period_ms=1), 2).error_code != 62, 30.0,
             what="the controller knowing the tokens")
    out["create v2 with a Group renewer"] = _created(call(alice, C(renewers=[C.CreatableRenewers(
        principal_type="Group", principal_name="g")], max_lifetime_ms=-1), 2), labels)
    for who, sock in (("alice", alice), ("bob", bob), ("carol", carol)):
        out[f"describe all as {who}"] = _described(call(sock, D(owners=None), 3), labels, hmacs)
    out["describe v1 as alice"] = _described(call(alice, D(owners=None), 1), labels, hmacs)
    out["describe no owners"] = _described(call(alice, D(owners=[]), 3), labels, hmacs)
    out["describe owner carol"] = _described(call(alice, D(owners=[D.DescribeDelegationTokenOwner(
        principal_type="User", principal_name="carol")]), 3), labels, hmacs)
    out["renew as carol"] = _expiry(call(carol, RN(hmac=tok.hmac, renew_period_ms=60_000), 2), 60_000)
    out["renew as bob"] = _expiry(call(bob, RN(hmac=tok.hmac, renew_period_ms=60_000), 2), 60_000)
    r = call(alice, RN(hmac=tok.hmac, renew_period_ms=-1), 1)
    out["renew as alice, v1, default period"] = _expiry(r, DAY)
    _wait_expiry(alice, tok.token_id, r.expiry_timestamp_ms)   # the token logins below get their
    # session lifetime from the expiry the broker's cache holds
    out["renew beyond the max lifetime"] = _expiry(call(alice, RN(hmac=short.hmac, renew_period_ms=WEEK), 2),
                                                   short.max_timestamp_ms - int(time.time() * 1000))
    out["renew unknown hmac"] = _expiry(call(alice, RN(hmac=b"\0" * 64, renew_period_ms=-1), 2), 0)
    out["expire unknown hmac"] = _expiry(call(alice, X(hmac=b"\0" * 64, expiry_time_period_ms=-1), 2), 0)
    out["expire as carol"] = _expiry(call(carol, X(hmac=tok.hmac, expiry_time_period_ms=1000), 2), 1000)
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        sock, r = token_login(sasl, tok.token_id, tok.hmac, mech)
        out[f"token login {mech}"] = (r.error_code, r.error_message, _near(r.session_lifetime_ms, DAY))
        if mech == "SCRAM-SHA-512":
            out["create on a token connection"] = _created(call(sock, C(renewers=[], max_lifetime_ms=-1), 3), labels)
            out["describe on a token connection"] = _described(call(sock, D(owners=None), 3), labels, hmacs)
            out["renew on a token connection"] = _expiry(call(sock, RN(hmac=tok.hmac, renew_period_ms=-1), 2), 0)
            out["expire on a token connection"] = _expiry(call(sock, X(hmac=tok.hmac, expiry_time_period_ms=-1), 2), 0)
        sock.close()
    sock, r = token_login(sasl, tok.token_id, b"\1" * 64)
    out["token login, wrong hmac"] = (r.error_code, r.error_message, closed_by_broker(sock))
    sock, r = token_login(sasl, "no-such-token", tok.hmac)
    out["token login, unknown token"] = (r.error_code, r.error_message, closed_by_broker(sock))
    out["expire as bob, 5 s"] = _expiry(call(bob, X(hmac=tok.hmac, expiry_time_period_ms=5000), 2), 5000)
    out["expire as alice, now"] = _expiry(call(alice, X(hmac=tok.hmac, expiry_time_period_ms=-1), 1), 0)
    _wait_visible(alice, 2)   # Kafka's broker forgets the token once the removal reaches its image
    sock, r = token_login(sasl, tok.token_id, tok.hmac)
    out["token login after expire"] = (r.error_code, r.error_message)
    out["renew after expire"] = _expiry(call(alice, RN(hmac=tok.hmac, renew_period_ms=-1), 2), 0)
    out["describe after expire"] = _described(call(alice, D(owners=None), 3), labels, hmacs)
    return out


def test_kcompat_answers_delegation_token_requests_as_kafka_4_3_1(tmp_path_factory, tmp_path):
    kafka_answers = reference_probes(tmp_path_factory, probes, PROPS)
    assert_answers_as_kafka(kafka_answers, probes, PROPS, tmp_path)
