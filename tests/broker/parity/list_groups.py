"""ListGroups side by side with Apache Kafka 4.3.1: groups of every type (KIP-1043) and how its
filters pick them. Four groups: a classic group with a member (JoinGroup, SyncGroup: Stable,
protocol type ``consumer``), a classic group that only committed offsets (Empty, no protocol type),
a KIP-848 consumer group and a KIP-932 share group (one member each, heartbeated until Stable).
Then ListGroups at v5 with no filter, each type filter (spelled in other cases too, and an unknown
type), state filters in other cases, both together, and at v4 and v2, which have no type filter
(v2 no state filter either). Only this scenario's groups are compared, sorted by group id (the
order of the answer is not part of the contract)."""

from __future__ import annotations

import time

from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as HB
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.join_group import JoinGroupRequest as J
from kcompat.protocol.messages.list_groups import ListGroupsRequest as L
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest as OC
from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest as SH
from kcompat.protocol.messages.sync_group import SyncGroupRequest as S
from kcompat.testing import admin, wire
from tests.broker.parity import COORDINATOR_RETRIABLE, until

PREFIX = "lg-"
TOPIC = "lg-t"
CLASSIC, COMMITTED, CONSUMER, SHARE = "lg-classic", "lg-committed", "lg-consumer", "lg-share"
MEMBER_ID_REQUIRED = 79
QUERIES = [   # (name, version, states filter, types filter)
    ("v5 all", 5, [], []),
    ("v5 classic", 5, [], ["classic"]),
    ("v5 Consumer", 5, [], ["Consumer"]),
    ("v5 SHARE", 5, [], ["SHARE"]),
    ("v5 streams", 5, [], ["streams"]),
    ("v5 unknown type", 5, [], ["bogus"]),
    ("v5 classic and share", 5, [], ["classic", "share"]),
    ("v5 stable", 5, ["stable"], []),
    ("v5 EMPTY", 5, ["EMPTY"], []),
    ("v5 Stable consumer", 5, ["Stable"], ["consumer"]),
    ("v4 Stable", 4, ["Stable"], None),
    ("v4 all", 4, [], None),
    ("v2 all", 2, None, None),
]


def _listed(bootstrap: str, version: int, states, types) -> list[tuple]:
    kw = {}
    if version >= 4:
        kw["states_filter"] = states
    if version >= 5:
        kw["types_filter"] = types
    r = wire.call(bootstrap, L(**kw), version)
    assert r.error_code == 0, r
    return sorted((g.group_id, g.protocol_type, g.group_state if version >= 4 else None,
                   g.group_type if version >= 5 else None) for g in r.groups if g.group_id.startswith(PREFIX))


def _classic(bootstrap: str) -> None:
    protocols = [J.JoinGroupRequestProtocol(name="range", metadata=b"")]
    join = dict(group_id=CLASSIC, session_timeout_ms=30000, rebalance_timeout_ms=30000, group_instance_id=None,
                protocol_type="consumer", protocols=protocols, reason=None)
    r = until(lambda: wire.call(bootstrap, J(member_id="", **join), 5), "JoinGroup")
    assert r.error_code == MEMBER_ID_REQUIRED, r
    r = until(lambda: wire.call(bootstrap, J(member_id=r.member_id, **join), 5), "JoinGroup")
    assert r.error_code == 0, r
    s = wire.call(bootstrap, S(group_id=CLASSIC, generation_id=r.generation_id, member_id=r.member_id,
                               group_instance_id=None, assignments=[
                                   S.SyncGroupRequestAssignment(member_id=r.member_id, assignment=b"")]), 3)
    assert s.error_code == 0, s


def _committed(bootstrap: str) -> None:
    req = OC(group_id=COMMITTED, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
             retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                 OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_metadata="")])])
    r = until(lambda: wire.call(bootstrap, req, 8), "OffsetCommit",
              ok=lambda r: r.topics[0].partitions[0].error_code not in COORDINATOR_RETRIABLE)
    assert r.topics[0].partitions[0].error_code == 0, r


def _stable(bootstrap: str, group: str, heartbeat) -> None:
    """Heartbeat (``heartbeat(epoch) -> response``) until ListGroups shows ``group`` Stable."""
    epoch = 0
    deadline = time.monotonic() + 60
    while True:
        r = heartbeat(epoch)
        assert r.error_code in COORDINATOR_RETRIABLE | {0}, r
        epoch = r.member_epoch if r.error_code == 0 else epoch
        if epoch > 0 and [g for g in _listed(bootstrap, 5, ["Stable"], []) if g[0] == group]:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{group} not Stable")
        time.sleep(0.1)


def scenario(bootstrap: str) -> dict:
    admin.create_topic(bootstrap, TOPIC, 1)
    until(lambda: wire.call(bootstrap, FindCoordinatorRequest(key_type=0, coordinator_keys=[CLASSIC]), 4)
          .coordinators[0], "FindCoordinator")
    _classic(bootstrap)
    _committed(bootstrap)
    _stable(bootstrap, CONSUMER, lambda epoch: wire.call(bootstrap, HB(
        group_id=CONSUMER, member_id="lg-member-1", member_epoch=epoch, rebalance_timeout_ms=30000,
        subscribed_topic_names=[TOPIC] if epoch == 0 else None, topic_partitions=[] if epoch == 0 else None), 1))
    _stable(bootstrap, SHARE, lambda epoch: wire.call(bootstrap, SH(
        group_id=SHARE, member_id="lg-member-2", member_epoch=epoch, rack_id=None,
        subscribed_topic_names=[TOPIC] if epoch == 0 else None), 1))
    return {name: _listed(bootstrap, version, states, types) for name, version, states, types in QUERIES}


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert [g[0] for g in theirs["v5 all"]] == [CLASSIC, COMMITTED, CONSUMER, SHARE], theirs["v5 all"]
    assert theirs["v5 unknown type"] == [], theirs["v5 unknown type"]
    assert ours == theirs
