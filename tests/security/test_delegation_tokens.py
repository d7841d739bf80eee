"""Delegation tokens (KIP-48) on kcompat processes, beyond what the side-by-side test with Kafka
4.3.1 compares: tokens kept across a restart (metadata log), expired tokens removed by the
controller every ``delegation.token.expiry.check.interval.ms``, no secret key (disabled), SCRAM
extensions other than ``tokenauth`` ignored, the CREATE_TOKENS and DESCRIBE_TOKENS ACLs with an
authorizer, and a 3-node cluster where tokens created, renewed and expired through any node
(forwarded to the active controller with the client's principal) authenticate on every node."""

from __future__ import annotations

import hashlib

import pytest

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest as AReq
from kcompat.protocol.messages.create_acls import CreateAclsRequest
from kcompat.protocol.messages.create_delegation_token import CreateDelegationTokenRequest as C
from kcompat.protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest as D
from kcompat.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest as X
from kcompat.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest as RN
from kcompat.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from kcompat.testing import wire
from kcompat.testing.cluster import Cluster, wait_until
from kcompat.testing.ports import free_ports
from kcompat.testing.process import wait_for
from tests.security.sasl_support import PASSWORDS, PLAIN_JAAS, logged
from tests.security.token_support import SECRET, call, plain_login, scram_exchange, token_broker, token_login

BOB_RENEWS = [C.CreatableRenewers(principal_type="User", principal_name="bob")]


def _create(sock, **kw):
    r = call(sock, C(renewers=kw.pop("renewers", BOB_RENEWS), max_lifetime_ms=kw.pop("max_lifetime_ms", -1), **kw), 3)
    assert r.error_code == 0, r
    return r


def test_tokens_survive_a_restart_and_expired_ones_are_removed():
    broker, addrs = token_broker(**{"delegation.token.expiry.check.interval.ms": "300"})
    sasl = addrs["SASL_PLAINTEXT"]
    with broker:
        alice = plain_login(sasl, "alice")
        lasting = _create(alice)
        brief = _create(alice, max_lifetime_ms=1500)
        broker.restart()
        alice = plain_login(sasl, "alice")
        listed = call(alice, D(owners=None), 3).tokens
        assert lasting.token_id in {t.token_id for t in listed}
        sock, r = token_login(sasl, lasting.token_id, lasting.hmac, "SCRAM-SHA-256")
        assert r.error_code == 0
        sock.close()
        # the controller's sweep removes the short-lived token once past its maximum lifetime
        wait_for(lambda: [t.token_id for t in call(alice, D(owners=None), 3).tokens] == [lasting.token_id], 30.0,
                 what="the expired token removed")
        assert logged(broker, "removed 1 expired delegation token(s)")
        sock, r = token_login(sasl, brief.token_id, brief.hmac)
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        r = call(alice, RN(hmac=brief.hmac, renew_period_ms=-1), 2)
        assert r.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_without_a_secret_key_tokens_are_disabled_and_other_scram_extensions_are_ignored():
    broker, addrs = token_broker(**{"delegation.token.secret.key": None})
    sasl = addrs["SASL_PLAINTEXT"]
    with broker:
        alice = plain_login(sasl, "alice")
        assert call(alice, C(renewers=[], max_lifetime_ms=-1), 3).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        assert call(alice, D(owners=None), 3).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        assert call(alice, RN(hmac=b"x", renew_period_ms=-1), 2).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        assert call(alice, X(hmac=b"x", expiry_time_period_ms=-1), 2).error_code == \
            ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        # a user's own SCRAM credential: an unknown extension changes nothing (Kafka ignores it),
        # tokenauth=true looks for a token of that name instead
        salt = b"0123456789abcdef"
        salted = hashlib.pbkdf2_hmac("sha512", PASSWORDS["alice"].encode(), salt, 4096)
        r = wire.call(addrs["PLAINTEXT"], AReq(deletions=[], upsertions=[AReq.ScramCredentialUpsertion(
            name="alice", mechanism=2, iterations=4096, salt=salt, salted_password=salted)]), 0)
        assert r.results[0].error_code == 0
        with wire.connect(sasl) as s:
            assert scram_exchange(s, "SCRAM-SHA-512", "alice", PASSWORDS["alice"], "foo=bar").error_code == 0
        with wire.connect(sasl) as s:
            r = scram_exchange(s, "SCRAM-SHA-512", "alice", PASSWORDS["alice"], "tokenauth=true")
            assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_tokens_for_other_owners_and_describing_them_need_acls():
    broker, addrs = token_broker(**{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                    "super.users": "User:admin;User:ANONYMOUS"})
    sasl = addrs["SASL_PLAINTEXT"]
    with broker:
        alice, bob = plain_login(sasl, "alice"), plain_login(sasl, "bob")
        r = call(alice, C(owner_principal_type="User", owner_principal_name="carol", renewers=[], max_lifetime_ms=-1), 3)
        assert (r.error_code, r.principal_name, r.token_requester_principal_name, r.max_timestamp_ms) == (
            ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "carol", "alice", -1)
        own = _create(alice, renewers=[])
        assert call(bob, D(owners=None), 3).tokens == []   # neither owner, requester nor renewer

        def grant(principal, op, rtype, name):
            r = wire.call(addrs["PLAINTEXT"], CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                resource_type=rtype, resource_name=name, resource_pattern_type=PatternType.LITERAL,
                principal=principal, host="*", operation=op, permission_type=AclPermissionType.ALLOW)]), 3)
            assert r.results[0].error_code == 0
        grant("User:alice", AclOperation.CREATE_TOKENS, ResourceType.USER, "User:carol")
        grant("User:bob", AclOperation.DESCRIBE_TOKENS, ResourceType.USER, "User:alice")
        for_carol = wait_for(lambda: _created_or_none(alice), 30.0, what="CREATE_TOKENS applied")
        assert (for_carol.principal_name, for_carol.token_requester_principal_name) == ("carol", "alice")
        # bob may describe alice's tokens (DESCRIBE_TOKENS on User:alice), not carol's
        described = wait_for(lambda: call(bob, D(owners=None), 3).tokens, 30.0, what="DESCRIBE_TOKENS applied")
        assert [t.token_id for t in described] == [own.token_id]
        # the token's own resource: DESCRIBE on DelegationToken:<id>
        grant("User:bob", AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, for_carol.token_id)
        wait_for(lambda: len(call(bob, D(owners=None), 3).tokens) == 2, 30.0, what="DESCRIBE on the token applied")
        # a token-authenticated connection acts as the owner but may not manage tokens
        sock, r = token_login(sasl, for_carol.token_id, for_carol.hmac)
        assert r.error_code == 0
        assert call(sock, D(owners=None), 3).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert logged(broker, "authentication of User:carol from")


def _created_or_none(sock):
    r = call(sock, C(owner_principal_type="User", owner_principal_name="carol", renewers=[], max_lifetime_ms=-1), 3)
    return r if r.error_code == 0 else None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("token-cluster")
    sasl_ports = free_ports(3, "127.0.0.1")
    c = Cluster(root, n=3, overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "listener.name.sasl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl.plain.sasl.jaas.config": PLAIN_JAAS,
        "delegation.token.secret.key": SECRET,
    })
    for node, port in zip(c.nodes, sasl_ports):
        node.overrides["listeners"] += f",SASL://127.0.0.1:{port}"
    c.sasl = [f"127.0.0.1:{p}" for p in sasl_ports]
    with c:
        yield c


def test_tokens_through_any_node_authenticate_on_every_node(cluster):
    addrs = cluster.sasl
    leader = cluster.leader_id()
    tokens = []
    for addr in addrs:   # two of the three are forwarded to the active controller
        alice = plain_login(addr, "alice")
        tokens.append(_create(alice))
        assert (tokens[-1].principal_name, tokens[-1].token_requester_principal_name) == ("alice", "alice")
        r = call(alice, C(renewers=[C.CreatableRenewers(principal_type="Group", principal_name="g")],
                          max_lifetime_ms=-1), 1)
        assert r.error_code == ErrorCode.INVALID_PRINCIPAL_TYPE

    def logs_in(addr, token) -> bool:
        sock, r = token_login(addr, token.token_id, token.hmac)
        sock.close()
        return r.error_code == 0
    for token in tokens:
        for addr in addrs:
            wait_until(lambda: logs_in(addr, token), 30, f"token {token.token_id} accepted on {addr}")
    # renew and expire through each node: the controller sees the client's principal, not the
    # forwarding broker's (admin is neither owner nor renewer, bob is a renewer)
    for i, addr in enumerate(addrs):
        token = tokens[i]
        stranger = call(plain_login(addr, "admin"), RN(hmac=token.hmac, renew_period_ms=60_000), 1)
        assert stranger.error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, (addr, leader)
        assert call(plain_login(addr, "bob"), RN(hmac=token.hmac, renew_period_ms=60_000), 1).error_code == 0
        assert call(plain_login(addr, "bob"), RN(hmac=b"\0" * 64, renew_period_ms=-1), 2).error_code == \
            ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    token = tokens[0]
    expired = call(plain_login(addrs[2], "alice"), X(hmac=token.hmac, expiry_time_period_ms=-1), 1)
    assert expired.error_code == 0
    for addr in addrs:
        wait_until(lambda: not logs_in(addr, token), 30, f"expired token refused on {addr}")
        wait_until(lambda: {t.token_id for t in call(plain_login(addr, "bob"), D(owners=None), 3).tokens} ==
                   {t.token_id for t in tokens[1:]}, 30, f"{addr} describes the two remaining tokens")
