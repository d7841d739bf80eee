"""KIP-848 consumer groups over the wire, answers compared with Apache Kafka 4.3.1 side by side
(raw ConsumerGroupHeartbeat / ConsumerGroupDescribe / JoinGroup / LeaveGroup): the INVALID_REQUEST
texts of the heartbeat's validation, RE2J's descriptions of bad SubscribedTopicRegex values, the
shape of member ids the coordinator makes up (Uuid.toString), ConsumerGroupDescribe of a missing
group, and a classic LeaveGroup that removes consumer-protocol members
(GroupMetadataManager.classicGroupLeaveToConsumerGroup)."""

from __future__ import annotations

import re
import struct

import pytest

from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as HB
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.join_group import JoinGroupRequest
from kcompat.protocol.messages.leave_group import LeaveGroupRequest
from kcompat.testing import wire
from tests.support.broker_process import wait_for

INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID = 42, 25, 82
GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED, INVALID_REGULAR_EXPRESSION = 69, 79, 128
NOT_READY = {14, 15, 16}   # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
KAFKA_UUID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}")   # Uuid.toString: 22 url-safe base64 chars


def ready(bootstrap: str, request, version: int):
    """The answer once the group's coordinator is ready (clients retry the codes of NOT_READY)."""
    wire.call(bootstrap, FindCoordinatorRequest(key_type=0, coordinator_keys=[request.group_id]), 4)

    def answered():
        resp = wire.call(bootstrap, request, version)
        return None if resp.error_code in NOT_READY else resp
    return wait_for(answered, 60, what="the group coordinator")


def heartbeat(bootstrap: str, group: str, member: str, epoch: int, version: int = 1, **kw):
    return ready(bootstrap, HB(group_id=group, member_id=member, member_epoch=epoch, **kw), version)


def join(bootstrap: str, group: str, member: str, **kw):
    kw.setdefault("subscribed_topic_names", ["wire-t"])
    return heartbeat(bootstrap, group, member, 0, rebalance_timeout_ms=5000, topic_partitions=[], **kw)


def test_heartbeat_validation_texts(broker):
    b = broker.bootstrap
    empty = wire.call(b, HB(group_id="", member_id="m", member_epoch=0, rebalance_timeout_ms=5000,
                            subscribed_topic_names=["t"], topic_partitions=[]), 1)
    assert (empty.error_code, empty.error_message) == (INVALID_REQUEST, "GroupId can't be empty.")
    no_topics = join(b, "wire-v1", "m", subscribed_topic_names=None)
    assert (no_topics.error_code, no_topics.error_message) == (
        INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")


@pytest.mark.parametrize("regex,description", [
    ("t(", "missing closing )"),
    ("t)", "regexp/syntax: internal error"),
    ("[a", "missing closing ]"),
    ("a\\", "trailing backslash at end of expression"),
    ("*", "missing argument to repetition operator"),
    ("a{2,1}", "invalid repeat count"),
    ("a**", "invalid nested repetition operator"),
    ("(?<", "invalid named capture"),
    ("(?i", "invalid or unsupported Perl syntax"),
    ("\\8", "invalid escape sequence"),
    ("[z-a]", "invalid character class range"),
])
def test_invalid_regex_is_described_as_re2j_does(broker, regex, description):
    resp = join(broker.bootstrap, "wire-re", "m", subscribed_topic_names=None, subscribed_topic_regex=regex)
    assert (resp.error_code, resp.error_message) == (
        INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}.")


def test_member_ids_the_coordinator_makes_up_are_kafka_uuids(broker):
    b = broker.bootstrap
    v0 = heartbeat(
        b, "wire-ids", "", 0, version=0, rebalance_timeout_ms=5000, subscribed_topic_names=["wire-t"],
        topic_partitions=[])
    assert v0.error_code == 0 and KAFKA_UUID.fullmatch(v0.member_id), v0.member_id
    # a classic JoinGroup to the consumer group: MEMBER_ID_REQUIRED with a Uuid.toString id
    subscription = struct.pack(">hih", 0, 1, 6) + b"wire-t" + struct.pack(">i", -1)
    jg = wire.call(b, JoinGroupRequest(group_id="wire-ids", session_timeout_ms=30000, rebalance_timeout_ms=30000,
                                       member_id="", protocol_type="consumer", protocols=[
                                           JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                     metadata=subscription)]), 9)
    assert jg.error_code == MEMBER_ID_REQUIRED and KAFKA_UUID.fullmatch(jg.member_id), jg.member_id


def test_describe_of_a_missing_group_and_a_member_without_regex(broker):
    b = broker.bootstrap
    assert join(b, "wire-d", "m1").error_code == 0
    resp = wire.call(b, ConsumerGroupDescribeRequest(group_ids=["wire-d", "wire-missing"]), 1)
    found = {g.group_id: g for g in resp.groups}
    missing = found["wire-missing"]
    assert (missing.error_code, missing.error_message, missing.group_state, missing.members) == (
        GROUP_ID_NOT_FOUND, "Group wire-missing not found.", "", [])
    [member] = found["wire-d"].members
    assert member.subscribed_topic_names == ["wire-t"] and member.subscribed_topic_regex == ""


@pytest.mark.parametrize("instance", [None, "i1"])
def test_classic_leave_group_removes_consumer_protocol_members(broker, instance):
    b = broker.bootstrap
    group = f"wire-leave-{instance}"
    assert join(b, group, "m1", instance_id=instance).error_code == 0
    assert join(b, group, "m2").error_code == 0
    leave = wire.call(b, LeaveGroupRequest(group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id="m1", group_instance_id=instance),
        LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="zz"),
        # checked before m1 is removed: the instance still belongs to m1
        LeaveGroupRequest.MemberIdentity(member_id="m9", group_instance_id=instance)]), 5)
    assert leave.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in leave.members] == [
        ("m1", instance, 0), ("", "zz", UNKNOWN_MEMBER_ID),
        ("m9", instance, UNKNOWN_MEMBER_ID if instance is None else FENCED_INSTANCE_ID)]
    gone = heartbeat(b, group, "m1", 1)
    assert (gone.error_code, gone.error_message) == (UNKNOWN_MEMBER_ID, f"Member m1 is not a member of group {group}.")
