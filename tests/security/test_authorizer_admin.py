"""The ACL matrix for admin, fetch and transaction APIs on a real kcompat process (issue 19): each
request made once where an ACL allows it and once where one denies it, answered with Kafka's error.

As in test_authorizer_broker, the broker runs Kafka's StandardAuthorizer with
``allow.everyone.if.no.acl.found=true`` and every client is ``User:ANONYMOUS``. Cluster-level
checks use host rules: ALLOW ALL on the cluster for 127.0.0.1 only, so a connection bound to
127.0.0.2 has no cluster permission at all (CLUSTER_AUTHORIZATION_FAILED), while 127.0.0.1 keeps
them. A 3-node cluster shows that brokers talking to each other pass the authorizer and that an
ACL written through one broker is enforced by all.
"""

from __future__ import annotations

import socket
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.create_acls import CreateAclsRequest as CQ
from kcompat.protocol.messages.create_partitions import CreatePartitionsRequest as CPQ
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CTQ
from kcompat.protocol.messages.delete_groups import DeleteGroupsRequest
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest as DRQ
from kcompat.protocol.messages.delete_topics import DeleteTopicsRequest as DTQ
from kcompat.protocol.messages.describe_cluster import DescribeClusterRequest
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DCQ
from kcompat.protocol.messages.elect_leaders import ElectLeadersRequest as ELQ
from kcompat.protocol.messages.fetch import FetchRequest as FQ
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IQ
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.protocol.messages.list_config_resources import ListConfigResourcesRequest as LQ
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.unregister_broker import UnregisterBrokerRequest
from kcompat.protocol.messages.update_features import UpdateFeaturesRequest as UFQ
from kcompat.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kcompat.security.acl import AclOperation as Op, AclPermissionType as Perm, PatternType as PT, ResourceType as RT
from kcompat.testing import Broker, Cluster
from kcompat.testing.process import wait_for
from kcompat.testing.wire import call, read_response, send_request

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTH_CONFIGS = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"}
ANON = "User:ANONYMOUS"
HOME, AWAY = "127.0.0.1", "127.0.0.2"


@pytest.fixture(scope="module")
def broker():
    with Broker(AUTH_CONFIGS) as b:
        add_acl(b, RT.CLUSTER, "kafka-cluster", Op.ALL, host=HOME)
        yield b


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def send(b, request, version: int, source: str = HOME):
    """One round trip from a socket bound to ``source``."""
    host, port = b.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30, source_address=(source, 0)) as sock:
        send_request(sock, request, version)
        return read_response(sock, type(request).API_KEY, version)[1]


def add_acl(b, rtype: RT, name: str, op: Op, perm: Perm = Perm.ALLOW, host: str = "*",
            pattern: PT = PT.LITERAL) -> None:
    resp = send(b, CQ(creations=[CQ.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                                                principal=ANON, host=host, operation=op, permission_type=perm)]), 3)
    assert [r.error_code for r in resp.results] == [0], resp


def test_acl_changes_need_alter_on_the_cluster(broker):
    creation = CQ.AclCreation(resource_type=RT.TOPIC, resource_name="x", resource_pattern_type=PT.LITERAL,
                              principal=ANON, host="*", operation=Op.READ, permission_type=Perm.ALLOW)
    assert send(broker, CQ(creations=[creation]), 3, AWAY).results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert send(broker, CQ(creations=[creation]), 3, HOME).results[0].error_code == E.NONE


def test_create_topics_needs_create_on_the_cluster_or_the_topic(broker):
    """From 127.0.0.2 there is no CREATE on the cluster, so the topic's own ACLs decide (a topic
    without any ACL is open: allow.everyone); from 127.0.0.1 CREATE on the cluster is enough."""
    granted, denied, other = unique("ct-granted"), unique("ct-denied"), unique("ct-other")
    add_acl(broker, RT.TOPIC, granted, Op.CREATE)
    add_acl(broker, RT.TOPIC, denied, Op.CREATE, Perm.DENY)
    add_acl(broker, RT.TOPIC, other, Op.DESCRIBE)   # an ACL, but not CREATE
    req = CTQ(timeout_ms=30000, topics=[CTQ.CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                                        for n in (granted, denied, other)])
    codes = {t.name: t.error_code for t in send(broker, req, 7, AWAY).topics}
    assert codes == {granted: E.NONE, denied: E.TOPIC_AUTHORIZATION_FAILED, other: E.TOPIC_AUTHORIZATION_FAILED}
    req.topics = [t for t in req.topics if t.name != granted]
    codes = {t.name: t.error_code for t in send(broker, req, 7, HOME).topics}
    assert codes == {denied: E.NONE, other: E.NONE}


def test_delete_topics_and_create_partitions(broker):
    keep, doomed = unique("dt-keep"), unique("dt-doomed")
    for t in (keep, doomed):
        broker.create_topic(t, 1)
    add_acl(broker, RT.TOPIC, keep, Op.ALL)
    add_acl(broker, RT.TOPIC, keep, Op.DELETE, Perm.DENY)
    add_acl(broker, RT.TOPIC, keep, Op.ALTER, Perm.DENY)
    grown = send(broker, CPQ(timeout_ms=30000, topics=[CPQ.CreatePartitionsTopic(name=n, count=2, assignments=None)
                                                       for n in (keep, doomed)]), 3)
    assert {r.name: r.error_code for r in grown.results} == {keep: E.TOPIC_AUTHORIZATION_FAILED, doomed: E.NONE}
    # from 127.0.0.2 (no cluster permission) each topic's DELETE decides
    deleted = send(broker, DTQ(timeout_ms=30000, topics=[DTQ.DeleteTopicState(name=n) for n in (keep, doomed)]), 6,
                   AWAY)
    assert {r.name: (r.error_code, r.error_message) for r in deleted.responses} == {
        keep: (E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."), doomed: (E.NONE, None)}
    assert keep in broker.list_topics()
    # DELETE on the cluster deletes any topic (Kafka's ControllerApis.deleteTopics)
    deleted = send(broker, DTQ(timeout_ms=30000, topics=[DTQ.DeleteTopicState(name=keep)]), 6)
    assert deleted.responses[0].error_code == E.NONE


def test_configs_need_describe_configs_and_alter_configs(broker):
    topic = unique("cfg")
    broker.create_topic(topic, 1)
    add_acl(broker, RT.TOPIC, topic, Op.ALL)
    add_acl(broker, RT.TOPIC, topic, Op.ALTER_CONFIGS, Perm.DENY)
    add_acl(broker, RT.TOPIC, topic, Op.DESCRIBE_CONFIGS, Perm.DENY, host=AWAY)
    alter = IQ(resources=[IQ.AlterConfigsResource(resource_type=2, resource_name=topic, configs=[
        IQ.AlterableConfig(name="retention.ms", config_operation=0, value="1000")])])
    assert send(broker, alter, 1).responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    describe = DCQ(resources=[DCQ.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None),
                              DCQ.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None)])
    home = {r.resource_type: r.error_code for r in send(broker, describe, 4).results}
    assert home == {2: E.NONE, 4: E.NONE}
    away = {r.resource_type: r.error_code for r in send(broker, describe, 4, AWAY).results}
    assert away == {2: E.TOPIC_AUTHORIZATION_FAILED, 4: E.CLUSTER_AUTHORIZATION_FAILED}


def test_client_metrics_and_list_config_resources_need_the_cluster(broker):
    """KIP-714 / KIP-1142: ListConfigResources needs DESCRIBE_CONFIGS on the cluster (the whole
    request fails), a client metrics subscription ALTER_/DESCRIBE_CONFIGS on the cluster."""
    for version in (0, 1):
        assert send(broker, LQ(resource_types=[]), version, AWAY).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    alter = IQ(resources=[IQ.AlterConfigsResource(resource_type=16, resource_name="sub", configs=[
        IQ.AlterableConfig(name="interval.ms", config_operation=0, value="1000")])])
    assert send(broker, alter, 1, AWAY).responses[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert send(broker, alter, 1, HOME).responses[0].error_code == E.NONE
    resp = send(broker, LQ(resource_types=[16]), 1, HOME)
    assert (resp.error_code, [r.resource_name for r in resp.config_resources]) == (E.NONE, ["sub"])
    describe = DCQ(resources=[DCQ.DescribeConfigsResource(resource_type=16, resource_name="sub", configuration_keys=None)])
    assert send(broker, describe, 4, AWAY).results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert send(broker, describe, 4, HOME).results[0].error_code == E.NONE


def test_cluster_operations(broker):
    elect = ELQ(election_type=0, topic_partitions=None, timeout_ms=10000)
    assert send(broker, elect, 2, AWAY).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert send(broker, elect, 2, HOME).error_code == E.NONE
    unregister = UnregisterBrokerRequest(broker_id=42)      # ALTER on the cluster, then the controller's answer
    assert send(broker, unregister, 0, AWAY).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert send(broker, unregister, 0, HOME).error_code == E.BROKER_ID_NOT_REGISTERED
    features = UFQ(timeout_ms=10000, validate_only=True, feature_updates=[   # ALTER on the cluster (KIP-584)
        UFQ.FeatureUpdateKey(feature="group.version", max_version_level=1, upgrade_type=1)])
    denied = send(broker, features, 1, AWAY)
    assert (denied.error_code, denied.error_message, denied.results) == \
        (E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [])
    allowed = send(broker, features, 1, HOME)
    assert (allowed.error_code, [(r.feature, r.error_code) for r in allowed.results]) == (E.NONE, [("group.version", 0)])
    markers = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0, topics=[
            WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="whatever", partition_indexes=[0])])])
    assert send(broker, markers, 1, AWAY).markers[0].topics[0].partitions[0].error_code == \
        E.CLUSTER_AUTHORIZATION_FAILED
    cluster = DescribeClusterRequest(include_cluster_authorized_operations=True)
    assert send(broker, cluster, 0, AWAY).cluster_authorized_operations == 0
    assert send(broker, cluster, 0, HOME).cluster_authorized_operations != 0


def test_idempotent_producer_needs_idempotent_write_or_write_on_some_topic():
    """Kafka's InitProducerId check without a transactional id (authorizeByResourceType). A broker
    of its own: an ACL on the topic '*' closes every topic to allow.everyone."""
    with Broker(AUTH_CONFIGS) as b:
        add_acl(b, RT.CLUSTER, "kafka-cluster", Op.ALL, host=HOME)
        idempotent = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        assert send(b, idempotent, 4, AWAY).error_code == E.NONE   # no topic ACL at all: allow.everyone
        add_acl(b, RT.TOPIC, "*", Op.WRITE, Perm.DENY, host=AWAY)
        assert send(b, idempotent, 4, AWAY).error_code == E.CLUSTER_AUTHORIZATION_FAILED
        add_acl(b, RT.TOPIC, "mine-", Op.WRITE, host=AWAY, pattern=PT.PREFIXED)
        assert send(b, idempotent, 4, AWAY).error_code == E.CLUSTER_AUTHORIZATION_FAILED   # the '*' DENY wins
        assert send(b, idempotent, 4, HOME).error_code == E.NONE   # IDEMPOTENT_WRITE on the cluster


def test_fetch_needs_read(broker):
    topic = unique("fetch")
    broker.create_topic(topic, 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce(topic, b"x")
    p.flush(30)
    add_acl(broker, RT.TOPIC, topic, Op.ALL)
    add_acl(broker, RT.TOPIC, topic, Op.READ, Perm.DENY, host=AWAY)
    meta = send(broker, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                        allow_auto_topic_creation=False), 12)
    topic_id = meta.topics[0].topic_id
    req = FQ(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[FQ.FetchTopic(topic_id=topic_id, partitions=[
                 FQ.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")
    home = send(broker, req, 16).responses[0].partitions[0]
    assert home.error_code == E.NONE and home.records
    away = send(broker, req, 16, AWAY).responses[0].partitions[0]
    assert away.error_code == E.TOPIC_AUTHORIZATION_FAILED and not away.records
    deleted = send(broker, DRQ(timeout_ms=10000, topics=[DRQ.DeleteRecordsTopic(name=topic, partitions=[
        DRQ.DeleteRecordsPartition(partition_index=0, offset=1)])]), 2, AWAY)
    assert deleted.topics[0].partitions[0].error_code == E.NONE   # DELETE is not denied from there
    add_acl(broker, RT.TOPIC, topic, Op.DELETE, Perm.DENY)
    deleted = send(broker, DRQ(timeout_ms=10000, topics=[DRQ.DeleteRecordsTopic(name=topic, partitions=[
        DRQ.DeleteRecordsPartition(partition_index=0, offset=1)])]), 2)
    assert deleted.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_delete_groups_needs_delete(broker):
    group = unique("dg")
    add_acl(broker, RT.GROUP, group, Op.DELETE, Perm.DENY)
    other = unique("dg-other")
    resp = send(broker, DeleteGroupsRequest(groups_names=[group, other]), 2)
    codes = {r.group_id: r.error_code for r in resp.results}
    assert codes[group] == E.GROUP_AUTHORIZATION_FAILED and codes[other] != E.GROUP_AUTHORIZATION_FAILED


def test_cluster_brokers_pass_and_enforce_the_same_acls():
    """Replication, forwarding and the quorum work with the authorizer on (the cluster resource has
    no ACL, so allow.everyone lets the brokers' ANONYMOUS connections through, as Kafka); an ACL
    created through one broker is enforced by every broker."""
    with Cluster(n=3, config=AUTH_CONFIGS) as c:
        bootstraps = c.bootstrap_servers.split(",")
        topic = unique("cluster-topic")
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
        p = ck.Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
        for i in range(30):
            p.produce(topic, str(i).encode(), partition=i % 3)
        assert p.flush(60) == 0
        first = bootstraps[0]
        host, port = first.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            send_request(sock, CQ(creations=[CQ.AclCreation(
                resource_type=RT.TOPIC, resource_name=topic, resource_pattern_type=PT.LITERAL, principal=ANON,
                host="*", operation=Op.DESCRIBE, permission_type=Perm.DENY)]), 3)
            assert read_response(sock, 30, 3)[1].results[0].error_code == E.NONE
        for bs in bootstraps:
            wait_for(lambda bs=bs: call(bs, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
                12).topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED, what=f"the ACL enforced by {bs}")


def test_controller_listeners_require_cluster_action():
    """Kafka's ControllerApis: the controller listener serves the cluster's own traffic and needs
    CLUSTER_ACTION (DESCRIBE for DescribeQuorum). With ALL on the cluster for 127.0.0.1 only, the
    brokers (connecting from 127.0.0.1) keep the quorum, registrations and forwarding going, while a
    connection from 127.0.0.2 to a controller port is refused; ApiVersions and DescribeCluster stay open."""
    from kcompat.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
    from kcompat.protocol.messages.describe_quorum import DescribeQuorumRequest as DQQ
    with Cluster(n=3, config=AUTH_CONFIGS) as c:
        first = c.bootstrap_servers.split(",")[0]
        host, port = first.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            send_request(sock, CQ(creations=[CQ.AclCreation(
                resource_type=RT.CLUSTER, resource_name="kafka-cluster", resource_pattern_type=PT.LITERAL,
                principal=ANON, host=HOME, operation=Op.ALL, permission_type=Perm.ALLOW)]), 3)
            assert read_response(sock, 30, 3)[1].results[0].error_code == E.NONE
        controllers = [f"127.0.0.1:{p}" for p in c.controller_ports]

        class Target:   # send() takes anything with bootstrap_servers
            def __init__(self, bs):
                self.bootstrap_servers = bs
        for bs in controllers:
            wait_for(lambda bs=bs: send(Target(bs), CTQ(timeout_ms=10000, topics=[CTQ.CreatableTopic(
                name="from-away", num_partitions=1, replication_factor=1)]), 7, AWAY).topics[0].error_code
                == E.CLUSTER_AUTHORIZATION_FAILED, what=f"the cluster ACL on controller {bs}")
            heartbeat = BrokerHeartbeatRequest(broker_id=1, broker_epoch=0, current_metadata_offset=0,
                                               want_fence=False, want_shut_down=False)
            assert send(Target(bs), heartbeat, 1, AWAY).error_code == E.CLUSTER_AUTHORIZATION_FAILED
            quorum = DQQ(topics=[DQQ.TopicData(topic_name="__cluster_metadata",
                                               partitions=[DQQ.PartitionData(partition_index=0)])])
            assert send(Target(bs), quorum, 1, AWAY).error_code == E.CLUSTER_AUTHORIZATION_FAILED
            assert send(Target(bs), DescribeClusterRequest(endpoint_type=2), 1, AWAY).error_code == E.NONE   # KIP-919
        # the cluster still works: a topic created through a broker that is not the controller is
        # forwarded (from 127.0.0.1) and replicated
        topic = unique("after-gate")
        for bs in c.bootstrap_servers.split(","):
            created = call(bs, CTQ(timeout_ms=30000, topics=[CTQ.CreatableTopic(
                name=f"{topic}-{bs.rsplit(':', 1)[1]}", num_partitions=1, replication_factor=3)]), 7)
            assert created.topics[0].error_code == E.NONE
        p = ck.Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
        p.produce(f"{topic}-{c.bootstrap_servers.split(',')[0].rsplit(':', 1)[1]}", b"v")
        assert p.flush(60) == 0
