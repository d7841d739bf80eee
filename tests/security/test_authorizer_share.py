"""Share groups (KIP-932) with the authorizer on, over the wire against a kcompat process: READ on
the group for ShareGroupHeartbeat/ShareFetch/ShareAcknowledge (GROUP_AUTHORIZATION_FAILED), READ
on each topic for ShareFetch/ShareAcknowledge (TOPIC_AUTHORIZATION_FAILED for that topic's
partitions while the others are served, as Kafka's handleShareFetchRequest), DESCRIBE on every
subscribed topic for ShareGroupHeartbeat, and the share session going on across the refusals."""

from __future__ import annotations

import uuid

import confluent_kafka as ck
import pytest

from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.share_acknowledge import ShareAcknowledgeRequest as SA
from kcompat.protocol.messages.share_fetch import ShareFetchRequest as SF
from kcompat.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest as HB
from kcompat.security.acl import AclOperation as Op, AclPermissionType as Perm, ResourceType as RT
from kcompat.testing import Broker, admin
from kcompat.testing.wire import call
from tests.security.test_authorizer_broker import AUTH_CONFIGS, add_acl
from tests.share.test_share_consumers import set_group_configs
from tests.share.test_share_wire import ACCEPT, Members, acquired

AUTH_CONFIGS_SHARE = {**AUTH_CONFIGS, "group.share.record.lock.duration.ms": "30000"}


@pytest.fixture(scope="module")
def broker():
    with Broker(AUTH_CONFIGS_SHARE) as b:
        yield b


@pytest.fixture
def members(broker):
    m = Members(broker.bootstrap_servers)
    yield m
    m.close()


def topic_with_records(b, n: int = 5):
    topic = f"s-{uuid.uuid4().hex[:8]}"
    b.create_topic(topic, 1)
    admin.wait_for_leaders(b.bootstrap_servers, [topic])
    p = ck.Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(n):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0
    md = call(b.bootstrap_servers, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                   allow_auto_topic_creation=False), 12)
    return topic, md.topics[0].topic_id


def share_fetch(members, group, member, epoch, topic_ids, acks=None):
    req = SF(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=500, min_bytes=1,
             max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[], topics=[
                 SF.FetchTopic(topic_id=tid, partitions=[SF.FetchPartition(partition_index=0, acknowledgement_batches=[
                     SF.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
                     for f, last, t in (acks or {}).get(tid, [])])]) for tid in topic_ids])
    return members.call(member, req, 1)


def by_topic(resp, field="error_code"):
    return {t.topic_id: [getattr(p, field) for p in t.partitions] for t in resp.responses}


@pytest.fixture
def topics(broker):
    admin.wait_for_coordinator(broker.bootstrap_servers, 0)
    (_, open_id), (closed, closed_id) = topic_with_records(broker), topic_with_records(broker)
    add_acl(broker, RT.TOPIC, closed, Op.READ, Perm.DENY)
    return open_id, closed, closed_id


def test_share_fetch_refuses_a_topic_and_serves_the_others(broker, members, topics):
    open_id, _closed, closed_id = topics
    group = f"g-{uuid.uuid4().hex[:6]}"
    set_group_configs(broker.bootstrap_servers, group, {"share.auto.offset.reset": "earliest"})
    r = share_fetch(members, group, "m1", 0, [open_id, closed_id])
    assert r.error_code == E.NONE
    assert by_topic(r)[closed_id] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert acquired(r) == [(0, 4, 1)]
    # the session goes on: acknowledgements for the refused topic are refused, the others applied
    r = share_fetch(members, group, "m1", 1, [open_id, closed_id],
                    acks={open_id: [(0, 4, ACCEPT)], closed_id: [(0, 0, ACCEPT)]})
    assert by_topic(r, "acknowledge_error_code")[closed_id] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert by_topic(r, "acknowledge_error_code").get(open_id, [E.NONE]) == [E.NONE]
    ack = SA(group_id=group, member_id="m1", share_session_epoch=2, topics=[SA.AcknowledgeTopic(
        topic_id=closed_id, partitions=[SA.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            SA.AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[ACCEPT])])])])
    r = members.call("m1", ack, 1)
    assert r.error_code == E.NONE and by_topic(r) == {closed_id: [E.TOPIC_AUTHORIZATION_FAILED]}


def test_share_group_read_and_subscribed_topics(broker, members, topics):
    open_id, closed, _closed_id = topics
    group = f"denied-{uuid.uuid4().hex[:6]}"
    add_acl(broker, RT.GROUP, group, Op.READ, Perm.DENY)
    hb = HB(group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None, subscribed_topic_names=["x"])
    assert call(broker.bootstrap_servers, hb, 1).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert share_fetch(members, group, "m1", 0, [open_id]).error_code == E.GROUP_AUTHORIZATION_FAILED
    # a subscription naming a topic that may not be described is refused as a whole
    add_acl(broker, RT.TOPIC, closed, Op.DESCRIBE, Perm.DENY)
    allowed_group = f"g-{uuid.uuid4().hex[:6]}"
    hb = HB(group_id=allowed_group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
            subscribed_topic_names=[closed])
    assert call(broker.bootstrap_servers, hb, 1).error_code == E.TOPIC_AUTHORIZATION_FAILED
    # the group has an ACL (the DENY READ) and none allows DESCRIBE: refused; then allowed
    describe = ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=True)
    assert call(broker.bootstrap_servers, describe, 1).groups[0].error_code == E.GROUP_AUTHORIZATION_FAILED
    # a share group with READ allowed (which implies DESCRIBE): its authorized operations say so
    open_topic = next(t.name for t in call(broker.bootstrap_servers, MetadataRequest(topics=None), 12).topics
                      if t.topic_id == open_id)
    member_group = f"g-{uuid.uuid4().hex[:6]}"
    add_acl(broker, RT.GROUP, member_group, Op.READ)
    hb = HB(group_id=member_group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
            subscribed_topic_names=[open_topic])
    assert call(broker.bootstrap_servers, hb, 1).error_code == E.NONE
    described = call(broker.bootstrap_servers, ShareGroupDescribeRequest(
        group_ids=[member_group], include_authorized_operations=True), 1).groups[0]
    assert described.error_code == E.NONE and len(described.members) == 1
    assert described.authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
