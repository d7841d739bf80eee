"""Transactional offset commits (TxnOffsetCommit, KIP-98 / KIP-447): pending until the COMMIT or
ABORT marker of their transaction, UNSTABLE_OFFSET_COMMIT for require_stable fetches, Kafka's
record-offset rule between transactional and plain commits, loading from a log with
transactional batches and markers, generation fencing (v3+), expiry and deletion."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcompat.group import GroupConfig, GroupState, Record, TxnMarker
from kcompat.group.records import GroupKey, OffsetKey, parse_key, parse_offset_value
from kcompat.protocol.errors import ErrorCode
from tests.group.harness import FAST, Broker
from tests.group.test_load import reload

S = GroupState
E = ErrorCode
G = "g"
P1, P2, P3 = 1000, 2000, 3000
T0, T1, T2, U0 = ("t", 0), ("t", 1), ("t", 2), ("u", 0)
DAY = 24 * 3600 * 1000


def visible(b: Broker, group: str, tps, **kw) -> dict:
    """What OffsetFetch answers: {(topic, partition): offset or the error if not NONE}."""
    offsets, err = b.fetch(group, None if tps is None else list(tps), **kw)
    assert err == 0
    return {tp: (o if e == 0 else E(e)) for tp, (o, _, _, e) in offsets.items()}


def pending(b: Broker, group: str) -> dict:
    g = b.group(group)
    if g is None:
        return {}
    return {pid: {tp: om.offset for tp, (_, om) in offs.items()} for pid, offs in g.pending_txn.items()}


def offsets_state(coord) -> dict:
    """Committed offsets with their record positions and pending transactional offsets, per group."""
    out = {}
    for gid, g in coord._groups.items():
        if g.offsets or g.pending_txn:
            out[gid] = (dict(g.offsets), {tp: g.offset_positions.get(tp) for tp in g.offsets},
                        {pid: dict(p) for pid, p in g.pending_txn.items() if p})
    return out


def assert_reload_matches(b: Broker, config: GroupConfig = FAST) -> Broker:
    fresh = reload(b, config)
    assert offsets_state(fresh.coord) == offsets_state(b.coord)
    return fresh


# -- pending until the marker -----------------------------------------------------------------

def test_txn_offsets_are_invisible_until_the_commit_marker():
    b = Broker()
    p = b.coord.partition_for(G)
    assert b.commit(G, {T0: 5}) == {T0: 0}
    before = len(b.appended)
    assert b.txn_commit(G, {T0: 10, T1: 20}, producer_id=P1, producer_epoch=3, metadata="m",
                        leader_epoch=4) == {T0: 0, T1: 0}
    # offset commit records in a transactional batch of the producer
    written = b.appended[before:]
    assert [(r.producer_id, r.producer_epoch) for r in written] == [(P1, 3), (P1, 3)]
    assert [parse_key(r.key) for r in written] == [OffsetKey(G, "t", 0), OffsetKey(G, "t", 1)]
    assert parse_offset_value(written[0].value).offset == 10
    assert [e[3] for e in b.records(p)[-2:]] == [P1, P1]
    assert visible(b, G, [T0, T1]) == {T0: 5, T1: -1}
    assert pending(b, G) == {P1: {T0: 10, T1: 20}}
    result = b.marker(p, P1, commit=True)
    assert result.records == []  # the marker in the log is the record
    offsets, _ = b.fetch(G, [T0, T1])
    assert offsets == {T0: (10, 4, "m", 0), T1: (20, 4, "m", 0)}
    assert pending(b, G) == {}
    assert b.group(G).offsets[T0].commit_timestamp == b.now
    assert_reload_matches(b)


def test_abort_drops_txn_offsets():
    b = Broker()
    p = b.coord.partition_for(G)
    b.commit(G, {T0: 5})
    b.txn_commit(G, {T0: 10, T1: 20}, producer_id=P1)
    b.marker(p, P1, commit=False)
    assert visible(b, G, [T0, T1]) == {T0: 5, T1: -1}
    assert pending(b, G) == {}
    # a group that only had the aborted offsets is gone, live and after a reload
    solo = "solo"
    b.txn_commit(solo, {T0: 1}, producer_id=P2)
    assert b.group(solo) is not None and b.group(solo).state is S.EMPTY
    b.marker(b.coord.partition_for(solo), P2, commit=False)
    assert b.group(solo) is None
    fresh = assert_reload_matches(b)
    assert fresh.group(solo) is None


def test_markers_end_only_their_producer_in_their_partition():
    b = Broker()
    p = b.coord.partition_for(G)
    other = (p + 1) % FAST.num_partitions
    b.txn_commit(G, {T0: 10}, producer_id=P1)
    b.txn_commit(G, {T1: 11}, producer_id=P2)
    b.marker(p, P2, commit=False)
    assert pending(b, G) == {P1: {T0: 10}}
    b.marker(other, P1, commit=True)  # another __consumer_offsets partition of the transaction
    assert pending(b, G) == {P1: {T0: 10}}
    b.marker(p, P3, commit=True)  # a producer with nothing here
    assert visible(b, G, [T0, T1]) == {T0: -1, T1: -1}
    b.marker(p, P1, commit=True)
    assert visible(b, G, [T0, T1]) == {T0: 10, T1: -1}
    b.marker(p, P1, commit=True)  # a marker sent again changes nothing
    assert visible(b, G, [T0, T1]) == {T0: 10, T1: -1}
    assert_reload_matches(b)


def test_a_transaction_commits_offsets_of_several_groups_in_its_partition():
    b = Broker()
    groups = ["g", "h", "k", "x"]
    p = b.coord.partition_for("g")
    same = [g for g in groups if b.coord.partition_for(g) == p] or ["g"]
    for g in same:
        b.txn_commit(g, {T0: 7}, producer_id=P1)
    b.marker(p, P1, commit=True)
    for g in same:
        assert visible(b, g, [T0]) == {T0: 7}


# -- OffsetFetch require_stable (KIP-447) ------------------------------------------------------

@pytest.mark.parametrize("version", [7, 8, 9])
def test_require_stable_answers_unstable_offset_commit(version):
    b = Broker()
    p = b.coord.partition_for(G)
    b.commit(G, {T0: 5, T1: 7})
    b.txn_commit(G, {T0: 10, T2: 12}, producer_id=P1)
    unstable = E.UNSTABLE_OFFSET_COMMIT
    assert visible(b, G, [T0, T1, T2, U0], version=version, require_stable=True) == {
        T0: unstable, T1: 7, T2: unstable, U0: -1}
    offsets, _ = b.fetch(G, [T0], version=version, require_stable=True)
    assert offsets[T0] == (-1, -1, "", unstable)
    # without require_stable: the last committed offset
    assert visible(b, G, [T0, T1, T2], version=version) == {T0: 5, T1: 7, T2: -1}
    # every committed offset of the group (no partitions asked): those with a transaction pending
    # are unstable, partitions with only a pending offset are not listed
    assert visible(b, G, None, version=version, require_stable=True) == {T0: unstable, T1: 7}
    assert visible(b, G, None, version=version) == {T0: 5, T1: 7}
    b.marker(p, P1, commit=True)
    assert visible(b, G, [T0, T1, T2], version=version, require_stable=True) == {T0: 10, T1: 7, T2: 12}


@pytest.mark.parametrize("version", [1, 2, 6])
def test_fetch_before_v7_has_no_require_stable(version):
    b = Broker()
    b.commit(G, {T0: 5})
    b.txn_commit(G, {T0: 10}, producer_id=P1)
    assert visible(b, G, [T0], version=version) == {T0: 5}


# -- ordering between transactional and plain commits ------------------------------------------

def test_a_later_plain_commit_wins_over_an_earlier_transactional_one():
    b = Broker()
    p = b.coord.partition_for(G)
    b.txn_commit(G, {T0: 10}, producer_id=P1)
    b.commit(G, {T0: 20})  # written after the transactional record
    assert visible(b, G, [T0]) == {T0: 20}
    b.marker(p, P1, commit=True)
    assert visible(b, G, [T0]) == {T0: 20}
    assert_reload_matches(b)


def test_a_transactional_commit_wins_over_an_earlier_plain_one():
    b = Broker()
    p = b.coord.partition_for(G)
    b.commit(G, {T0: 20})
    b.txn_commit(G, {T0: 10}, producer_id=P1)
    b.marker(p, P1, commit=True)
    assert visible(b, G, [T0]) == {T0: 10}
    assert_reload_matches(b)


def test_two_producers_the_later_record_wins_whatever_the_commit_order():
    b = Broker()
    p = b.coord.partition_for(G)
    b.txn_commit(G, {T0: 30, T1: 31}, producer_id=P1)
    b.txn_commit(G, {T0: 40}, producer_id=P2)
    b.marker(p, P2, commit=True)
    assert visible(b, G, [T0, T1]) == {T0: 40, T1: -1}
    b.marker(p, P1, commit=True)  # its T0 record is older than P2's
    assert visible(b, G, [T0, T1]) == {T0: 40, T1: 31}
    assert_reload_matches(b)


def test_a_producer_committing_the_same_partition_twice_keeps_the_last():
    b = Broker()
    p = b.coord.partition_for(G)
    b.txn_commit(G, {T0: 1}, producer_id=P1)
    b.txn_commit(G, {T0: 2}, producer_id=P1)
    assert pending(b, G) == {P1: {T0: 2}}
    b.marker(p, P1, commit=True)
    assert visible(b, G, [T0]) == {T0: 2}
    assert_reload_matches(b)


# -- loading -----------------------------------------------------------------------------------

def test_load_from_a_log_with_transactional_batches_and_markers():
    b = Broker()
    (m, gen), = b.form_group(G, 1)
    p = b.coord.partition_for(G)
    b.commit(G, {T0: 1, T1: 1}, generation=gen, member_id=m)
    b.txn_commit(G, {T0: 10, T1: 10}, producer_id=P1, generation=gen, member_id=m)  # committed
    b.txn_commit(G, {T0: 20, T2: 20}, producer_id=P2, generation=gen, member_id=m)  # aborted
    b.txn_commit(G, {T1: 30, U0: 30}, producer_id=P3, generation=gen, member_id=m)  # no marker yet
    b.commit(G, {T2: 2}, generation=gen, member_id=m)
    b.marker(p, P2, commit=False)
    b.marker(p, P1, commit=True)
    # a group that only has a transaction pending, and one whose offsets were all aborted
    b.txn_commit("only-pending", {T0: 3}, producer_id=P3)
    b.txn_commit("aborted", {T0: 4}, producer_id=P2, producer_epoch=1)
    b.marker(b.coord.partition_for("aborted"), P2, commit=False)
    assert visible(b, G, [T0, T1, T2, U0]) == {T0: 10, T1: 10, T2: 2, U0: -1}
    kinds = ["marker" if isinstance(e, TxnMarker) else len(e) for e in b.records(p)]
    assert kinds.count("marker") >= 2 and kinds.count(4) >= 6
    fresh = assert_reload_matches(b)
    assert fresh.group(G).state is S.STABLE and fresh.group(G).members.keys() == {m}
    assert visible(fresh, G, [T0, T1, T2, U0]) == {T0: 10, T1: 10, T2: 2, U0: -1}
    assert visible(fresh, G, [T1, U0], require_stable=True) == {T1: E.UNSTABLE_OFFSET_COMMIT,
                                                                 U0: E.UNSTABLE_OFFSET_COMMIT}
    assert pending(fresh, "only-pending") == {P3: {T0: 3}} and fresh.group("only-pending").state is S.EMPTY
    assert fresh.group("aborted") is None
    # the transaction coordinator sends the missing marker again after the reload
    for broker in (b, fresh):
        for part in {p, broker.coord.partition_for("only-pending")}:
            broker.marker(part, P3, commit=True)
        assert visible(broker, G, [T0, T1, T2, U0], require_stable=True) == {T0: 10, T1: 30, T2: 2, U0: 30}
        assert visible(broker, "only-pending", [T0]) == {T0: 3}
    assert offsets_state(fresh.coord) == offsets_state(b.coord)


def test_load_a_plain_commit_after_the_transactional_record_wins_over_its_commit():
    b = Broker()
    p = b.coord.partition_for(G)
    b.txn_commit(G, {T0: 10}, producer_id=P1)
    b.commit(G, {T0: 20})
    b.marker(p, P1, commit=True)
    b.commit(G, {T1: 1})
    b.txn_commit(G, {T1: 5}, producer_id=P2)
    b.marker(p, P2, commit=True)
    fresh = assert_reload_matches(b)
    assert visible(fresh, G, [T0, T1]) == {T0: 20, T1: 5}


def test_marker_while_the_partition_is_loading():
    b = Broker()
    p = b.coord.partition_for(G)
    b.commit(G, {T0: 5})
    b.txn_commit(G, {T0: 10, T1: 11}, producer_id=P1)
    b.txn_commit(G, {T2: 12}, producer_id=P2)
    entries = b.records(p)
    b.marker(p, P1, commit=True)
    b.marker(p, P2, commit=False)
    # the loader read the records before the markers came; the markers arrive while it loads
    fresh = Broker(FAST, b.topics, own=False, now=b.now)
    fresh.coord.begin_loading(p)
    fresh.apply(fresh.coord.complete_txn(p, P1, True, fresh.now))  # too early: nothing pending yet
    fresh.coord.load(p, entries, fresh.now)
    assert pending(fresh, G) == {P1: {T0: 10, T1: 11}, P2: {T2: 12}}  # the loader never saw them
    # now they arrive during a load that has read the transactional records
    fresh = Broker(FAST, b.topics, own=False, now=b.now)
    fresh.coord.begin_loading(p)
    for offset, key, value, *producer in entries:
        fresh.coord.replay(Record(p, key, value, producer[0] if producer else -1, 0, offset))
    fresh.apply(fresh.coord.complete_txn(p, P1, True, fresh.now))
    fresh.apply(fresh.coord.complete_txn(p, P2, False, fresh.now))
    fresh.coord.load(p, [], fresh.now)
    assert visible(fresh, G, [T0, T1, T2]) == {T0: 10, T1: 11, T2: -1}
    assert offsets_state(fresh.coord) == offsets_state(b.coord)
    # and a load that reads records and markers after they were applied live is idempotent
    fresh = Broker(FAST, b.topics, own=False, now=b.now)
    fresh.coord.begin_loading(p)
    fresh.apply(fresh.coord.complete_txn(p, P1, True, fresh.now))
    fresh.coord.load(p, b.records(p), fresh.now)
    assert offsets_state(fresh.coord) == offsets_state(b.coord)


# -- validation --------------------------------------------------------------------------------

def test_generation_member_and_instance_fencing_from_v3():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    assert b.txn_commit(G, {T0: 1}, generation=gen, member_id=follower) == {T0: 0}
    assert b.txn_commit(G, {T0: 1}, generation=gen - 1, member_id=follower) == {T0: E.ILLEGAL_GENERATION}
    assert b.txn_commit(G, {T0: 1}, generation=gen + 1, member_id=leader) == {T0: E.ILLEGAL_GENERATION}
    assert b.txn_commit(G, {T0: 1}, generation=gen, member_id="ghost") == {T0: E.UNKNOWN_MEMBER_ID}
    assert b.txn_commit(G, {T0: 1}, generation=gen, member_id=leader, instance="nobody") == {
        T0: E.UNKNOWN_MEMBER_ID}
    # no group metadata given (a v3 producer without send_offsets' group metadata): accepted,
    # even though the group has members (transactional commits do not require one)
    assert b.txn_commit(G, {T0: 2}) == {T0: 0}
    assert b.txn_commit(G, {T0: 2}, member_id=leader) == {T0: E.ILLEGAL_GENERATION}
    # before v3 the request has no group metadata: nothing to fence on
    for version in (0, 1, 2):
        assert b.txn_commit(G, {T0: 3}, version=version, generation=gen - 1, member_id="ghost") == {T0: 0}
    # a group that does not exist: only a commit without a generation creates it
    assert b.txn_commit("new", {T0: 1}, generation=1, member_id="m") == {T0: E.ILLEGAL_GENERATION}
    assert b.group("new") is None
    assert b.txn_commit("new", {T0: 1}) == {T0: 0}
    assert b.group("new").state is S.EMPTY


def test_static_member_fencing():
    b = Broker()
    tok = b.join(G, instance="inst-1", version=5)
    for _ in range(10):
        b.advance(100)
    r = b.reply(tok)
    assert r is not None and r.error_code == 0
    member, gen = r.member_id, r.generation_id
    assert b.reply(b.sync(G, member, gen, {member: b""}, instance="inst-1")).error_code == 0
    assert b.txn_commit(G, {T0: 1}, generation=gen, member_id=member, instance="inst-1") == {T0: 0}
    # the instance restarted with a new member id: the old one is fenced
    r2 = b.reply(b.join(G, instance="inst-1", version=5))
    assert r2.error_code == 0 and r2.member_id != member
    assert b.txn_commit(G, {T0: 1}, generation=gen, member_id=member, instance="inst-1") == {
        T0: E.FENCED_INSTANCE_ID}
    assert b.txn_commit(G, {T0: 1}, generation=gen, member_id=r2.member_id, instance="inst-1") == {T0: 0}


def test_transactional_commits_are_accepted_while_completing_a_rebalance():
    b = Broker()
    ids, tokens = zip(*(b.join_new(G, client_id=f"c{i}") for i in range(2)))
    for _ in range(10):
        b.advance(100)
    resps = [b.reply(t) for t in tokens]
    gen = resps[0].generation_id
    assert b.group(G).state is S.COMPLETING_REBALANCE
    assert b.commit(G, {T0: 1}, generation=gen, member_id=ids[0]) == {T0: E.REBALANCE_IN_PROGRESS}
    assert b.txn_commit(G, {T0: 1}, generation=gen, member_id=ids[0]) == {T0: 0}


def test_coordinator_and_request_errors():
    b = Broker(own=False)
    assert b.txn_commit(G, {T0: 1}) == {T0: E.NOT_COORDINATOR}
    b.coord.begin_loading(b.coord.partition_for(G))
    assert b.txn_commit(G, {T0: 1}) == {T0: E.COORDINATOR_LOAD_IN_PROGRESS}
    b = Broker()
    assert b.txn_commit("", {T0: 1}) == {T0: E.INVALID_GROUP_ID}
    assert b.txn_commit(G, {T0: 1, ("nope", 0): 1, ("t", 99): 1}) == {
        T0: 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 99): E.UNKNOWN_TOPIC_OR_PARTITION}
    before = len(b.appended)
    assert b.txn_commit("unknown-only", {("nope", 0): 1}) == {("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert b.group("unknown-only") is None and len(b.appended) == before
    # metadata too large: that partition only, and nothing written for it
    b2 = Broker(GroupConfig(initial_rebalance_delay_ms=100, num_partitions=4, offset_metadata_max_bytes=5))
    assert b2.txn_commit(G, {T0: 1}, metadata="123456") == {T0: E.OFFSET_METADATA_TOO_LARGE}
    assert b2.group(G) is None and b2.appended == []
    assert b2.txn_commit(G, {T0: 1}, metadata="12345") == {T0: 0}
    assert b2.coord.shutdown().records == []
    assert b2.txn_commit(G, {T0: 1}) == {T0: E.COORDINATOR_NOT_AVAILABLE}


def test_transaction_verification():
    calls = []
    answer = {"code": 0}

    def verifier(tid, pid, epoch, partition):
        calls.append((tid, pid, epoch, partition))
        return answer["code"]

    b = Broker(txn_verifier=verifier)
    p = b.coord.partition_for(G)
    assert b.txn_commit(G, {T0: 1}, producer_id=P1, producer_epoch=2, transactional_id="tx") == {T0: 0}
    assert calls == [("tx", P1, 2, p)]
    for code, expected in [(E.INVALID_TXN_STATE, E.INVALID_TXN_STATE),
                           (E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH),
                           (E.INVALID_PRODUCER_ID_MAPPING, E.INVALID_PRODUCER_ID_MAPPING),
                           (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),  # retriable: coordinator busy
                           (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)]:
        answer["code"] = int(code)
        before = len(b.appended)
        assert b.txn_commit(G, {T0: 2, ("nope", 0): 1}, producer_id=P1) == {
            T0: expected, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert len(b.appended) == before
    # a partition not in the transaction: TRANSACTION_ABORTABLE from v4 on, as Kafka 4.3.1 answers
    answer["code"] = int(E.TRANSACTION_ABORTABLE)
    assert [b.txn_commit(G, {T0: 2}, producer_id=P1, version=v)[T0] for v in (2, 3, 4, 5)] == [
        E.INVALID_TXN_STATE, E.INVALID_TXN_STATE, E.TRANSACTION_ABORTABLE, E.TRANSACTION_ABORTABLE]
    # the group status comes first: no verification for a group this coordinator does not own
    calls.clear()
    other = Broker(own=False, txn_verifier=verifier)
    assert other.txn_commit(G, {T0: 1}) == {T0: E.NOT_COORDINATOR} and calls == []


@pytest.mark.parametrize("version", range(0, 6))
def test_every_version(version):
    b = Broker()
    p = b.coord.partition_for(G)
    assert b.txn_commit(G, {T0: 10, U0: 11}, version=version, leader_epoch=7, metadata=None) == {T0: 0, U0: 0}
    b.marker(p, 1000, commit=True)
    offsets, _ = b.fetch(G, [T0, U0])
    epoch = 7 if version >= 2 else -1
    assert offsets == {T0: (10, epoch, "", 0), U0: (11, epoch, "", 0)}


# -- expiry and deletion -----------------------------------------------------------------------

def test_pending_transactional_offsets_are_not_expired_and_keep_their_group():
    cfg = GroupConfig(initial_rebalance_delay_ms=100, num_partitions=4, offsets_retention_ms=DAY,
                      offsets_retention_check_interval_ms=600_000)
    b = Broker(cfg)
    p = b.coord.partition_for(G)
    b.commit(G, {T0: 5, T1: 6})
    b.txn_commit(G, {T0: 10}, producer_id=P1)
    b.txn_commit("pending-only", {T0: 1}, producer_id=P2)
    b.advance(DAY + 600_001)
    # T1 expired; T0 has a transaction pending: kept, like the group with only a pending offset
    assert visible(b, G, [T0, T1]) == {T0: 5, T1: -1}
    assert b.group("pending-only") is not None
    b.marker(p, P1, commit=False)
    b.marker(b.coord.partition_for("pending-only"), P2, commit=False)
    assert b.group("pending-only") is None  # nothing left: gone at once
    b.advance(600_001)
    assert b.group(G) is None  # T0 expired too, and the group with it
    assert_reload_matches(b, cfg)


def test_delete_groups_drops_pending_transactional_offsets_for_good():
    b = Broker()
    p = b.coord.partition_for(G)
    b.commit(G, {T0: 5})
    b.txn_commit(G, {T0: 10, T1: 11}, producer_id=P1)
    before = len(b.appended)
    assert b.delete_groups(G) == {G: 0}
    tombstones = {parse_key(r.key) for r in b.appended[before:] if r.value is None}
    assert tombstones == {OffsetKey(G, "t", 0), OffsetKey(G, "t", 1), GroupKey(G)}
    assert b.group(G) is None
    b.marker(p, P1, commit=True)  # the transaction commits after the deletion
    assert b.group(G) is None
    assert visible(b, G, [T0, T1], require_stable=True) == {T0: -1, T1: -1}
    fresh = assert_reload_matches(b)
    assert fresh.group(G) is None


def test_delete_groups_of_a_group_with_members_is_refused_even_with_pending_offsets():
    b = Broker()
    (m, gen), = b.form_group(G, 1)
    b.txn_commit(G, {T0: 10}, producer_id=P1, generation=gen, member_id=m)
    assert b.delete_groups(G) == {G: E.NON_EMPTY_GROUP}
    assert pending(b, G) == {P1: {T0: 10}}


def test_offset_delete_and_deleted_topics_drop_pending_transactional_offsets():
    b = Broker()
    p = b.coord.partition_for(G)
    b.txn_commit(G, {T0: 10, T1: 11, U0: 12}, producer_id=P1)
    b.commit(G, {T2: 2})
    assert b.offset_delete(G, [T1]) == (0, {T1: 0})
    assert pending(b, G) == {P1: {T0: 10, U0: 12}}
    b.apply(b.coord.on_partitions_deleted([U0], b.now))
    assert pending(b, G) == {P1: {T0: 10}}
    b.marker(p, P1, commit=True)
    assert visible(b, G, [T0, T1, T2, U0]) == {T0: 10, T1: -1, T2: 2, U0: -1}
    assert_reload_matches(b)


# -- random interleavings ----------------------------------------------------------------------

_TPS = [T0, T1, U0]
_OPS = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(_TPS), st.integers(0, 99)),
    st.tuples(st.just("txn"), st.sampled_from([P1, P2, P3]), st.sampled_from(_TPS), st.integers(0, 99)),
    st.tuples(st.just("marker"), st.sampled_from([P1, P2, P3]), st.booleans()),
    st.tuples(st.just("offset_delete"), st.sampled_from(_TPS)),
    st.tuples(st.just("delete_group")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_OPS, max_size=25))
def test_random_interleavings_match_the_model_and_the_reloaded_log(ops):
    """Any mix of plain commits, transactional commits of three producers, markers and
    deletions: OffsetFetch answers what a direct model of Kafka's rules says, and a coordinator
    loading the log has the same committed and pending offsets."""
    b = Broker()
    p = b.coord.partition_for(G)
    seq = 0
    committed: dict = {}  # tp -> (order, offset)
    txns: dict = {}  # producer -> tp -> (order, offset)
    for op in ops:
        seq += 1
        if op[0] == "commit":
            _, tp, value = op
            assert b.commit(G, {tp: value}) == {tp: 0}
            committed[tp] = (seq, value)
        elif op[0] == "txn":
            _, pid, tp, value = op
            assert b.txn_commit(G, {tp: value}, producer_id=pid) == {tp: 0}
            txns.setdefault(pid, {})[tp] = (seq, value)
        elif op[0] == "marker":
            _, pid, commit = op
            b.marker(p, pid, commit)
            for tp, (order, value) in txns.pop(pid, {}).items():
                if commit and (tp not in committed or committed[tp][0] < order):
                    committed[tp] = (order, value)
        elif op[0] == "offset_delete":
            _, tp = op
            code, _ = b.offset_delete(G, [tp])
            assert code == (0 if b.group(G) is not None or code == 0 else E.GROUP_ID_NOT_FOUND)
            committed.pop(tp, None)
            for offs in txns.values():
                offs.pop(tp, None)
        else:
            b.delete_groups(G)
            committed.clear()
            txns.clear()
        expect = {tp: committed[tp][1] if tp in committed else -1 for tp in _TPS}
        assert visible(b, G, _TPS) == expect
        open_tps = {tp for offs in txns.values() for tp in offs}
        assert visible(b, G, _TPS, require_stable=True) == {
            tp: E.UNSTABLE_OFFSET_COMMIT if tp in open_tps else v for tp, v in expect.items()}
        assert pending(b, G) == {pid: {tp: v for tp, (_, v) in offs.items()} for pid, offs in txns.items() if offs}
    assert_reload_matches(b)
