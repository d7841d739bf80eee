"""OffsetCommit, OffsetFetch, offset expiry (KIP-211), DeleteGroups, OffsetDelete (KIP-496),
DescribeGroups and ListGroups (KIP-518)."""

from __future__ import annotations

import pytest

from kcompat.group import GroupConfig, GroupState
from kcompat.group.records import parse_key, parse_offset_value, GroupKey, OffsetKey
from kcompat.protocol.errors import ErrorCode
from tests.group.harness import Broker

S = GroupState
G = "g"
DAY = 24 * 3600 * 1000


def live_for(b: Broker, ms: int, member_id: str, gen: int) -> None:
    """Advance ``ms`` with a heartbeat every 20 minutes."""
    end = b.now + ms
    while b.now < end:
        b.advance(min(1_200_000, end - b.now))
        assert b.heartbeat(G, member_id, gen) == 0


def tombstones(b: Broker, since: int = 0):
    return [parse_key(r.key) for r in b.appended[since:] if r.value is None]


# -- OffsetCommit / OffsetFetch ---------------------------------------------------------------

def test_standalone_commit_creates_an_empty_group_and_fetch_returns_metadata_and_epoch():
    b = Broker()
    assert b.commit(G, {("t", 0): 10, ("t", 1): 20}, metadata="hello", leader_epoch=7) == {("t", 0): 0, ("t", 1): 0}
    g = b.group(G)
    assert g.state is S.EMPTY and g.protocol_type is None and g.generation_id == 0
    offsets, err = b.fetch(G, [("t", 0), ("t", 1), ("t", 2), ("u", 0)])
    assert err == 0
    assert offsets == {("t", 0): (10, 7, "hello", 0), ("t", 1): (20, 7, "hello", 0),
                       ("t", 2): (-1, -1, "", 0), ("u", 0): (-1, -1, "", 0)}
    # the records are Kafka's: key v1, value v3 with the commit time
    (_, key, value), (_, _, _) = b.records(b.coord.partition_for(G))
    assert key[:2] == b"\x00\x01" and value[:2] == b"\x00\x03"
    assert parse_offset_value(value).commit_timestamp == b.now


def test_commits_become_visible_through_replay_only():
    b = Broker()
    from kcompat.protocol.messages.offset_commit import OffsetCommitRequest as R
    req = R(group_id=G, topics=[R.OffsetCommitRequestTopic(name="t", partitions=[
        R.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])
    result = b.coord.offset_commit("tok", req, 8, b.now)
    assert len(result.records) == 1 and result.replies[0][1].topics[0].partitions[0].error_code == 0
    assert b.group(G).offsets == {}  # not yet appended
    b.coord.replay(result.records[0])
    assert b.group(G).offsets[("t", 0)].offset == 5


@pytest.mark.parametrize("version", range(0, 10))
def test_commit_and_fetch_every_version(version):
    b = Broker()
    fetch_version = min(version, 9)
    assert b.commit(G, {("t", 3): 33}, version=version, metadata="m", leader_epoch=4) == {("t", 3): 0}
    offsets, err = b.fetch(G, [("t", 3)], version=fetch_version)
    expected_epoch = 4 if version >= 6 and fetch_version >= 5 else -1
    assert offsets == {("t", 3): (33, expected_epoch, "m", 0)} and err == 0


def test_null_metadata_is_stored_as_empty_string():
    b = Broker()
    b.commit(G, {("t", 0): 1}, metadata=None)
    assert b.fetch(G, [("t", 0)])[0][("t", 0)][2] == ""


def test_fetch_all_offsets_and_several_groups_v8():
    b = Broker()
    b.commit("a", {("t", 0): 1, ("u", 2): 3})
    b.commit("b", {("t", 5): 9})
    assert b.fetch("a", None, version=2)[0] == {("t", 0): (1, -1, "", 0), ("u", 2): (3, -1, "", 0)}
    assert b.fetch("nobody", None)[0] == {}
    from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest as R
    req = R(groups=[R.OffsetFetchRequestGroup(group_id="a", topics=None),
                    R.OffsetFetchRequestGroup(group_id="b", topics=[
                        R.OffsetFetchRequestTopics(name="t", partition_indexes=[5, 4])]),
                    R.OffsetFetchRequestGroup(group_id="", topics=None)],
            require_stable=True)
    resp = b.reply(b.call("offset_fetch", req, 8))
    assert [g.group_id for g in resp.groups] == ["a", "b", ""]
    assert {(t.name, p.partition_index): p.committed_offset for t in resp.groups[0].topics for p in t.partitions} == {
        ("t", 0): 1, ("u", 2): 3}
    assert [(p.partition_index, p.committed_offset) for p in resp.groups[1].topics[0].partitions] == [(5, 9), (4, -1)]
    assert resp.groups[2].error_code == 0  # the empty group id is allowed for OffsetFetch


def test_fetch_errors_by_version():
    b = Broker(own=False)
    for p in range(4):
        if p != b.coord.partition_for(G):
            b.coord.load(p, [], b.now)
    offsets, err = b.fetch(G, [("t", 0)], version=1)
    assert err == 0 and offsets == {("t", 0): (-1, -1, "", ErrorCode.NOT_COORDINATOR)}  # no top-level error before v2
    offsets, err = b.fetch(G, [("t", 0)], version=2)
    assert err == ErrorCode.NOT_COORDINATOR and offsets == {}
    offsets, err = b.fetch(G, None, version=8)
    assert err == ErrorCode.NOT_COORDINATOR


def test_commit_fencing_by_generation_and_member():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    tp = {("t", 0): 5}
    assert b.commit(G, tp, generation=gen, member_id=leader) == {("t", 0): 0}
    assert b.commit(G, tp, generation=gen - 1, member_id=leader) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert b.commit(G, tp, generation=gen, member_id="ghost") == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # generation -1 without a member id: only for groups without members
    assert b.commit(G, tp) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # no group: a generation >= 0 is stale (v9+: GROUP_ID_NOT_FOUND)
    assert b.commit("other", tp, generation=3, member_id="m", version=8) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert b.commit("other", tp, generation=3, member_id="m", version=9) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    # a new generation fences commits of the old one
    lt = b.join(G, leader)
    assert b.commit(G, tp, generation=gen, member_id=follower) == {("t", 0): 0}  # PreparingRebalance: allowed
    b.join(G, follower)
    b.reply(lt)
    assert b.group(G).state is S.COMPLETING_REBALANCE
    assert b.commit(G, tp, generation=gen + 1, member_id=follower) == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
    assert b.commit(G, tp, generation=gen, member_id=follower) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}


def test_metadata_too_large_is_per_partition_and_counts_utf16_units():
    b = Broker(GroupConfig(num_partitions=4, offset_metadata_max_bytes=4))
    assert b.commit(G, {("t", 0): 1}, metadata="abcd") == {("t", 0): 0}
    assert b.commit(G, {("t", 0): 2}, metadata="abcde") == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert b.commit(G, {("t", 0): 3}, metadata="\U0001F600\U0001F600") == {("t", 0): 0}  # 4 UTF-16 units
    assert b.commit(G, {("t", 0): 4}, metadata="a\U0001F600\U0001F600") == {
        ("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert b.fetch(G, [("t", 0)])[0][("t", 0)][0] == 3


def test_unknown_topic_partition():
    b = Broker()
    res = b.commit(G, {("t", 0): 1, ("t", 6): 1, ("nope", 0): 1})
    assert res == {("t", 0): 0, ("t", 6): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert b.commit("only-bad", {("nope", 0): 1}) == {("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert b.group("only-bad") is None  # nothing written, no group


def test_commit_is_a_heartbeat():
    b = Broker()
    (leader, gen), = b.form_group(G, 1, session=10_000)
    for _ in range(4):
        b.advance(9_000)
        assert b.commit(G, {("t", 0): 1}, generation=gen, member_id=leader) == {("t", 0): 0}
    assert leader in b.group(G).members


def test_static_member_commit_checks_the_instance():
    b = Broker()
    t = b.join(G, instance="inst", version=7)
    b.advance(100)
    r = b.reply(t)
    assert b.commit(G, {("t", 0): 1}, generation=r.generation_id, member_id=r.member_id, instance="inst",
                    version=7) == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
    b.sync(G, r.member_id, r.generation_id, {r.member_id: b""}, instance="inst")
    assert b.commit(G, {("t", 0): 1}, generation=r.generation_id, member_id=r.member_id, instance="inst",
                    version=7) == {("t", 0): 0}
    assert b.commit(G, {("t", 0): 1}, generation=r.generation_id, member_id="x", instance="inst",
                    version=7) == {("t", 0): ErrorCode.FENCED_INSTANCE_ID}


def test_retention_time_v2_writes_value_v1_with_expire_timestamp():
    b = Broker()
    assert b.commit(G, {("t", 0): 1}, version=2, retention=60_000) == {("t", 0): 0}
    (_, _, value), = b.records(b.coord.partition_for(G))
    assert value[:2] == b"\x00\x01"
    om = parse_offset_value(value)
    assert om.expire_timestamp == b.now + 60_000 and om.commit_timestamp == b.now
    # the offset expires by its own timestamp, long before offsets.retention.minutes
    b.advance(60_000)
    b.advance(600_000)
    assert b.fetch(G, [("t", 0)])[0][("t", 0)][0] == -1
    assert b.group(G) is None  # nothing left in an offsets-only group: Dead


def test_commit_timestamp_v1_is_honoured():
    b = Broker()
    b.commit(G, {("t", 0): 1}, version=1, commit_timestamp=12345)
    assert b.group(G).offsets[("t", 0)].commit_timestamp == 12345


# -- expiry -----------------------------------------------------------------------------------

def test_offsets_of_a_standalone_group_expire_from_each_commit():
    b = Broker(GroupConfig(num_partitions=4, offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600_000))
    b.commit(G, {("t", 0): 1})
    b.advance(DAY // 2)
    b.commit(G, {("t", 1): 1})
    n = len(b.appended)
    b.advance(DAY // 2 + 600_000)
    assert tombstones(b, n) == [OffsetKey(G, "t", 0)]
    assert set(b.group(G).offsets) == {("t", 1)}
    b.advance(DAY // 2)
    # then the group itself, though it never had a metadata record (Kafka 4.3.1's
    # ClassicGroup.createGroupTombstoneRecords): its commit records would bring it back on a reload
    assert tombstones(b, n) == [OffsetKey(G, "t", 0), OffsetKey(G, "t", 1), GroupKey(G)]
    assert b.group(G) is None


def test_offsets_of_an_empty_consumer_group_expire_from_when_it_became_empty():
    b = Broker(GroupConfig(num_partitions=4, initial_rebalance_delay_ms=100, offsets_retention_ms=DAY,
                           offsets_retention_check_interval_ms=600_000))
    (leader, gen), = b.form_group(G, 1, session=1_800_000)
    b.commit(G, {("t", 0): 1}, generation=gen, member_id=leader)
    live_for(b, 2 * DAY, leader, gen)  # the group lives on for two days: nothing expires
    assert ("t", 0) in b.group(G).offsets
    b.leave(G, leader)
    empty_since = b.now
    assert b.group(G).state is S.EMPTY
    b.advance(DAY - 1)
    assert ("t", 0) in b.group(G).offsets
    n = len(b.appended)
    b.advance(600_000)
    assert b.now - empty_since >= DAY
    assert tombstones(b, n) == [OffsetKey(G, "t", 0), GroupKey(G)]  # then the group itself
    assert b.group(G) is None
    assert b.describe(G)[0].group_state == "Dead"


def test_stable_consumer_group_expires_offsets_of_topics_it_does_not_subscribe_to():
    b = Broker(GroupConfig(num_partitions=4, initial_rebalance_delay_ms=100, offsets_retention_ms=DAY,
                           offsets_retention_check_interval_ms=600_000))
    (leader, gen), = b.form_group(G, 1, topics=("t",), session=1_800_000)
    b.commit(G, {("t", 0): 1, ("u", 0): 1}, generation=gen, member_id=leader)
    live_for(b, DAY + 600_000, leader, gen)
    assert set(b.group(G).offsets) == {("t", 0)}


def test_an_empty_group_without_offsets_becomes_dead_with_a_tombstone():
    b = Broker()
    (leader, gen), = b.form_group(G, 1)
    b.leave(G, leader)
    n = len(b.appended)
    b.advance(600_000)
    assert tombstones(b, n) == [GroupKey(G)] and b.group(G) is None


def test_a_commit_not_yet_replayed_never_expires():
    b = Broker(GroupConfig(num_partitions=4, offsets_retention_ms=1000, offsets_retention_check_interval_ms=1000))
    b.advance(1)
    b.commit(G, {("t", 0): 1})
    from kcompat.protocol.messages.offset_commit import OffsetCommitRequest as R
    req = R(group_id=G, topics=[R.OffsetCommitRequestTopic(name="t", partitions=[
        R.OffsetCommitRequestPartition(partition_index=0, committed_offset=2)])])
    b.now += 900
    b._versions["tok"] = 8
    pending = b.coord.offset_commit("tok", req, 8, b.now)  # written, not yet appended
    assert [r.value is not None for r in pending.records] == [True]
    expiry = b.coord.poll(b.now + 600)  # the first commit is old enough, but the partition has one pending
    assert expiry.records == []
    b.apply(pending)
    assert b.group(G).offsets[("t", 0)].offset == 2
    b.advance(600)
    assert b.group(G).offsets[("t", 0)].offset == 2
    b.advance(1000)
    assert b.group(G) is None


# -- DeleteGroups ---------------------------------------------------------------------------------

def test_delete_groups():
    b = Broker()
    (leader, gen), = b.form_group("live", 1)
    b.commit("offsets-only", {("t", 0): 1, ("t", 1): 2})
    (m, g2), = b.form_group("was-live", 1)
    b.commit("was-live", {("u", 0): 5}, generation=g2, member_id=m)
    b.leave("was-live", m)
    n = len(b.appended)
    res = b.delete_groups("live", "offsets-only", "was-live", "nobody", "offsets-only")
    assert res == {"live": ErrorCode.NON_EMPTY_GROUP, "offsets-only": 0, "was-live": 0,
                   "nobody": ErrorCode.GROUP_ID_NOT_FOUND}
    assert sorted(map(repr, tombstones(b, n))) == sorted(map(repr, [   # a group tombstone each, as Kafka 4.3.1
        OffsetKey("offsets-only", "t", 0), OffsetKey("offsets-only", "t", 1), GroupKey("offsets-only"),
        OffsetKey("was-live", "u", 0), GroupKey("was-live")]))
    assert b.group("offsets-only") is None and b.group("was-live") is None
    assert b.fetch("offsets-only", [("t", 0)])[0][("t", 0)][0] == -1
    assert b.delete_groups("") == {"": ErrorCode.GROUP_ID_NOT_FOUND}


# -- OffsetDelete ---------------------------------------------------------------------------------

def test_offset_delete():
    b = Broker()
    (leader, gen), = b.form_group(G, 1, topics=("t",))
    b.commit(G, {("t", 0): 1, ("u", 0): 2, ("u", 1): 3}, generation=gen, member_id=leader)
    err, parts = b.offset_delete(G, [("t", 0), ("u", 0), ("nope", 0)])
    assert err == 0
    assert parts == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0,
                     ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert set(b.group(G).offsets) == {("t", 0), ("u", 1)}
    assert b.offset_delete("nobody", [("t", 0)]) == (ErrorCode.GROUP_ID_NOT_FOUND, {})
    assert b.offset_delete("", [("t", 0)]) == (ErrorCode.INVALID_GROUP_ID, {})
    # an Empty group: every offset may go; the group stays, Empty and without offsets, until the
    # periodic cleanup (Kafka 4.3.1's deleteOffsets writes only the offsets' tombstones)
    b.leave(G, leader)
    err, parts = b.offset_delete(G, [("t", 0), ("u", 1)])
    assert err == 0 and parts == {("t", 0): 0, ("u", 1): 0}
    assert b.group(G).is_(GroupState.EMPTY) and not b.group(G).offsets
    assert tombstones(b)[-2:] == [OffsetKey(G, "t", 0), OffsetKey(G, "u", 1)]
    b.advance(600_000)   # offsets.retention.check.interval.ms
    assert b.group(G) is None and tombstones(b)[-1] == GroupKey(G)


def test_offset_delete_for_a_non_consumer_group_with_members():
    b = Broker()
    t = b.join("connect", version=3, protocol_type="connect", protocols=[("default", b"x")])
    b.advance(100)
    r = b.reply(t)
    b.sync("connect", r.member_id, r.generation_id, {r.member_id: b""}, protocol_type="connect")
    assert b.offset_delete("connect", [("t", 0)]) == (ErrorCode.NON_EMPTY_GROUP, {})


def test_deleted_topic_partitions_lose_their_offsets():
    b = Broker()
    b.commit("a", {("t", 0): 1, ("t", 1): 1})
    b.commit("b", {("t", 0): 1})
    b.apply(b.coord.on_partitions_deleted([("t", 0)], b.now))
    assert set(b.group("a").offsets) == {("t", 1)}
    assert not b.group("b").offsets   # stays until the periodic cleanup, as on Kafka 4.3.1
    b.advance(600_000)
    assert b.group("b") is None and b.group("a") is not None


# -- DescribeGroups / ListGroups --------------------------------------------------------------------

def test_describe_groups():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    b.commit("simple", {("t", 0): 1})
    stable, simple, dead = b.describe(G, "simple", "nobody", ops=True)
    assert (stable.group_state, stable.protocol_type, stable.protocol_data) == ("Stable", "consumer", "range")
    assert [m.member_id for m in stable.members] == [leader, follower]
    assert all(m.member_metadata and m.member_assignment and m.client_host == "/127.0.0.1" for m in stable.members)
    assert stable.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert (simple.group_state, simple.protocol_type, simple.members) == ("Empty", "", [])
    assert (dead.error_code, dead.group_state) == (0, "Dead")
    # not Stable: members without metadata or assignment, no protocol
    b.join(G, leader)
    rebalancing, = b.describe(G, version=2)
    assert rebalancing.group_state == "PreparingRebalance" and rebalancing.protocol_data == ""
    assert all(m.member_metadata == b"" and m.member_assignment == b"" for m in rebalancing.members)
    assert rebalancing.authorized_operations == -2**31


def test_list_groups_with_state_and_type_filters():
    b = Broker()
    b.form_group("stable", 1)
    b.commit("simple", {("t", 0): 1})
    b.join("joining", version=3)
    everything = {(g.group_id, g.group_state, g.protocol_type, g.group_type) for g in b.list_groups().groups}
    assert everything == {("stable", "Stable", "consumer", "classic"), ("simple", "Empty", "", "classic"),
                          ("joining", "PreparingRebalance", "consumer", "classic")}
    assert {g.group_id for g in b.list_groups(states=["Stable", "empty"]).groups} == {"stable", "simple"}
    assert b.list_groups(states=["Dead"]).groups == []
    assert len(b.list_groups(types=["Classic"]).groups) == 3
    assert b.list_groups(types=["consumer"]).groups == []
    assert len(b.list_groups(states=["Stable"], version=3).groups) == 3  # no filter before v4
    assert len(b.list_groups(types=["consumer"], version=4).groups) == 3  # no type filter before v5


def test_list_groups_while_loading_reports_it():
    b = Broker()
    b.commit("simple", {("t", 0): 1})
    other = next(p for p in range(4) if p != b.coord.partition_for("simple"))
    b.apply(b.coord.unload(other))
    b.coord.begin_loading(other)
    resp = b.list_groups()
    assert resp.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and [g.group_id for g in resp.groups] == ["simple"]
