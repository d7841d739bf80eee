"""ACLs enforced by a real kcompat process with Kafka's StandardAuthorizer configured (issue 19).

Without SASL/TLS every connection is ``User:ANONYMOUS``, so the broker runs with
``allow.everyone.if.no.acl.found=true`` (resources without ACLs stay open, as the CLUSTER resource
must for the tools) and each test puts ACLs for ``User:ANONYMOUS`` (or another principal, which
makes a resource closed to ANONYMOUS) on resources of its own: Kafka 4.3.1's ``kafka-acls.sh``
adds, lists and removes them; confluent-kafka and kafka-python get Kafka's errors
(TOPIC_AUTHORIZATION_FAILED on produce, TRANSACTIONAL_ID_AUTHORIZATION_FAILED on
init_transactions, GROUP_AUTHORIZATION_FAILED on joining a group); Metadata hides topics that may not
be described; the authorized-operations bitfields come from the ACLs; host rules are checked with
raw connections bound to 127.0.0.1 and 127.0.0.2."""

from __future__ import annotations

import socket
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka.errors import GroupAuthorizationFailedError

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.create_acls import CreateAclsRequest as CQ
from kcompat.protocol.messages.delete_acls import DeleteAclsRequest as DQ
from kcompat.protocol.messages.describe_acls import DescribeAclsRequest
from kcompat.protocol.messages.describe_cluster import DescribeClusterRequest
from kcompat.protocol.messages.describe_groups import DescribeGroupsRequest
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.join_group import JoinGroupRequest
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest
from kcompat.security.acl import AclOperation as Op, AclPermissionType as Perm, PatternType as PT, ResourceType as RT
from kcompat.testing import Broker
from kcompat.testing.process import wait_for
from kcompat.testing.wire import api_versions, call, read_response, send_request

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTH_CONFIGS = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true",
                "group.initial.rebalance.delay.ms": "0"}
ANON = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


@pytest.fixture(scope="module")
def broker():
    with Broker(AUTH_CONFIGS) as b:
        yield b


@pytest.fixture
def tools(lib, tmp_path):
    return JavaTools(str(lib), tmp_path)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def add_acl(b, rtype: RT, name: str, op: Op, perm: Perm = Perm.ALLOW, principal: str = ANON, host: str = "*",
            pattern: PT = PT.LITERAL) -> None:
    resp = call(b.bootstrap_servers, CQ(creations=[CQ.AclCreation(
        resource_type=rtype, resource_name=name, resource_pattern_type=pattern, principal=principal, host=host,
        operation=op, permission_type=perm)]), 3)
    assert [r.error_code for r in resp.results] == [0], resp


def create_topic(b, name: str, partitions: int = 1) -> None:
    b.create_topic(name, partitions)


def coordinator_ready(b, group: str) -> None:
    """Wait until the group coordinator answers for ``group`` (``__consumer_offsets`` is created on
    first use)."""
    wait_for(lambda: call(b.bootstrap_servers, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
                          4).coordinators[0].error_code == 0, what=f"a coordinator for {group}")


def metadata(b, topics, version: int = 12, **kw):
    req = MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                              for t in topics],
                          allow_auto_topic_creation=False, **kw)
    return call(b.bootstrap_servers, req, version)


def acls_tool(tools, b, *args: str):
    r = tools.run(ACL_COMMAND, ["--bootstrap-server", b.bootstrap_servers, *args], check=False, timeout=120)
    assert r.returncode == 0, r.summary()
    return r.stdout


# -- kafka-acls.sh ----------------------------------------------------------------------------------


def test_kafka_acls_add_list_remove(tools, broker):
    topic, group = unique("tool-topic"), unique("tool-group")
    out = acls_tool(tools, broker, "--add", "--allow-principal", "User:alice", "--allow-host", "127.0.0.1",
                    "--operation", "Read", "--operation", "Describe", "--topic", topic, "--group", group)
    assert f"name={topic}, patternType=LITERAL" in out
    acls_tool(tools, broker, "--add", "--deny-principal", "User:mallory", "--operation", "Write",
              "--topic", topic[:12], "--resource-pattern-type", "prefixed")
    listed = acls_tool(tools, broker, "--list", "--topic", topic)
    assert "principal=User:alice, host=127.0.0.1, operation=READ, permissionType=ALLOW" in listed
    assert "principal=User:alice, host=127.0.0.1, operation=DESCRIBE, permissionType=ALLOW" in listed
    # --list --topic without a pattern type lists only that literal name; 'match' adds what applies
    assert "mallory" not in listed
    matching = acls_tool(tools, broker, "--list", "--topic", topic, "--resource-pattern-type", "match")
    assert "principal=User:mallory, host=*, operation=WRITE, permissionType=DENY" in matching
    assert f"name={group}, patternType=LITERAL" in acls_tool(tools, broker, "--list", "--group", group)

    acls_tool(tools, broker, "--remove", "--force", "--topic", topic, "--group", group)
    acls_tool(tools, broker, "--remove", "--force", "--topic", topic[:12], "--resource-pattern-type", "prefixed")
    after = acls_tool(tools, broker, "--list")
    assert topic not in after and group not in after and "mallory" not in after


def test_acl_requests_validated_as_kafka(broker):
    """What Kafka 4.3.1 answers: INVALID_REQUEST with AclControlManager's messages,
    UNKNOWN_SERVER_ERROR for a filter-only value in a creation, and a closed connection for an
    UNKNOWN code (the request does not parse)."""
    bs = broker.bootstrap_servers

    def create(rtype, name, pattern, principal, op, perm):
        return call(bs, CQ(creations=[CQ.AclCreation(resource_type=rtype, resource_name=name,
                                                     resource_pattern_type=pattern, principal=principal, host="*",
                                                     operation=op, permission_type=perm)]), 3).results[0]
    cluster = create(RT.CLUSTER, "other", PT.LITERAL, ANON, Op.ALTER, Perm.ALLOW)
    assert (cluster.error_code, cluster.error_message) == (
        E.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")
    assert create(RT.TOPIC, "", PT.LITERAL, ANON, Op.READ, Perm.ALLOW).error_message == "Invalid empty resource name"
    assert "no colon" in create(RT.TOPIC, "t", PT.LITERAL, "alice", Op.READ, Perm.ALLOW).error_message
    for filter_only in ((RT.ANY, "t", PT.LITERAL, ANON, Op.READ, Perm.ALLOW),
                        (RT.TOPIC, "t", PT.MATCH, ANON, Op.READ, Perm.ALLOW),
                        (RT.TOPIC, "t", PT.LITERAL, ANON, Op.ANY, Perm.ALLOW),
                        (RT.TOPIC, "t", PT.LITERAL, ANON, Op.READ, Perm.ANY)):
        assert create(*filter_only).error_code == E.UNKNOWN_SERVER_ERROR
    ok = create(RT.DELEGATION_TOKEN, "token", PT.LITERAL, ANON, Op.DESCRIBE, Perm.ALLOW)
    assert (ok.error_code, ok.error_message) == (E.NONE, "")
    with pytest.raises(ConnectionError):
        create(RT.UNKNOWN, "t", PT.LITERAL, ANON, Op.READ, Perm.ALLOW)
    with pytest.raises(ConnectionError):
        call(bs, DescribeAclsRequest(resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1,
                                     principal_filter=None, host_filter=None, operation=1, permission_type=1), 3)


def test_security_disabled_without_an_authorizer():
    """Kafka's AclApis without an authorizer, every version: the APIs stay advertised and answer
    SECURITY_DISABLED, DescribeAcls with "No Authorizer is configured on the broker", Create/DeleteAcls
    per creation/filter with "No Authorizer is configured."."""
    with Broker() as b:
        advertised = {k: (lo, hi) for k, lo, hi in api_versions(b.bootstrap_servers)}
        assert [advertised.get(k) for k in (29, 30, 31)] == [(0, 3)] * 3
        for v in range(4):
            resp = call(b.bootstrap_servers, DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=3 if v else 1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1), v)
            assert (resp.error_code, resp.error_message, resp.resources) == (
                E.SECURITY_DISABLED, "No Authorizer is configured on the broker", []), v
            created = call(b.bootstrap_servers, CQ(creations=[CQ.AclCreation(
                resource_type=RT.TOPIC, resource_name=f"t{i}", resource_pattern_type=PT.LITERAL, principal=ANON,
                host="*", operation=Op.READ, permission_type=Perm.ALLOW) for i in range(2)]), v)
            assert [(r.error_code, r.error_message) for r in created.results] == [
                (E.SECURITY_DISABLED, "No Authorizer is configured.")] * 2, v
            deleted = call(b.bootstrap_servers, DQ(filters=[DQ.DeleteAclsFilter(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                host_filter=None, operation=1, permission_type=1)]), v)
            assert [(r.error_code, r.error_message, r.matching_acls) for r in deleted.filter_results] == [
                (E.SECURITY_DISABLED, "No Authorizer is configured.", [])], v


def test_kafka_acls_without_an_authorizer_is_told_security_disabled(tools):
    """The ACL APIs stay advertised without ``authorizer.class.name`` (MirrorMaker 2's topic ACL sync
    calls DescribeAcls and expects SecurityDisabledException, as from Kafka's AclApis): Kafka
    4.3.1's kafka-acls.sh gets Kafka's exception and messages per API."""
    with Broker() as b:
        listed = tools.run(ACL_COMMAND, ["--bootstrap-server", b.bootstrap_servers, "--list"], check=False,
                           timeout=120)
        removed = tools.run(ACL_COMMAND, ["--bootstrap-server", b.bootstrap_servers, "--remove", "--force",
                                          "--topic", "t"], check=False, timeout=120)
    assert ("SecurityDisabledException: No Authorizer is configured on the broker"
            in listed.stdout + listed.stderr), listed.summary()
    assert "SecurityDisabledException: No Authorizer is configured." in removed.stdout + removed.stderr, \
        removed.summary()


# -- enforcement with real clients ----------------------------------------------------------------------


def test_produce_to_a_denied_topic_fails_with_topic_authorization_failed(broker):
    allowed, denied = unique("open"), unique("closed")
    create_topic(broker, allowed)
    create_topic(broker, denied)
    add_acl(broker, RT.TOPIC, denied, Op.WRITE, Perm.DENY)
    results = {}
    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "message.send.max.retries": 0,
                     "enable.idempotence": False})
    for topic in (allowed, denied):
        p.produce(topic, b"v", on_delivery=lambda err, msg, t=topic: results.__setitem__(t, err))
    p.flush(30)
    assert results[allowed] is None
    assert results[denied] is not None and results[denied].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_transactional_id_denied(broker):
    tid = unique("txn")
    add_acl(broker, RT.TRANSACTIONAL_ID, tid, Op.WRITE, Perm.DENY)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid})
    with pytest.raises(ck.KafkaException) as e:
        p.init_transactions(30)
    assert e.value.args[0].code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_consumer_in_a_denied_group_gets_group_authorization_failed(broker):
    topic, group = unique("grp-topic"), unique("denied-group")
    create_topic(broker, topic)
    add_acl(broker, RT.GROUP, group, Op.READ, Perm.DENY)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(20):
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()
    join = call(broker.bootstrap_servers, JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), 5)
    assert join.error_code == E.GROUP_AUTHORIZATION_FAILED


def test_offset_commit_checks_group_then_topic(broker):
    readable, unreadable, group = unique("oc-ok"), unique("oc-no"), unique("oc-group")
    create_topic(broker, readable)
    create_topic(broker, unreadable)
    add_acl(broker, RT.TOPIC, unreadable, Op.READ, Perm.DENY)
    coordinator_ready(broker, group)

    def commit(g):
        return call(broker.bootstrap_servers, OffsetCommitRequest(
            group_id=g, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1, topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                     committed_metadata="")])
                for t in (readable, unreadable)]), 8)
    codes = {t.name: t.partitions[0].error_code for t in commit(group).topics}
    assert codes == {readable: E.NONE, unreadable: E.TOPIC_AUTHORIZATION_FAILED}
    add_acl(broker, RT.GROUP, group, Op.READ, Perm.DENY)
    assert {p.error_code for t in commit(group).topics for p in t.partitions} == {E.GROUP_AUTHORIZATION_FAILED}


def test_metadata_hides_topics_that_may_not_be_described(broker):
    visible, hidden = unique("visible"), unique("hidden")
    create_topic(broker, visible)
    create_topic(broker, hidden)
    add_acl(broker, RT.TOPIC, hidden, Op.DESCRIBE, Perm.DENY)
    listed = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10).topics
    assert visible in listed and hidden not in listed
    named = {t.name: t.error_code for t in metadata(broker, [visible, hidden]).topics}
    assert named == {visible: E.NONE, hidden: E.TOPIC_AUTHORIZATION_FAILED}
    # the same answer whether or not the topic exists: its existence is not disclosed
    ghost = unique("hidden-ghost")
    add_acl(broker, RT.TOPIC, ghost, Op.DESCRIBE, Perm.DENY)
    assert metadata(broker, [ghost]).topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    offsets = call(broker.bootstrap_servers, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=hidden, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 8)
    assert offsets.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_auto_creation_needs_create(broker):
    name = unique("auto")
    add_acl(broker, RT.TOPIC, name, Op.CREATE, Perm.DENY)
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True)
    assert call(broker.bootstrap_servers, req, 12).topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert name not in broker.list_topics()


def test_authorized_operations_come_from_the_acls(broker):
    topic, group = unique("ops-topic"), unique("ops-group")
    create_topic(broker, topic)
    add_acl(broker, RT.TOPIC, topic, Op.READ)        # the only ACL: READ (and the DESCRIBE it implies)
    add_acl(broker, RT.TOPIC, topic, Op.ALTER_CONFIGS)
    resp = metadata(broker, [topic], version=10, include_cluster_authorized_operations=True,
                    include_topic_authorized_operations=True)
    assert resp.topics[0].topic_authorized_operations == \
        (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    every_cluster_op = sum(1 << op for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                                              Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE))
    assert resp.cluster_authorized_operations == every_cluster_op   # no cluster ACL: allow.everyone
    cluster = call(broker.bootstrap_servers, DescribeClusterRequest(include_cluster_authorized_operations=True), 0)
    assert cluster.cluster_authorized_operations == every_cluster_op

    add_acl(broker, RT.GROUP, group, Op.DESCRIBE)
    coordinator_ready(broker, group)
    groups = call(broker.bootstrap_servers, DescribeGroupsRequest(groups=[group], include_authorized_operations=True),
                  5).groups
    assert groups[0].error_code == E.NONE and groups[0].authorized_operations == 1 << Op.DESCRIBE
    denied_group = unique("ops-denied")
    add_acl(broker, RT.GROUP, denied_group, Op.DESCRIBE, principal="User:someone-else")
    groups = call(broker.bootstrap_servers, DescribeGroupsRequest(groups=[denied_group],
                                                                  include_authorized_operations=True), 5).groups
    assert groups[0].error_code == E.GROUP_AUTHORIZATION_FAILED


def _metadata_from(source_host: str, b, topic: str) -> int:
    host, port = b.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10, source_address=(source_host, 0)) as sock:
        send_request(sock, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                           allow_auto_topic_creation=False), 12)
        return read_response(sock, 3, 12)[1].topics[0].error_code


def test_host_rules(broker):
    """An ACL for host 127.0.0.2 applies to connections from there only; a DENY for one host
    leaves the others alone."""
    topic, other = unique("host-topic"), unique("host-deny")
    create_topic(broker, topic)
    create_topic(broker, other)
    add_acl(broker, RT.TOPIC, topic, Op.DESCRIBE, host="127.0.0.2")
    assert _metadata_from("127.0.0.2", broker, topic) == E.NONE
    assert _metadata_from("127.0.0.1", broker, topic) == E.TOPIC_AUTHORIZATION_FAILED
    add_acl(broker, RT.TOPIC, other, Op.ALL)
    add_acl(broker, RT.TOPIC, other, Op.DESCRIBE, Perm.DENY, host="127.0.0.2")
    assert _metadata_from("127.0.0.1", broker, other) == E.NONE
    assert _metadata_from("127.0.0.2", broker, other) == E.TOPIC_AUTHORIZATION_FAILED


def test_prefixed_and_wildcard_principal_rules(broker):
    prefix = unique("team")
    mine, theirs = f"{prefix}-mine", f"{prefix}-theirs"
    for t in (mine, theirs):
        create_topic(broker, t)
    add_acl(broker, RT.TOPIC, f"{prefix}-", Op.DESCRIBE, principal="User:*", pattern=PT.PREFIXED)
    add_acl(broker, RT.TOPIC, theirs, Op.DESCRIBE, Perm.DENY)
    named = {t.name: t.error_code for t in metadata(broker, [mine, theirs]).topics}
    assert named == {mine: E.NONE, theirs: E.TOPIC_AUTHORIZATION_FAILED}


def test_acls_survive_a_restart(tools, lib, tmp_path):
    with Broker(AUTH_CONFIGS) as b:
        topic = unique("durable")
        create_topic(b, topic)
        add_acl(b, RT.TOPIC, topic, Op.DESCRIBE, Perm.DENY)
        b.restart()
        assert metadata(b, [topic]).topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        listed = acls_tool(JavaTools(str(lib), tmp_path), b, "--list", "--topic", topic)
        assert "principal=User:ANONYMOUS, host=*, operation=DESCRIBE, permissionType=DENY" in listed


def test_super_users_pass_every_check():
    """``super.users`` (with the default allow.everyone.if.no.acl.found=false): ANONYMOUS as a super
    user produces, consumes and manages ACLs although a DENY ALL for User:* covers every topic."""
    with Broker({"authorizer.class.name": STANDARD, "super.users": "User:admin;User:ANONYMOUS"}) as b:
        topic = unique("super")
        create_topic(b, topic)
        add_acl(b, RT.TOPIC, "*", Op.ALL, Perm.DENY, principal="User:*")
        p = ck.Producer({"bootstrap.servers": b.bootstrap_servers})
        errors = []
        p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
        p.flush(30)
        assert errors == [None]
        assert metadata(b, [topic]).topics[0].error_code == E.NONE
