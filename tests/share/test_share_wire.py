"""Share groups over the wire against a kcompat process: share sessions and their epochs (a
session goes with its connection),
acknowledgements of records a member does not hold, stale member epochs, unknown topics --
the error codes Kafka answers (KIP-932), and that none of them leaves a partition stuck."""

from __future__ import annotations

import uuid

import confluent_kafka as ck
import pytest

from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.share_acknowledge import ShareAcknowledgeRequest as SA
from kcompat.protocol.messages.share_fetch import ShareFetchRequest as SF
from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest as HB
from kcompat.testing import Broker, admin
from kcompat.testing import wire
from kcompat.testing.wire import call
from tests.share.test_share_consumers import set_group_configs

ACCEPT, RELEASE = 1, 2


@pytest.fixture(scope="module")
def broker():
    with Broker({"group.share.record.lock.duration.ms": "30000"}) as b:
        yield b


@pytest.fixture
def setup(broker):
    """A fresh 1-partition topic with 10 records and a share group reading from the earliest."""
    topic, group = f"w-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic, 1)
    admin.wait_for_leaders(broker.bootstrap_servers, [topic])
    admin.wait_for_coordinator(broker.bootstrap_servers, 0)   # __consumer_offsets, as a client's FindCoordinator
    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0
    set_group_configs(broker.bootstrap_servers, group, {"share.auto.offset.reset": "earliest"})
    md = call(broker.bootstrap_servers, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                         allow_auto_topic_creation=False), 12)
    return broker.bootstrap_servers, topic, md.topics[0].topic_id, group


class Members:
    """One connection per member, kept open as a share consumer keeps it: a share session
    belongs to the connection that uses it and goes when that connection closes."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.socks: dict[str, object] = {}

    def call(self, member: str, request, version: int):
        sock = self.socks.get(member)
        if sock is None:
            sock = self.socks[member] = wire.connect(self.bootstrap)
        wire.send_request(sock, request, version)
        return wire.read_response(sock, type(request).API_KEY, version)[1]

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()


@pytest.fixture
def members(broker):
    m = Members(broker.bootstrap_servers)
    yield m
    m.close()


def fetch(bs, group, member, epoch, topic_id, acks=None, *, wait=500, forget=None):
    parts = [SF.FetchPartition(partition_index=0, acknowledgement_batches=[
        SF.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=[t]) for f, l, t in (acks or [])])]
    req = SF(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait, min_bytes=1,
             max_bytes=1 << 20, max_records=500, batch_size=500,
             topics=[SF.FetchTopic(topic_id=topic_id, partitions=parts)] if topic_id is not None else [],
             forgotten_topics_data=forget or [])
    return bs.call(member, req, 1)


def ack(bs, group, member, epoch, topic_id, acks):
    req = SA(group_id=group, member_id=member, share_session_epoch=epoch, topics=[SA.AcknowledgeTopic(
        topic_id=topic_id, partitions=[SA.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            SA.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=[t]) for f, l, t in acks])])])
    return bs.call(member, req, 1)


def acquired(resp):
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def partition_errors(resp, field="error_code"):
    return [getattr(p, field) for t in resp.responses for p in t.partitions]


def test_session_epochs(setup, members):
    _bs, _topic, tid, group = setup
    bs = members
    assert ack(bs, group, "m1", 0, tid, [(0, 0, ACCEPT)]).error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert ack(bs, group, "m1", 3, tid, [(0, 0, ACCEPT)]).error_code == E.SHARE_SESSION_NOT_FOUND
    assert fetch(bs, group, "m1", 0, tid, [(0, 0, ACCEPT)]).error_code == E.INVALID_REQUEST
    assert fetch(bs, group, "m1", 4, tid).error_code == E.SHARE_SESSION_NOT_FOUND
    r = fetch(bs, group, "m1", 0, tid)
    assert r.error_code == 0 and acquired(r) == [(0, 9, 1)] and r.acquisition_lock_timeout_ms == 30000
    assert fetch(bs, group, "m1", 3, tid).error_code == E.INVALID_SHARE_SESSION_EPOCH
    # the right epoch still works after the refused one, and acknowledging moves it on
    r = ack(bs, group, "m1", 1, tid, [(0, 4, ACCEPT)])
    assert r.error_code == 0 and partition_errors(r) == [0]
    r = fetch(bs, group, "m1", 2, tid, [(5, 9, RELEASE)])
    assert partition_errors(r, "acknowledge_error_code") == [0] and acquired(r) == [(5, 9, 2)]
    # closing the session releases what the member holds: another member gets it at once
    assert fetch(bs, group, "m1", -1, None).error_code == 0
    assert ack(bs, group, "m1", 3, tid, [(5, 5, ACCEPT)]).error_code == E.SHARE_SESSION_NOT_FOUND
    assert acquired(fetch(bs, group, "m2", 0, tid)) == [(5, 9, 3)]


def test_acknowledging_records_another_member_holds(setup, members):
    _bs, _topic, tid, group = setup
    bs = members
    assert acquired(fetch(bs, group, "holder", 0, tid)) == [(0, 9, 1)]
    assert fetch(bs, group, "thief", 0, tid, wait=0).error_code == 0          # nothing left for it
    r = ack(bs, group, "thief", 1, tid, [(0, 9, ACCEPT)])
    assert partition_errors(r) == [E.INVALID_RECORD_STATE]
    r = ack(bs, group, "holder", 1, tid, [(0, 9, 7)])                         # no such type
    assert partition_errors(r) == [E.INVALID_REQUEST]
    r = ack(bs, group, "holder", 2, tid, [(0, 9, ACCEPT)])                    # nothing was changed before
    assert partition_errors(r) == [0]
    # offsets below the share-partition start (all done) are ignored, as Kafka's SharePartition does
    assert partition_errors(ack(bs, group, "holder", 3, tid, [(0, 0, RELEASE)])) == [0]
    assert fetch(bs, group, "thief", 2, tid, wait=0).responses == []            # nothing came back


def test_unknown_topic_and_stale_member_epoch(setup, members):
    bs, _topic, tid, group = setup
    r = fetch(members, group, "m1", 0, uuid.uuid4())
    assert partition_errors(r) == [E.UNKNOWN_TOPIC_ID]
    hb = call(bs, HB(group_id=group, member_id="m1", member_epoch=0, subscribed_topic_names=[_topic]), 1)
    assert hb.error_code == 0 and hb.member_epoch == 1
    stale = call(bs, HB(group_id=group, member_id="m1", member_epoch=7), 1)
    assert stale.error_code == E.FENCED_MEMBER_EPOCH
    left = call(bs, HB(group_id=group, member_id="m1", member_epoch=-1), 1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    assert call(bs, HB(group_id=group, member_id="m1", member_epoch=1), 1).error_code == E.UNKNOWN_MEMBER_ID


def test_a_closed_connection_ends_its_session_and_the_records_wait_for_their_lock(setup, members):
    bs, _topic, tid, group = setup
    assert acquired(fetch(members, group, "gone", 0, tid)) == [(0, 9, 1)]
    members.socks.pop("gone").close()     # as a consumer killed with SIGKILL
    other = Members(bs)
    try:
        # its session is gone with the connection ...
        assert fetch(other, group, "gone", 1, tid).error_code == E.SHARE_SESSION_NOT_FOUND
        # ... and its records stay locked (30 s here): another member gets nothing yet
        assert acquired(fetch(other, group, "next", 0, tid, wait=300)) == []
    finally:
        other.close()


def test_auto_offset_reset_by_duration_and_latest(broker, members):
    bs = broker.bootstrap_servers
    topic = f"w-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1)
    admin.wait_for_leaders(bs, [topic])
    p = ck.Producer({"bootstrap.servers": bs})
    for i in range(5):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0
    md = call(bs, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                  allow_auto_topic_creation=False), 12)
    tid = md.topics[0].topic_id
    hour, latest = f"g-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    set_group_configs(bs, hour, {"share.auto.offset.reset": "by_duration:PT1H"})
    assert acquired(fetch(members, hour, "m1", 0, tid)) == [(0, 4, 1)]      # written within the hour
    assert acquired(fetch(members, latest, "m2", 0, tid, wait=0)) == []    # Kafka's default: the end
    p.produce(topic, value=b"5")
    assert p.flush(30) == 0
    assert acquired(fetch(members, latest, "m2", 1, tid)) == [(5, 5, 1)]
