"""The ``security`` group: TLS, SASL and ACLs through real clients (issue 19), opt-in with
``--group security`` (the suite then starts each broker with the listeners of
:mod:`conformance.security`; these cases are never part of ``core`` or ``all``).

Every case authenticates as ``User:alice`` (PLAIN or SCRAM-SHA-512 on the SASL_PLAINTEXT
listener) or connects over the SSL listener (``User:ANONYMOUS``, a super user of the set-up), and
creates the ACLs it needs for its own prefixed topics and groups through the set-up admin,
deleting them afterwards. ACLs are waited for (DescribeAcls lists them) before the case runs, as
Kafka applies them on the broker a moment after CreateAcls answers.
"""

from __future__ import annotations

from conformance import procs, wire
from conformance.clients import secure
from conformance.clients.secure import Secured
from conformance.model import Prerequisite
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, KCAT, WIRE, scenario
from conformance.security import sasl_login, tls_connection

CLIENTS = [WIRE, CONFLUENT, KAFKA_PYTHON, KCAT, JAVA]
MECHANISMS = {"plain": "PLAIN", "scram-sha-512": "SCRAM-SHA-512"}
AREA = "security"


def _security(ctx) -> dict:
    sec = ctx.target.security
    if not sec:
        raise Prerequisite(f"{ctx.target.label} was not started with security listeners: run --group security "
                           "with --broker-cmd kcompat or --reference kafka")
    return sec


def _grant(ctx, *, deny_topics: tuple[str, ...] = (), deny_group_read: tuple[str, ...] = ()) -> None:
    """ALLOW ALL for ``User:alice`` on the case's topic and group prefix, DENY ALL on ``deny_topics``
    and DENY READ on ``deny_group_read`` (literal); removed when the case ends."""
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    principal = _security(ctx)["principal"]

    def binding(rtype, name, pattern, op, perm):
        return AclBinding(rtype, name, pattern, principal, "*", op, perm)

    allow, deny, all_ = AclPermissionType.ALLOW, AclPermissionType.DENY, AclOperation.ALL
    acls = [binding(ResourceType.TOPIC, ctx.prefix, ResourcePatternType.PREFIXED, all_, allow),
            binding(ResourceType.GROUP, ctx.prefix, ResourcePatternType.PREFIXED, all_, allow)]
    acls += [binding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, all_, deny) for t in deny_topics]
    acls += [binding(ResourceType.GROUP, g, ResourcePatternType.LITERAL, AclOperation.READ, deny)
             for g in deny_group_read]
    admin = ctx.admin.admin
    for f in admin.create_acls(acls, request_timeout=30).values():
        f.result(35)
    mine = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                            AclPermissionType.ANY)

    def visible() -> bool:
        listed = admin.describe_acls(mine, request_timeout=10).result(15)
        return all(a in listed for a in acls)

    procs.wait_until(visible, ctx.timeout(30), interval=0.1, what="the case's ACLs to be listed by DescribeAcls")

    def remove_acls() -> None:
        filters = [AclBindingFilter(a.restype, a.name, a.resource_pattern_type, a.principal, a.host, a.operation,
                                    a.permission_type) for a in acls]
        for f in admin.delete_acls(filters, request_timeout=30).values():
            f.result(35)

    ctx.on_cleanup(remove_acls)


def _values(ctx, n: int = 5) -> list[bytes]:
    """``b"0"``.. (what Kafka's VerifiableProducer writes, so every client produces the same)."""
    return [str(i).encode() for i in range(n)]


def _wire_produce(conn: wire.Connection, topic: str, values: list[bytes]) -> dict:
    res = wire.produce(conn, topic, 0, wire.record_batch(values))
    return {"error": wire.error_name(res.get("error", -1)), "base_offset": res.get("base_offset")}


def _produce_consume(ctx, conn: Secured) -> None:
    """Produce five records through ``conn`` and read them back (a group for confluent-kafka and
    kafka-python; kcat reads the partition without a group)."""
    topic, group = ctx.topic(), ctx.group()
    values = _values(ctx)
    try:
        offsets = secure.produce(ctx, conn, topic, values)
    except Exception as e:  # refused (e.g. authentication): the broker behaved differently, not the client
        ctx.observe(produce_error=secure.error_name(e))
        ctx.fail(f"producing failed: {secure.error_name(e)}: {str(e)[:1500]}")
    if ctx.case.client != KCAT:
        ctx.expect_eq("offsets", offsets, list(range(len(values))))
    ctx.expect_eq("consumed", secure.consume(ctx, conn, topic, group, len(values)), values)


# -- SSL ---------------------------------------------------------------------------------------------------

@scenario("security.ssl.produce-consume", area=AREA, group="security", clients=CLIENTS,
          title="SSL listener (server certificate from a CA made at run time): produce and consume")
def ssl_produce_consume(ctx):
    """The client verifies the broker's certificate against the run's CA (no host-name override)."""
    sec = _security(ctx)
    if ctx.case.client != WIRE:
        _produce_consume(ctx, Secured.ssl(sec))
        return
    topic = ctx.topic()
    with tls_connection(sec["ssl_bootstrap"], sec["ca_path"]) as conn:
        ctx.expect_eq("api_versions_error", wire.api_versions(conn, 3).error_code, 0)
        ctx.expect_eq("produce", _wire_produce(conn, topic, _values(ctx, 3)),
                      {"error": wire.error_name(0), "base_offset": 0})
        ctx.expect_eq("latest_offset", wire.list_offsets(conn, topic, 0, -1).get("offset"), 3)
        md = wire.metadata(conn, [topic])
        ctx.expect_eq("advertises_the_ssl_listener", [f"{h}:{p}" == sec["ssl_bootstrap"] for h, p in
                                                      md.brokers.values()], [True])


# -- SASL ----------------------------------------------------------------------------------------------------

def _sasl_produce_consume(ctx, mechanism: str) -> None:
    sec = _security(ctx)
    _grant(ctx)
    if ctx.case.client != WIRE:
        _produce_consume(ctx, Secured.sasl(sec, mechanism))
        return
    topic = ctx.topic()
    with wire.Connection(sec["sasl_bootstrap"]) as conn:
        res = sasl_login(conn, mechanism, sec["user"], sec["password"])
        # the success answer's error_message is compared, not required: Kafka's is "" (its generated
        # default for a nullable string), any value passes
        ctx.observe(authenticate_error_message=res["message"], session_lifetime_ms=res["session_lifetime_ms"])
        ctx.expect_eq("authenticate", wire.error_name(res["error"]), wire.error_name(0))
        ctx.expect_eq("produce", _wire_produce(conn, topic, _values(ctx, 3)),
                      {"error": wire.error_name(0), "base_offset": 0})
        ctx.expect_eq("latest_offset", wire.list_offsets(conn, topic, 0, -1).get("offset"), 3)


def _wrong_password(ctx, mechanism: str) -> None:
    sec = _security(ctx)
    if ctx.case.client != WIRE:
        got = secure.auth_error(ctx, Secured.sasl(sec, mechanism, password="wrong-password"))
        ctx.observe(client_error=got)
        if ctx.case.client == KAFKA_PYTHON:
            # kafka-python 3.0.12 may handle the broker closing the connection before the error answer
            # it already read (seen with Kafka 4.3.1 and kcompat for PLAIN): refused either way
            ctx.check(got in ("SASL_AUTHENTICATION_FAILED", "KafkaConnectionError"),
                      f"kafka-python was not refused with an authentication or connection error: {got}")
        else:  # librdkafka reports the broker's SASL_AUTHENTICATION_FAILED as its local _AUTHENTICATION
            ctx.expect_eq("client_error", got, "_AUTHENTICATION" if ctx.case.client in (CONFLUENT, KCAT)
                          else "SASL_AUTHENTICATION_FAILED")
        return
    with wire.Connection(sec["sasl_bootstrap"]) as conn:
        res = sasl_login(conn, mechanism, sec["user"], "wrong-password")
        ctx.expect_eq("error", wire.error_name(res["error"]), wire.error_name(58))
        ctx.observe(message=res["message"])
        ctx.expect_eq("connection_closed", conn.closed_by_peer(), True)
    with wire.Connection(sec["sasl_bootstrap"]) as conn:  # the broker keeps serving others
        res = sasl_login(conn, mechanism, sec["user"], sec["password"])
        ctx.expect_eq("then_right_password", wire.error_name(res["error"]), wire.error_name(0))


for _slug, _mech in MECHANISMS.items():
    scenario(f"security.sasl-{_slug}.produce-consume", area=AREA, group="security", clients=CLIENTS,
             title=f"SASL_PLAINTEXT with {_mech} as User:alice (ACLs on its prefix): produce and consume")(
        lambda ctx, m=_mech: _sasl_produce_consume(ctx, m))
    scenario(f"security.sasl-{_slug}.wrong-password", area=AREA, group="security", clients=CLIENTS,
             title=f"{_mech} with a wrong password: SASL_AUTHENTICATION_FAILED, the connection closed")(
        lambda ctx, m=_mech: _wrong_password(ctx, m))


# -- ACLs -------------------------------------------------------------------------------------------------------

@scenario("security.acl.topic-denied", area=AREA, group="security", clients=CLIENTS,
          title="A DENY ALL ACL on a topic: produce gets TOPIC_AUTHORIZATION_FAILED, Metadata hides the topic")
def acl_topic_denied(ctx):
    """Two topics under the case's prefix (ALLOW ALL for alice); the second one also has DENY ALL,
    and deny wins. Through PLAIN on the SASL listener."""
    sec = _security(ctx)
    allowed, denied = ctx.topic(), ctx.topic()
    _grant(ctx, deny_topics=(denied,))
    client = ctx.case.client
    if client != WIRE:
        conn = Secured.sasl(sec, "PLAIN")
        topics = secure.list_topics(ctx, conn)
        ctx.expect_eq("listed", (allowed in topics, denied in topics), (True, False))
        ctx.expect_eq("produce_denied", secure.produce_error(ctx, conn, denied), "TOPIC_AUTHORIZATION_FAILED")
        ctx.expect_eq("produce_allowed", secure.produce_error(ctx, conn, allowed), "none")
        return
    with wire.Connection(sec["sasl_bootstrap"]) as conn:
        ctx.check(sasl_login(conn, "PLAIN", sec["user"], sec["password"])["error"] == 0, "PLAIN login failed")
        listed = wire.metadata(conn, None).topics
        ctx.expect_eq("listed", (allowed in listed, denied in listed), (True, False))
        named = wire.metadata(conn, [allowed, denied]).topics
        ctx.expect_eq("metadata_errors", {"allowed": wire.error_name(named[allowed]["error"]),
                                          "denied": wire.error_name(named[denied]["error"])},
                      {"allowed": wire.error_name(0), "denied": wire.error_name(29)})
        ctx.expect_eq("produce_denied", _wire_produce(conn, denied, [b"x"])["error"], wire.error_name(29))
        ctx.expect_eq("produce_allowed", _wire_produce(conn, allowed, [b"x"]),
                      {"error": wire.error_name(0), "base_offset": 0})


COORDINATOR_WARMING = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def _offset_commit_v2(conn: wire.Connection, group: str, topic: str) -> str:
    """A simple (generation -1) OffsetCommit v2 of offset 0 for ``topic``-0: the partition's error,
    after the coordinator is ready (FindCoordinator v0 first; commits retried while it warms up)."""
    body = (wire.Writer().string(group).i32(-1).string("").i64(-1).i32(1).string(topic).i32(1).i32(0).i64(0)
            .string("").getvalue())

    def commit():
        conn.request(10, 0, wire.Writer().string(group).getvalue())  # FindCoordinator: creates the offsets topic
        r = conn.request(8, 2, body)
        errors = [(r.string(), r.array(lambda: (r.i32(), r.i16()))) for _ in range(r.i32())]
        code = errors[0][1][0][1]
        return None if code in COORDINATOR_WARMING else wire.error_name(code)

    return procs.wait_until(commit, 30, interval=0.2, what=f"the coordinator of {group} to answer OffsetCommit")


@scenario("security.acl.group-denied", area=AREA, group="security", clients=[WIRE, CONFLUENT, KAFKA_PYTHON, JAVA],
          title="DENY READ on a group: consuming in it gets GROUP_AUTHORIZATION_FAILED")
def acl_group_denied(ctx):
    """alice may read the topic (ALLOW ALL on the prefix) but not the group (DENY READ); another
    group under the prefix works. Wire: OffsetCommit (READ on the group) for both groups."""
    sec = _security(ctx)
    topic, denied, allowed = ctx.topic(), ctx.group(), ctx.group()
    ctx.setup_produce(topic, [b"r0", b"r1"])
    _grant(ctx, deny_group_read=(denied,))
    client = ctx.case.client
    if client != WIRE:
        conn = Secured.sasl(sec, "PLAIN")
        ctx.expect_eq("consume_denied_group", secure.group_error(ctx, conn, topic, denied),
                      "GROUP_AUTHORIZATION_FAILED")
        ctx.expect_eq("consume_allowed_group", secure.consume(ctx, conn, topic, allowed, 2), [b"r0", b"r1"])
        return
    with wire.Connection(sec["sasl_bootstrap"]) as conn:
        ctx.check(sasl_login(conn, "PLAIN", sec["user"], sec["password"])["error"] == 0, "PLAIN login failed")
        ctx.expect_eq("commit_denied_group", _offset_commit_v2(conn, denied, topic), wire.error_name(30))
        ctx.expect_eq("commit_allowed_group", _offset_commit_v2(conn, allowed, topic), wire.error_name(0))
