"""The ACL matrix side by side: kcompat and Apache Kafka 4.3.1 (StandardAuthorizer) get the same
requests and must give the same authorization answers (issue 19).

Both run with ``allow.everyone.if.no.acl.found=true`` and the same ACLs for ``User:ANONYMOUS``:
ALLOW ALL on the cluster from 127.0.0.1 only, a topic, a transactional id and a group that are
denied. Requests go out from sockets bound to 127.0.0.1 or 127.0.0.2, so host rules decide
cluster-level answers. Only what authorization decides is compared (error codes and the messages
of refusals), not answers that differ for other reasons (offsets, coordinator warm-up, the texts
of non-authorization errors).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from conformance import maven
from conformance.reference import ReferenceKafka
from kcompat.protocol import records as rb
from kcompat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest as AOQ
from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest as APQ
from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest as CGDQ
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as CGHQ
from kcompat.protocol.messages.create_acls import CreateAclsRequest as CQ
from kcompat.protocol.messages.create_partitions import CreatePartitionsRequest as CPQ
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CTQ
from kcompat.protocol.messages.delete_acls import DeleteAclsRequest as DQ
from kcompat.protocol.messages.delete_groups import DeleteGroupsRequest as DGRQ
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest as DRQ
from kcompat.protocol.messages.describe_acls import DescribeAclsRequest as DAQ
from kcompat.protocol.messages.describe_cluster import DescribeClusterRequest as DCLQ
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DCQ
from kcompat.protocol.messages.describe_groups import DescribeGroupsRequest as DGQ
from kcompat.protocol.messages.describe_producers import DescribeProducersRequest as DPQ
from kcompat.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest as DTPQ
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsRequest as DTXQ
from kcompat.protocol.messages.elect_leaders import ElectLeadersRequest as ELQ
from kcompat.protocol.messages.end_txn import EndTxnRequest as ETQ
from kcompat.protocol.messages.fetch import FetchRequest as FQ
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest as FCQ
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IQ
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest as IPQ
from kcompat.protocol.messages.join_group import JoinGroupRequest as JGQ
from kcompat.protocol.messages.list_groups import ListGroupsRequest as LGQ
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest as LOQ
from kcompat.protocol.messages.list_transactions import ListTransactionsRequest as LTQ
from kcompat.protocol.messages.metadata import MetadataRequest as MQ
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest as OCQ
from kcompat.protocol.messages.offset_delete import OffsetDeleteRequest as ODQ
from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest as OFQ
from kcompat.protocol.messages.produce import ProduceRequest as PQ
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest as TOQ
from kcompat.protocol.messages.write_txn_markers import WriteTxnMarkersRequest as WMQ
from kcompat.testing import Broker
from kcompat.testing.process import wait_for
from kcompat.testing.wire import read_response, send_request

PROPS = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
         "allow.everyone.if.no.acl.found": "true"}
ANON = "User:ANONYMOUS"
HOME, AWAY = "127.0.0.1", "127.0.0.2"
OK, DEN, HID = "ok-t", "den-t", "hid-t"   # open topic; denied from AWAY; not describable
OK_TX, DEN_TX, OK_G, DEN_G = "ok-tx", "den-tx", "ok-g", "den-g"
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
ALL, READ, WRITE, DESCRIBE = 2, 3, 4, 8
DENY, ALLOW = 2, 3


TOPIC_IDS: dict[str, dict] = {}   # bootstrap -> topic name -> id (ids differ between the brokers)


def send(bs: str, req, version: int, source: str = HOME):
    host, port = bs.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30, source_address=(source, 0)) as sock:
        send_request(sock, req, version)
        return read_response(sock, type(req).API_KEY, version)[1]


def closes(bs: str, req, version: int) -> bool:
    """Whether the broker closes the connection instead of answering."""
    try:
        send(bs, req, version)
    except ConnectionError:
        return True
    return False


def acl(bs: str, rtype: int, name: str, op: int, perm: int, host: str = "*", pattern: int = 3):
    r = send(bs, CQ(creations=[CQ.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                                              principal=ANON, host=host, operation=op, permission_type=perm)]), 3)
    return [(x.error_code, x.error_message) for x in r.results]


EVERY = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
             host_filter=None, operation=1, permission_type=1)


def wait_for_acls(bs: str, resource_type: int, name: str) -> None:
    """Until the broker answering DescribeAcls has applied an ACL on the resource (Kafka's brokers
    apply the controller's records a moment after CreateAcls answers)."""
    wait_for(lambda: any(r.resource_type == resource_type and r.resource_name == name
                         for r in send(bs, DAQ(**EVERY), 3).resources), what=f"the ACL on {name}")


def codes(entries, name="name", parts="partitions", code="error_code"):
    return sorted((getattr(t, name), [getattr(p, code) for p in getattr(t, parts)]) for t in entries)


def setup(bs: str) -> dict:
    """The ACLs and topics both brokers get; returns what the ACL requests answered."""
    out = {"create_cluster_acl": acl(bs, CLUSTER, "kafka-cluster", ALL, ALLOW, host=HOME)}
    created = send(bs, CTQ(timeout_ms=30000, topics=[CTQ.CreatableTopic(name=n, num_partitions=1,
                                                                         replication_factor=1)
                                                     for n in (OK, DEN, HID)]), 7)
    TOPIC_IDS[bs] = {t.name: t.topic_id for t in created.topics}
    wait_for(lambda: all(t.error_code == 0 for t in send(bs, MQ(topics=[MQ.MetadataRequestTopic(name=n) for n in (
        OK, DEN, HID)], allow_auto_topic_creation=False), 12).topics), what="the topics")
    out["acls"] = [acl(bs, TOPIC, DEN, ALL, ALLOW), acl(bs, TOPIC, DEN, ALL, DENY, host=AWAY),
                   acl(bs, TOPIC, HID, DESCRIBE, DENY), acl(bs, TXN, DEN_TX, WRITE, DENY),
                   acl(bs, TXN, DEN_TX, DESCRIBE, ALLOW), acl(bs, GROUP, DEN_G, READ, DENY),
                   acl(bs, TOPIC, "pre-", READ, ALLOW, pattern=4), acl(bs, TOPIC, "*", READ, ALLOW, pattern=4),
                   acl(bs, GROUP, "gdesc", DESCRIBE, ALLOW), acl(bs, GROUP, "gdesc", DESCRIBE, ALLOW)]
    wait_for_acls(bs, GROUP, "gdesc")
    # the coordinators serve once their internal topics exist (FindCoordinator creates them)
    for key_type, key in ((0, OK_G), (1, OK_TX)):
        wait_for(lambda: send(bs, FCQ(key_type=key_type, coordinator_keys=[key]), 4).coordinators[0].error_code == 0,
                 timeout=60, what=f"a coordinator for {key}")
    wait_for(lambda: send(bs, IPQ(transactional_id=None, transaction_timeout_ms=60000), 4).error_code == 0,
             timeout=60, what="the producer id manager")
    wait_for(lambda: send(bs, OCQ(group_id=OK_G, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                                  topics=[OCQ.OffsetCommitRequestTopic(name=OK, partitions=[
                                      OCQ.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                       committed_metadata="")])]),
                          8).topics[0].partitions[0].error_code == 0, timeout=60, what="the group coordinator")
    return out


def acl_requests(bs: str) -> dict:
    out = {}
    bad = {"cluster-name": (CLUSTER, "other", 3, ANON, 7, ALLOW), "match": (TOPIC, "t", 2, ANON, READ, ALLOW),
           "no-colon": (TOPIC, "t", 3, "alice", READ, ALLOW), "empty": (TOPIC, "", 3, ANON, READ, ALLOW),
           "any-op": (TOPIC, "t", 3, ANON, 1, ALLOW), "any-perm": (TOPIC, "t", 3, ANON, READ, 1),
           "any-type": (1, "t", 3, ANON, READ, ALLOW), "token": (6, "tok", 3, ANON, DESCRIBE, ALLOW),
           "user": (7, "u", 3, ANON, 13, ALLOW)}
    for key, (rt, name, pt, principal, op, perm) in bad.items():
        r = send(bs, CQ(creations=[CQ.AclCreation(resource_type=rt, resource_name=name, resource_pattern_type=pt,
                                                  principal=principal, host="*", operation=op,
                                                  permission_type=perm)]), 3)
        out[f"create {key}"] = [(x.error_code, x.error_message) for x in r.results]
    wait_for_acls(bs, 7, "u")
    out["create unknown closes"] = closes(bs, CQ(creations=[CQ.AclCreation(
        resource_type=0, resource_name="t", resource_pattern_type=3, principal=ANON, host="*", operation=READ,
        permission_type=ALLOW)]), 3)
    out["create from AWAY"] = [r.error_code for r in send(bs, CQ(creations=[CQ.AclCreation(
        resource_type=TOPIC, resource_name="x", resource_pattern_type=3, principal=ANON, host="*", operation=READ,
        permission_type=ALLOW)]), 3, AWAY).results]
    every = EVERY
    out["describe from AWAY"] = send(bs, DAQ(**every), 3, AWAY).error_code
    listed = send(bs, DAQ(**every), 3)
    out["describe all"] = sorted((r.resource_type, r.resource_name, r.pattern_type,
                                  sorted((a.principal, a.host, a.operation, a.permission_type) for a in r.acls))
                                 for r in listed.resources)
    match = send(bs, DAQ(**dict(every, resource_type_filter=TOPIC, resource_name_filter="pre-abc",
                                pattern_type_filter=2)), 3)
    out["describe match"] = sorted((r.resource_name, r.pattern_type) for r in match.resources)
    out["describe unknown closes"] = closes(bs, DAQ(**dict(every, resource_type_filter=0)), 3)
    out["delete unknown closes"] = closes(bs, DQ(filters=[DQ.DeleteAclsFilter(**dict(every, operation=0))]), 3)
    deleted = send(bs, DQ(filters=[DQ.DeleteAclsFilter(**dict(every, resource_type_filter=6)),
                                   DQ.DeleteAclsFilter(**dict(every, resource_type_filter=7))]), 3)
    out["delete"] = [(f.error_code, sorted((m.resource_name, m.operation) for m in f.matching_acls))
                     for f in deleted.filter_results]
    return out


def topic_requests(bs: str) -> dict:
    out = {}
    md = send(bs, MQ(topics=None, allow_auto_topic_creation=False), 12)
    out["metadata all"] = sorted(t.name for t in md.topics if t.name in (OK, DEN, HID))
    md = send(bs, MQ(topics=[MQ.MetadataRequestTopic(name=n) for n in (OK, HID, "ghost-hidden")],
                     allow_auto_topic_creation=False), 12)
    out["metadata named"] = sorted((t.name, t.error_code) for t in md.topics)
    acl(bs, TOPIC, "ghost-hidden", DESCRIBE, DENY)
    wait_for_acls(bs, TOPIC, "ghost-hidden")
    out["metadata ghost"] = send(bs, MQ(topics=[MQ.MetadataRequestTopic(name="ghost-hidden")],
                                        allow_auto_topic_creation=True), 12).topics[0].error_code
    md = send(bs, MQ(topics=[MQ.MetadataRequestTopic(name=n) for n in (OK, DEN)], allow_auto_topic_creation=False,
                     include_topic_authorized_operations=True, include_cluster_authorized_operations=True), 10, AWAY)
    out["metadata ops AWAY"] = (sorted((t.name, t.error_code, t.topic_authorized_operations) for t in md.topics),
                                md.cluster_authorized_operations)
    md = send(bs, MQ(topics=[MQ.MetadataRequestTopic(name=DEN)], allow_auto_topic_creation=False,
                     include_topic_authorized_operations=True, include_cluster_authorized_operations=True), 10)
    out["metadata ops HOME"] = ([t.topic_authorized_operations for t in md.topics], md.cluster_authorized_operations)
    hid_id = TOPIC_IDS[bs][HID]
    by_id = send(bs, MQ(topics=[MQ.MetadataRequestTopic(name=None, topic_id=hid_id)],
                        allow_auto_topic_creation=False), 12)
    out["metadata by id"] = [(t.name, t.error_code, t.topic_id == hid_id) for t in by_id.topics]
    dtp = send(bs, DTPQ(topics=[DTPQ.TopicRequest(name=n) for n in (OK, HID)], response_partition_limit=100,
                        cursor=None), 0)
    out["describe topic partitions"] = [(t.name, t.error_code) for t in dtp.topics]
    out["describe cluster ops"] = [send(bs, DCLQ(include_cluster_authorized_operations=True), 0,
                                        src).cluster_authorized_operations for src in (HOME, AWAY)]
    batch = rb.build_batch([(int(time.time() * 1000), None, b"v", ())])
    for src in (HOME, AWAY):
        r = send(bs, PQ(transactional_id=DEN_TX, acks=1, timeout_ms=10000, topic_data=[PQ.TopicProduceData(
            name=n, partition_data=[PQ.PartitionProduceData(index=0, records=batch)]) for n in (OK, DEN)]), 9, src)
        out[f"produce {src}"] = codes(r.responses, parts="partition_responses")
    fetch = FQ(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
               session_epoch=-1, topics=[FQ.FetchTopic(topic=n, partitions=[FQ.FetchPartition(
                   partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]) for n in (OK, DEN)],
               forgotten_topics_data=[], rack_id="")
    out["fetch AWAY"] = codes(send(bs, fetch, 12, AWAY).responses, name="topic")
    offsets = LOQ(replica_id=-1, isolation_level=0, topics=[LOQ.ListOffsetsTopic(name=n, partitions=[
        LOQ.ListOffsetsPartition(partition_index=0, timestamp=-1)]) for n in (OK, DEN)])
    out["list offsets AWAY"] = codes(send(bs, offsets, 8, AWAY).topics)
    out["describe producers AWAY"] = codes(send(bs, DPQ(topics=[DPQ.TopicRequest(name=n, partition_indexes=[0])
                                                                for n in (OK, DEN)]), 0, AWAY).topics)
    out["delete records AWAY"] = codes(send(bs, DRQ(timeout_ms=5000, topics=[DRQ.DeleteRecordsTopic(
        name=n, partitions=[DRQ.DeleteRecordsPartition(partition_index=0, offset=0)]) for n in (OK, DEN)]),
        2, AWAY).topics)
    r = send(bs, CTQ(timeout_ms=30000, topics=[CTQ.CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                                               for n in (DEN, "pre-new")]), 7, AWAY)
    out["create topics AWAY"] = sorted((t.name, t.error_code, t.error_message) for t in r.topics
                                       if t.error_code == 29)
    acl(bs, TOPIC, "cfg-hidden", 5, ALLOW)   # CREATE only: its configs may not be described
    wait_for_acls(bs, TOPIC, "cfg-hidden")
    r = send(bs, CTQ(timeout_ms=30000, topics=[CTQ.CreatableTopic(name="cfg-hidden", num_partitions=1,
                                                                  replication_factor=1)]), 7, AWAY).topics[0]
    out["create topic without describe configs"] = (r.error_code, r.topic_config_error_code, r.num_partitions,
                                                     r.replication_factor, len(r.configs or []))
    r = send(bs, CPQ(timeout_ms=5000, validate_only=True, topics=[CPQ.CreatePartitionsTopic(
        name=n, count=2, assignments=None) for n in (OK, DEN)]), 3, AWAY)
    out["create partitions AWAY"] = sorted((x.name, x.error_code, x.error_message) for x in r.results)
    configs = [(TOPIC, DEN, "retention.ms", "100000"), (4, "", "log.cleaner.threads", "1"),
               (8, "1", "kafka", "INFO"), (32, DEN_G, "consumer.session.timeout.ms", "45000")]
    r = send(bs, IQ(validate_only=True, resources=[IQ.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
        IQ.AlterableConfig(name=c, config_operation=0, value=v)]) for t, n, c, v in configs]), 1, AWAY)
    out["alter configs AWAY"] = sorted((x.resource_type, x.error_code, x.error_message) for x in r.responses)
    r = send(bs, DCQ(resources=[DCQ.DescribeConfigsResource(resource_type=t, resource_name=n,
                                                            configuration_keys=["retention.ms"])
                                for t, n in ((TOPIC, OK), (TOPIC, HID), (4, ""))]), 4, AWAY)
    out["describe configs AWAY"] = sorted((x.resource_name, x.error_code, x.error_message if x.error_code else None)
                                          for x in r.results)
    elect = send(bs, ELQ(election_type=0, timeout_ms=5000, topic_partitions=[ELQ.TopicPartitions(topic=OK,
                                                                                                 partitions=[0])]),
                 2, AWAY)
    out["elect leaders AWAY"] = (elect.error_code, codes(elect.replica_election_results, name="topic",
                                                         parts="partition_result"))
    markers = WMQ(markers=[WMQ.WritableTxnMarker(producer_id=1, producer_epoch=0, transaction_result=False,
                                                 coordinator_epoch=0, topics=[WMQ.WritableTxnMarkerTopic(
                                                     name=OK, partition_indexes=[0])])])
    out["write markers AWAY"] = send(bs, markers, 1, AWAY).markers[0].topics[0].partitions[0].error_code
    return out


def group_and_txn_requests(bs: str) -> dict:
    out = {}
    out["init producer id"] = [send(bs, IPQ(transactional_id=t, transaction_timeout_ms=60000), 4, src).error_code
                               for t, src in ((DEN_TX, HOME), (None, AWAY))]
    out["add partitions v3"] = [codes(send(bs, APQ(v3_and_below_transactional_id=t, v3_and_below_producer_id=1,
                                                   v3_and_below_producer_epoch=0, v3_and_below_topics=[
                                                       APQ.AddPartitionsToTxnTopic(name=n, partitions=[0])
                                                       for n in (OK, DEN)]), 3, src).results_by_topic_v3_and_below,
                                      parts="results_by_partition", code="partition_error_code")
                                for t, src in ((DEN_TX, HOME), (OK_TX, AWAY))]
    out["add partitions v4 AWAY"] = send(bs, APQ(transactions=[APQ.AddPartitionsToTxnTransaction(
        transactional_id=OK_TX, producer_id=1, producer_epoch=0, verify_only=True, topics=[
            APQ.AddPartitionsToTxnTopic(name=OK, partitions=[0])])]), 4, AWAY).error_code
    out["add offsets"] = [send(bs, AOQ(transactional_id=t, producer_id=1, producer_epoch=0, group_id=g), 3).error_code
                          for t, g in ((DEN_TX, OK_G), (OK_TX, DEN_G))]
    out["end txn"] = send(bs, ETQ(transactional_id=DEN_TX, producer_id=1, producer_epoch=0, committed=True),
                          3).error_code
    for tx, g, src in ((DEN_TX, OK_G, HOME), (OK_TX, DEN_G, HOME), (OK_TX, OK_G, AWAY)):
        r = send(bs, TOQ(transactional_id=tx, group_id=g, producer_id=1, producer_epoch=0, generation_id=-1,
                         member_id="", group_instance_id=None, topics=[TOQ.TxnOffsetCommitRequestTopic(
                             name=n, partitions=[TOQ.TxnOffsetCommitRequestPartition(
                                 partition_index=0, committed_offset=0, committed_leader_epoch=-1,
                                 committed_metadata="")]) for n in (OK, DEN)]), 3, src)
        out[f"txn offset commit {tx} {g} {src}"] = [c for name, c in codes(r.topics) if name == DEN or c[0] in (
            29, 30, 53)]
    out["describe transactions AWAY"] = sorted((s.transactional_id, s.error_code) for s in send(
        bs, DTXQ(transactional_ids=[DEN_TX, OK_TX]), 0, AWAY).transaction_states if s.error_code in (53,))
    out["find coordinator"] = sorted((c.key, c.error_code) for kt, keys in ((1, [DEN_TX, OK_TX]), (0, [DEN_G, OK_G]))
                                     for c in send(bs, FCQ(key_type=kt, coordinator_keys=keys), 4).coordinators)
    out["join denied"] = send(bs, JGQ(group_id=DEN_G, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                      member_id="", protocol_type="consumer", protocols=[
                                          JGQ.JoinGroupRequestProtocol(name="range", metadata=b"")]), 5).error_code
    r = send(bs, OCQ(group_id=OK_G, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1, topics=[
        OCQ.OffsetCommitRequestTopic(name=n, partitions=[OCQ.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_metadata="")]) for n in (OK, HID)]), 8)
    out["offset commit"] = codes(r.topics)
    r = send(bs, OFQ(groups=[OFQ.OffsetFetchRequestGroup(group_id=g, topics=None) for g in (OK_G, DEN_G)],
                     require_stable=False), 8)
    out["offset fetch all"] = sorted((g.group_id, g.error_code, sorted(t.name for t in g.topics)) for g in r.groups)
    r = send(bs, OFQ(groups=[OFQ.OffsetFetchRequestGroup(group_id=OK_G, topics=[OFQ.OffsetFetchRequestTopics(
        name=n, partition_indexes=[0]) for n in (OK, HID)])], require_stable=False), 8)
    out["offset fetch named"] = sorted((t.name, [p.error_code for p in t.partitions]) for g in r.groups
                                       for t in g.topics)
    r = send(bs, DGQ(groups=[OK_G, DEN_G, "gdesc"], include_authorized_operations=True), 5)
    out["describe groups"] = sorted((g.group_id, g.error_code, g.authorized_operations) for g in r.groups)
    out["list groups AWAY"] = sorted(g.group_id for g in send(bs, LGQ(states_filter=[], types_filter=[]), 5,
                                                              AWAY).groups if g.group_id in (OK_G, DEN_G, "gdesc"))
    r = send(bs, ODQ(group_id=OK_G, topics=[ODQ.OffsetDeleteRequestTopic(name=n, partitions=[
        ODQ.OffsetDeleteRequestPartition(partition_index=0)]) for n in (OK, DEN)]), 0, AWAY)
    out["offset delete AWAY"] = (r.error_code, codes(r.topics))
    out["offset delete denied group"] = send(bs, ODQ(group_id=DEN_G, topics=[]), 0).error_code
    out["list transactions AWAY"] = send(bs, LTQ(state_filters=[], producer_id_filters=[], duration_filter=-1), 1,
                                         AWAY).error_code
    heartbeat = dict(member_id="m1", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=30000,
                     subscribed_topic_regex=None, server_assignor=None, topic_partitions=[])
    out["consumer heartbeat"] = [
        send(bs, CGHQ(group_id=DEN_G, subscribed_topic_names=[OK], **heartbeat), 0).error_code,
        send(bs, CGHQ(group_id="cg-away", subscribed_topic_names=[OK, HID], **heartbeat), 0).error_code]
    r = send(bs, CGDQ(group_ids=[DEN_G, "gdesc"], include_authorized_operations=True), 0)
    out["consumer group describe"] = sorted((g.group_id, g.error_code, g.authorized_operations) for g in r.groups)
    out["delete groups"] = sorted((r.group_id, r.error_code) for r in send(bs, DGRQ(groups_names=[DEN_G]),
                                                                           2).results)
    return out


def matrix(bs: str) -> dict:
    return {**setup(bs), **acl_requests(bs), **topic_requests(bs), **group_and_txn_requests(bs)}


class _AuthorizingKafka(ReferenceKafka):
    def server_properties(self) -> dict[str, str]:
        return {**super().server_properties(), **PROPS}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    kafka = _AuthorizingKafka(maven.resolve_kafka("4.3.1"), "4.3.1", Path(tmp_path_factory.mktemp("kafka")))
    kafka.start()
    try:
        yield matrix(kafka.bootstrap)
    finally:
        kafka.stop()


def test_kcompat_answers_as_kafka_4_3_1(reference):
    with Broker(PROPS) as b:
        ours = matrix(b.bootstrap_servers)
    differences = {k: (ours.get(k), v) for k, v in reference.items() if ours.get(k) != v}
    assert not differences, "\n".join(f"{k}:\n  kcompat {o}\n  kafka   {r}" for k, (o, r) in differences.items())
    assert set(ours) == set(reference)
