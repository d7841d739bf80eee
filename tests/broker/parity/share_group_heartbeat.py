"""ShareGroupHeartbeat's request checks side by side with Apache Kafka 4.3.1 (KIP-932): a member id
that is empty or longer than 36 characters (KafkaApis.isMemberIdValid: INVALID_REQUEST without a
message), then GroupCoordinatorService's checks with their texts (an empty group id is
INVALID_REQUEST, not INVALID_GROUP_ID), a rejoin to a group that does not exist,
ShareGroupDescribe of a missing group (no state), ShareFetch / ShareAcknowledge refusals (no
message, no lock timeout), and AlterShareGroupOffsets / DeleteShareGroupOffsets of an empty group
id (INVALID_GROUP_ID with Errors' text). The members' epochs are left out: Kafka 4.3's
asynchronous assignment gives a first join epoch 2 where kcompat gives 1."""

from __future__ import annotations

from kcompat.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest as ASO
from kcompat.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest as DSO
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kcompat.protocol.messages.share_fetch import ShareFetchRequest
from kcompat.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest as SH
from kcompat.testing import wire
from tests.broker.parity import until

GROUP = "share-checks"
REQUESTS = [
    dict(group_id="", member_id="m", member_epoch=0, subscribed_topic_names=["t"]),
    dict(group_id=GROUP, member_id="", member_epoch=0, subscribed_topic_names=["t"]),
    dict(group_id=GROUP, member_id="m" * 37, member_epoch=0, subscribed_topic_names=["t"]),
    dict(group_id=GROUP, member_id="m", member_epoch=0, subscribed_topic_names=None),
    dict(group_id=GROUP, member_id="m", member_epoch=0, subscribed_topic_names=[]),
    dict(group_id=GROUP, member_id="m", member_epoch=-3, subscribed_topic_names=["t"]),
    dict(group_id=GROUP, member_id="m", member_epoch=0, subscribed_topic_names=["t"], rack_id=""),
    dict(group_id=GROUP, member_id="m", member_epoch=5, subscribed_topic_names=["t"]),
]


def scenario(bootstrap: str) -> dict:
    until(lambda: wire.call(bootstrap, FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]), 4)
          .coordinators[0], "a group coordinator", ok=lambda c: c.error_code == 0, interval_s=0.2)
    heartbeats = []
    for kw in REQUESTS:
        r = wire.call(bootstrap, SH(**{"rack_id": None, **kw}), 1)
        heartbeats.append((r.error_code, r.error_message))
    d = wire.call(bootstrap, ShareGroupDescribeRequest(group_ids=["missing-share"], include_authorized_operations=False), 1)
    return {"heartbeats": heartbeats,
            "describe missing": [(g.group_id, g.error_code, g.error_message, g.group_state) for g in d.groups],
            "fetch and acknowledge": _sessions(bootstrap), "offsets of an empty group id": _offsets(bootstrap)}


def _offsets(bootstrap: str) -> list[tuple]:
    alter = wire.call(bootstrap, ASO(group_id="", topics=[ASO.AlterShareGroupOffsetsRequestTopic(
        topic_name="t", partitions=[ASO.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]), 0)
    delete = wire.call(bootstrap, DSO(group_id="", topics=[DSO.DeleteShareGroupOffsetsRequestTopic(topic_name="t")]), 0)
    return [(alter.error_code, alter.error_message, alter.responses), (delete.error_code, delete.error_message,
                                                                       delete.responses)]


def _sessions(bootstrap: str) -> list[tuple]:
    """ShareFetch and ShareAcknowledge without a session, and with group and member ids Kafka
    refuses (a null group id, an empty or 37-character member id; an empty group id is taken):
    (group, member id length, epoch, then error code, message and lock timeout of each)."""
    out = []
    for group, member, epoch in ((None, "m", 0), ("", "m", 0), ("g", "", 0), ("g", "m" * 37, 0), ("g", "m", 1),
                                 ("g", "m", -1), ("g2", "m", 0)):
        f = wire.call(bootstrap, ShareFetchRequest(
            group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0,
            min_bytes=1, max_bytes=1000, max_records=10, batch_size=10, topics=[], forgotten_topics_data=[]), 1)
        a = wire.call(bootstrap, ShareAcknowledgeRequest(group_id=group, member_id=member,
                                                         share_session_epoch=epoch, topics=[]), 1)
        out.append((group, len(member), epoch, f.error_code, f.error_message, f.acquisition_lock_timeout_ms,
                    a.error_code, a.error_message, a.acquisition_lock_timeout_ms))
    return out


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs["heartbeats"][0] == (42, "GroupId can't be empty.")
    assert theirs["heartbeats"][1:3] == [(42, None), (42, None)]
    assert theirs["offsets of an empty group id"] == [(24, "The group id is invalid.", [])] * 2
    assert theirs["describe missing"] == [("missing-share", 69, "Group missing-share not found.", "")]
    assert theirs["fetch and acknowledge"][0][3:] == (42, None, 0, 42, None, 0)      # null group id
    assert theirs["fetch and acknowledge"][1][3:6] == (0, None, 30000)              # "" is a group id
    assert ours == theirs
