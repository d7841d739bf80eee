"""The pure StandardAuthorizer (kcompat.security.acl / .authorizer) against Kafka's semantics
(StandardAuthorizerData, AclAuthorizer docs): literal, wildcard and prefixed patterns, implied
operations, deny wins, hosts, User:*, super users, allow.everyone.if.no.acl.found,
authorizeByResourceType, filters, and the image replaying ACL records."""

from __future__ import annotations

import uuid

import pytest

from kcompat.kraft.acl_control import create_acls, delete_acls
from kcompat.kraft.image import MetadataImage
from kcompat.protocol.errors import ErrorCode
from kcompat.security.acl import (
    AclBinding, AclBindingFilter, AclOperation as Op, AclPermissionType as Perm, AclStore, InvalidAclError,
    PatternType as PT, ResourceType as RT,
)
from kcompat.security.authorizer import StandardAuthorizer, all_operations, parse_super_users
from kcompat.security.principal import ANONYMOUS, user

ALICE, BOB = user("alice"), user("bob")
H1, H2 = "127.0.0.1", "127.0.0.2"


def acl(rtype=RT.TOPIC, name="t", pt=PT.LITERAL, principal="User:alice", host="*", op=Op.READ, perm=Perm.ALLOW):
    return AclBinding(rtype, name, pt, principal, host, op, perm)


def authorizer(*acls, super_users=(), allow_everyone=False):
    store = AclStore()
    for a in acls:
        store.add(uuid.uuid4(), a)
    return StandardAuthorizer(store, super_users, allow_everyone)


def test_no_acls_denies_by_default_and_allows_with_allow_everyone():
    assert not authorizer().authorize(ALICE, H1, Op.READ, RT.TOPIC, "t")
    assert authorizer(allow_everyone=True).authorize(ALICE, H1, Op.READ, RT.TOPIC, "t")


def test_allow_everyone_applies_only_to_resources_without_any_acl():
    a = authorizer(acl(principal="User:bob"), allow_everyone=True)
    assert not a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "t")       # t has an ACL (for bob)
    assert a.authorize(BOB, H1, Op.READ, RT.TOPIC, "t")
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "other")       # no ACL at all


def test_literal_acl_matches_its_name_only_and_its_operation():
    a = authorizer(acl(name="orders"))
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "orders2")
    assert not a.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, "orders")
    assert not a.authorize(BOB, H1, Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, H1, Op.READ, RT.GROUP, "orders")  # another resource type


def test_wildcard_resource_and_wildcard_principal():
    a = authorizer(acl(name="*", principal="User:*"))
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "anything")
    assert a.authorize(ANONYMOUS, H2, Op.READ, RT.TOPIC, "x")
    assert not a.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, "anything")


def test_prefixed_pattern():
    a = authorizer(acl(name="team-", pt=PT.PREFIXED))
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "team-a")
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "team-")
    assert not a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "team")
    assert not a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "xteam-a")


def test_prefixed_star_is_a_plain_prefix_not_a_wildcard():
    a = authorizer(acl(name="*", pt=PT.PREFIXED))
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "*abc")
    assert not a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "abc")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_describe_is_implied_by_read_write_delete_alter(granted):
    a = authorizer(acl(op=granted))
    assert a.authorize(ALICE, H1, Op.DESCRIBE, RT.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.CLUSTER_ACTION])
def test_describe_is_not_implied_by_others(granted):
    assert authorizer(acl(op=granted)).authorize(ALICE, H1, Op.DESCRIBE, RT.TOPIC, "t") is False


def test_describe_configs_is_implied_by_alter_configs_only():
    assert authorizer(acl(op=Op.ALTER_CONFIGS)).authorize(ALICE, H1, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not authorizer(acl(op=Op.ALTER)).authorize(ALICE, H1, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not authorizer(acl(op=Op.DESCRIBE_CONFIGS)).authorize(ALICE, H1, Op.ALTER_CONFIGS, RT.TOPIC, "t")


def test_read_does_not_imply_write():
    assert not authorizer(acl(op=Op.READ)).authorize(ALICE, H1, Op.WRITE, RT.TOPIC, "t")


def test_all_grants_every_operation():
    a = authorizer(acl(op=Op.ALL))
    for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert a.authorize(ALICE, H1, op, RT.TOPIC, "t")


def test_deny_wins_over_allow_and_all():
    a = authorizer(acl(op=Op.ALL), acl(op=Op.WRITE, perm=Perm.DENY))
    assert not a.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, "t")
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "t")


def test_deny_on_wildcard_principal_prefix_and_wildcard_resource():
    allow = acl(name="t1")
    assert not authorizer(allow, acl(name="t", pt=PT.PREFIXED, principal="User:*", perm=Perm.DENY)).authorize(
        ALICE, H1, Op.READ, RT.TOPIC, "t1")
    assert not authorizer(allow, acl(name="*", perm=Perm.DENY)).authorize(ALICE, H1, Op.READ, RT.TOPIC, "t1")


def test_deny_does_not_imply():
    """A DENY READ does not deny DESCRIBE (implication is for ALLOW only); DENY ALL denies all."""
    a = authorizer(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=Perm.DENY))
    assert a.authorize(ALICE, H1, Op.DESCRIBE, RT.TOPIC, "t")
    b = authorizer(acl(op=Op.DESCRIBE), acl(op=Op.ALL, perm=Perm.DENY))
    assert not b.authorize(ALICE, H1, Op.DESCRIBE, RT.TOPIC, "t")


def test_hosts():
    a = authorizer(acl(host=H1))
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, H2, Op.READ, RT.TOPIC, "t")
    b = authorizer(acl(op=Op.ALL), acl(host=H2, perm=Perm.DENY))
    assert b.authorize(ALICE, H1, Op.READ, RT.TOPIC, "t")
    assert not b.authorize(ALICE, H2, Op.READ, RT.TOPIC, "t")


def test_super_users_may_do_anything_even_when_denied():
    su = parse_super_users("User:admin; User:ops ;")
    assert su == {"User:admin", "User:ops"}
    a = authorizer(acl(principal="User:*", op=Op.ALL, perm=Perm.DENY), super_users=su)
    assert a.authorize(user("admin"), H1, Op.WRITE, RT.TOPIC, "t")
    assert a.authorize(user("ops"), H2, Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, "t")


def test_batched_form_and_authorized_operations():
    a = authorizer(acl(op=Op.READ), acl(op=Op.ALTER_CONFIGS))
    assert a.authorize_many(ALICE, H1, [(Op.READ, RT.TOPIC, "t"), (Op.WRITE, RT.TOPIC, "t"),
                                        (Op.DESCRIBE, RT.TOPIC, "t")]) == [True, False, True]
    bits = a.authorized_operations(ALICE, H1, RT.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    assert a.authorized_operations(BOB, H1, RT.TOPIC, "t") == 0
    # Kafka 4.3 (group configs): READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS = 3400
    assert all_operations(RT.GROUP) == 3400


def test_authorize_by_resource_type():
    """Kafka's Authorizer.authorizeByResourceType (InitProducerId's idempotence check)."""
    assert not authorizer().authorize_by_resource_type(ALICE, H1, Op.WRITE, RT.TOPIC)
    assert authorizer(acl(name="x", op=Op.WRITE)).authorize_by_resource_type(ALICE, H1, Op.WRITE, RT.TOPIC)
    denied_by_prefix = authorizer(acl(name="abc", op=Op.WRITE), acl(name="ab", pt=PT.PREFIXED, op=Op.WRITE,
                                                                     perm=Perm.DENY))
    assert not denied_by_prefix.authorize_by_resource_type(ALICE, H1, Op.WRITE, RT.TOPIC)
    wildcard_deny = authorizer(acl(name="x", op=Op.WRITE), acl(name="*", op=Op.WRITE, perm=Perm.DENY))
    assert not wildcard_deny.authorize_by_resource_type(ALICE, H1, Op.WRITE, RT.TOPIC)
    assert authorizer(super_users={"User:alice"}).authorize_by_resource_type(ALICE, H1, Op.WRITE, RT.TOPIC)


def test_validation_matches_kafka_messages():
    with pytest.raises(InvalidAclError, match="Invalid resourceType ANY"):
        acl(rtype=RT.ANY).validate()
    with pytest.raises(InvalidAclError, match="Invalid patternType MATCH"):
        acl(pt=PT.MATCH).validate()
    with pytest.raises(InvalidAclError, match="Invalid operation ANY"):
        acl(op=Op.ANY).validate()
    with pytest.raises(InvalidAclError, match="Invalid permissionType ANY"):
        acl(perm=Perm.ANY).validate()
    with pytest.raises(InvalidAclError, match="only valid name for the CLUSTER resource is kafka-cluster"):
        acl(rtype=RT.CLUSTER, name="c").validate()
    with pytest.raises(InvalidAclError, match="Invalid empty resource name"):
        acl(name="").validate()
    with pytest.raises(InvalidAclError, match="no colon"):
        acl(principal="alice").validate()
    acl(rtype=RT.CLUSTER, name="kafka-cluster", op=Op.CLUSTER_ACTION).validate()


def test_filters():
    lit, star, pre = acl(name="orders"), acl(name="*"), acl(name="ord", pt=PT.PREFIXED)
    other = acl(name="x", principal="User:bob", op=Op.WRITE, perm=Perm.DENY, host=H2)
    every = AclBindingFilter()
    assert all(every.matches(a) for a in (lit, star, pre, other))
    match = AclBindingFilter(RT.TOPIC, "orders", PT.MATCH)
    assert [match.matches(a) for a in (lit, star, pre, other)] == [True, True, True, False]
    literal = AclBindingFilter(RT.TOPIC, "orders", PT.LITERAL)
    assert [literal.matches(a) for a in (lit, star, pre)] == [True, False, False]
    assert AclBindingFilter(principal="User:bob", host=H2, operation=Op.WRITE,
                            permission_type=Perm.DENY).matches(other)
    assert not AclBindingFilter(resource_type=RT.GROUP).matches(lit)
    assert AclBindingFilter.of(0, None, 1, None, None, 1, 1).unknown_reason() is not None


def test_controller_records_and_image_replay():
    """CreateAcls / DeleteAcls become ACL records; the image applies them (and rebuilds them from
    a snapshot's to_records)."""
    image = MetadataImage()
    a, b = acl(name="orders"), acl(name="team-", pt=PT.PREFIXED, op=Op.WRITE)
    records, results = create_acls(image, [a, b, a, acl(name="")])
    assert [r[0] for r in results] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert len(records) == 2   # the duplicate is stored once
    for i, r in enumerate(records):
        image.apply(r, i)
    assert len(image.acls) == 2
    again, results = create_acls(image, [a])
    assert again == [] and results == [(ErrorCode.NONE, None)]
    auth = StandardAuthorizer(lambda: image.acls)
    assert auth.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, "team-x")

    copy = MetadataImage()
    for i, r in enumerate(image.to_records()):
        copy.apply(r, i)
    assert sorted(map(str, copy.acls.by_id.values())) == sorted(map(str, image.acls.by_id.values()))

    removals, results = delete_acls(image, [AclBindingFilter(RT.TOPIC, "team-", PT.PREFIXED),
                                            AclBindingFilter(), AclBindingFilter.of(0, None, 1, None, None, 1, 1)])
    assert [len(r[2]) for r in results] == [1, 1, 0] and results[2][0] == ErrorCode.INVALID_REQUEST
    for i, r in enumerate(removals):
        image.apply(r, 10 + i)
    assert len(image.acls) == 0
    assert not auth.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, "team-x")


# -- properties: the indexed store and the decision against brute force ----------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NAMES = st.sampled_from(["a", "ab", "abc", "b", "*", "a*"])
ACLS = st.builds(AclBinding, st.sampled_from([RT.TOPIC, RT.GROUP]), NAMES, st.sampled_from([PT.LITERAL, PT.PREFIXED]),
                 st.sampled_from(["User:alice", "User:bob", "User:*"]), st.sampled_from(["*", H1, H2]),
                 st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]),
                 st.sampled_from([Perm.ALLOW, Perm.DENY]))


def _covers(a: AclBinding, rtype, name: str) -> bool:
    """Kafka's ResourcePattern matching, written out: LITERAL equal or '*', PREFIXED startswith."""
    if a.resource_type != rtype:
        return False
    if a.pattern_type == PT.LITERAL:
        return a.resource_name in (name, "*")
    return name.startswith(a.resource_name)


def _oracle(acls, principal: str, host: str, op, rtype, name: str, allow_everyone: bool) -> bool:
    covering = [a for a in acls if _covers(a, rtype, name)]
    applying = [a for a in covering if a.principal in (principal, "User:*") and a.host in ("*", host)]
    if any(a.permission_type == Perm.DENY and a.operation in (Op.ALL, op) for a in applying):
        return False
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE},
               Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}}.get(op, {op})
    if any(a.permission_type == Perm.ALLOW and (a.operation == Op.ALL or a.operation in implied) for a in applying):
        return True
    return allow_everyone and not covering


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), ACLS), max_size=25), st.sampled_from(["User:alice", "User:bob"]),
       st.sampled_from([H1, H2]), st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS]),
       st.sampled_from([RT.TOPIC, RT.GROUP]), st.sampled_from(["a", "ab", "abc", "b", "*", "a*", "zz"]),
       st.booleans())
def test_decisions_match_kafkas_rules_after_any_adds_and_removes(ops, principal, host, op, rtype, name, everyone):
    store = AclStore()
    live: dict = {}
    for add, a in ops:
        if add:
            i = uuid.uuid4()
            store.add(i, a)
            live[i] = a
        elif live:
            i = next(iter(live))
            store.remove(i)
            del live[i]
    assert sorted(map(str, store.covering(rtype, name))) == \
        sorted(map(str, (a for a in live.values() if _covers(a, rtype, name))))
    auth = StandardAuthorizer(store, allow_everyone_if_no_acl_found=everyone)
    p = user(principal.split(":")[1])
    assert auth.authorize(p, host, op, rtype, name) == _oracle(list(live.values()), principal, host, op, rtype, name,
                                                               everyone)


def test_authorizer_configs():
    """authorizer.class.name: empty (no authorizer), StandardAuthorizer or Kafka 3.x's AclAuthorizer
    name; any other class stops the start, as Kafka fails to load it."""
    from kcompat.config import BrokerConfig, ConfigError
    store = AclStore()
    assert StandardAuthorizer.from_config(store, BrokerConfig({}).get) is None
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"):
        cfg = BrokerConfig({"authorizer.class.name": name, "super.users": "User:admin;User:broker",
                            "allow.everyone.if.no.acl.found": "true"})
        auth = StandardAuthorizer.from_config(store, cfg.get)
        assert auth.super_users == {"User:admin", "User:broker"} and auth.allow_everyone
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({"authorizer.class.name": "com.example.MyAuthorizer"})
