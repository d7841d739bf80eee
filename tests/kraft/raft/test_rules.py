"""The individual rules of the Raft core, each set up by hand (the simulation covers them in
combination): vote granting, pre-vote, divergence truncation, high watermark advance, snapshot
fetch, restart, resignation, check quorum, DescribeQuorum and the application API."""

from __future__ import annotations

import random

import pytest

from kcompat.kraft.raft import (
    CommittedBatch, ElectionState, LeaderChanged, MemoryQuorumStateStore, MemoryRaftLog,
    NotLeaderError, OffsetAndEpoch, RaftClient, RaftConfig, Reply, Role, Send, SnapshotLoaded,
)
from kcompat.kraft.raft import messages as m
from kcompat.kraft.raft.candidate import CandidateState, ProspectiveState, can_grant_vote
from kcompat.kraft.raft.follower import FollowerState, truncation_offset
from kcompat.kraft.raft.leader import LeaderState
from kcompat.kraft.raft.snapshot import validate_fetch_position
from kcompat.kraft.raft.state import ResignedState, UnattachedState
from kcompat.kraft.raft.types import ValidKind
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_quorum import DescribeQuorumRequest
from tests.kraft.raft.harness import Net, batch

P = m.Partition("__cluster_metadata")
VOTERS = frozenset({1, 2, 3})


def client(node_id=1, log=None, store=None, voters=VOTERS, **cfg) -> RaftClient:
    config = RaftConfig(node_id=node_id, voters=voters, cluster_id="test", **cfg)
    return RaftClient(config, log or MemoryRaftLog(), store or MemoryQuorumStateStore(),
                      random.Random(0), 0)


def replies(c: RaftClient, now=0) -> list:
    return [o.response for o in c.poll(now).outbound if type(o) is Reply]


def vote(c: RaftClient, epoch, candidate, last_offset, last_epoch, pre_vote=False):
    c.handle_request(m.vote_request(P, "test", epoch, candidate, c.node_id, last_epoch, last_offset,
                                    pre_vote), "r", 0)
    (resp,) = replies(c)
    return resp.topics[0].partitions[0]


def log_with(*epochs_and_counts) -> MemoryRaftLog:
    """A log of single-record batches: log_with((1, 3), (2, 4)) = 3 batches of epoch 1, 4 of epoch 2."""
    log = MemoryRaftLog()
    n = 0
    for epoch, count in epochs_and_counts:
        for _ in range(count):
            n += 1
            log.append_as_leader(batch(b"r%d" % n), epoch)
    log.flush()
    return log


# ---------------------------------------------------------------------------------------- votes
def test_vote_granting_table():
    up, stale = True, False
    unattached = UnattachedState(3, -1, 0)
    voted = UnattachedState(3, 2, 0)
    follower = FollowerState(3, 2, -1, 2000, 0)
    fetched = FollowerState(3, 2, -1, 2000, 0)
    fetched.reset_fetch_timeout(0)
    candidate = CandidateState(3, VOTERS, 1, 1, 0)
    prospective = ProspectiveState(3, VOTERS, 1, 1, 0)
    prospective_with_leader = ProspectiveState(3, VOTERS, 1, 1, 0)
    prospective_with_leader.leader_id = 2
    leader = LeaderState(1, 3, 0, VOTERS, {1, 2}, 2000, 0)
    resigned = ResignedState(1, 3, VOTERS, [], 0)
    # standard votes
    assert can_grant_vote(unattached, 2, up, False)
    assert not can_grant_vote(unattached, 2, stale, False)
    assert can_grant_vote(voted, 2, up, False) and can_grant_vote(voted, 2, stale, False)  # same candidate again
    assert not can_grant_vote(voted, 3, up, False)                                          # one vote per epoch
    assert can_grant_vote(prospective, 2, up, False)
    assert not can_grant_vote(prospective_with_leader, 3, up, False)
    for state in (follower, fetched, candidate, leader, resigned):
        assert not can_grant_vote(state, 2, up, False), state
    # pre-votes: non-binding, only the log and a live leader matter
    for state in (unattached, voted, candidate, prospective, prospective_with_leader, resigned, follower):
        assert can_grant_vote(state, 3, up, True), state
        assert not can_grant_vote(state, 3, stale, True), state
    assert not can_grant_vote(fetched, 3, up, True)
    assert not can_grant_vote(leader, 3, up, True)


def test_vote_is_persisted_before_it_is_granted_and_only_once_per_epoch():
    store = MemoryQuorumStateStore()
    c = client(store=store)
    p = vote(c, epoch=1, candidate=2, last_offset=0, last_epoch=0)
    assert p.vote_granted and p.error_code == 0
    assert store.state == ElectionState(1, -1, 2, VOTERS)
    assert c.role is Role.UNATTACHED and c.quorum.state.voted_id == 2
    assert not vote(c, 1, 3, 0, 0).vote_granted          # another candidate, same epoch
    assert vote(c, 1, 2, 0, 0).vote_granted              # a retransmission from the same one
    assert store.state == ElectionState(1, -1, 2, VOTERS)
    assert vote(c, 2, 3, 0, 0).vote_granted              # a new epoch, a new vote
    assert store.state == ElectionState(2, -1, 3, VOTERS)


def test_vote_needs_a_log_at_least_as_up_to_date():
    c = client(log=log_with((1, 2), (2, 3)))              # end offset 5, last epoch 2
    assert c.epoch == 2                                   # the log's epoch beats an empty quorum-state
    assert not vote(c, 3, 2, last_offset=9, last_epoch=1).vote_granted  # longer but older epoch
    assert not vote(c, 4, 2, last_offset=4, last_epoch=2).vote_granted  # same epoch, shorter
    assert vote(c, 5, 2, last_offset=1, last_epoch=3).vote_granted      # newer epoch, shorter is fine
    assert vote(client(log=log_with((1, 2), (2, 3))), 3, 2, 5, 2).vote_granted  # equal is enough


def test_vote_with_stale_epoch_is_fenced_and_tells_the_epoch():
    c = client(log=log_with((4, 1)))
    p = vote(c, 2, 2, 0, 0)
    assert p.error_code == ErrorCode.FENCED_LEADER_EPOCH and not p.vote_granted and p.leader_epoch == 4


def test_pre_vote_changes_no_state():
    store = MemoryQuorumStateStore()
    c = client(store=store)
    writes = store.writes
    p = vote(c, 0, 2, 0, 0, pre_vote=True)
    assert p.vote_granted
    assert store.writes == writes and c.role is Role.UNATTACHED and c.epoch == 0


def test_follower_refuses_pre_votes_while_its_leader_is_alive_and_grants_after_end_quorum_epoch():
    net = Net()
    leader = net.elect()
    follower = next(c for c in net.clients.values() if not c.is_leader)
    other = next(i for i in net.clients if i not in (leader.node_id, follower.node_id))
    end = follower.log.end_offset
    assert not vote(follower, follower.epoch, other, end, follower.log.last_fetched_epoch, True).vote_granted
    leader.resign(net.now)
    net.deliver()                                         # EndQuorumEpoch reaches the followers
    assert leader.role in (Role.RESIGNED, Role.PROSPECTIVE, Role.UNATTACHED, Role.FOLLOWER,
                           Role.CANDIDATE)
    if follower.role is Role.FOLLOWER and follower.leader_and_epoch.leader_id == leader.node_id:
        assert vote(follower, follower.epoch, other, end, follower.log.last_fetched_epoch, True).vote_granted


# ---------------------------------------------------------------------------------------- divergence
def test_leader_answers_divergence_with_end_of_largest_common_epoch():
    leader_log = log_with((1, 3), (3, 3))                  # epoch 1: 0-2, epoch 3: 3-5
    assert validate_fetch_position(leader_log, 7, 2) == (ValidKind.DIVERGING, OffsetAndEpoch(3, 1))
    assert validate_fetch_position(leader_log, 4, 1) == (ValidKind.DIVERGING, OffsetAndEpoch(3, 1))
    assert validate_fetch_position(leader_log, 3, 1).kind is ValidKind.VALID
    assert validate_fetch_position(leader_log, 5, 3).kind is ValidKind.VALID
    assert validate_fetch_position(leader_log, 6, 3).kind is ValidKind.VALID
    assert validate_fetch_position(leader_log, 0, 0).kind is ValidKind.VALID


def test_follower_truncates_exactly_the_divergent_suffix():
    follower_log = log_with((1, 3), (2, 4))                # epoch 2 at 3-6 was never committed
    assert truncation_offset(follower_log, OffsetAndEpoch(3, 1)) == 3
    # the leader has epoch 2 only up to 5: keep 3-4
    assert truncation_offset(follower_log, OffsetAndEpoch(5, 2)) == 5
    # the leader knows an epoch the follower does not have: go back to the follower's own end of
    # its largest epoch below it, and ask again
    assert truncation_offset(log_with((1, 3), (3, 2)), OffsetAndEpoch(4, 2)) == 3


def test_divergent_follower_converges_on_the_leaders_log():
    net = Net()
    # node 1 and 2 share epoch 1 (0-2) and epoch 3 (3-5); node 3 has an uncommitted epoch 2 suffix
    for i, spec in ((1, ((1, 3), (3, 3))), (2, ((1, 3), (3, 3))), (3, ((1, 3), (2, 5)))):
        log = log_with(*spec)
        net.logs[i] = log
        net.stores[i] = MemoryQuorumStateStore()
    net.clients.clear()
    for i in (1, 2, 3):
        net.start(i)
    leader = net.elect()
    assert leader.node_id in (1, 2)                        # node 3's log is not up to date
    net.advance(2000)
    expected = [(b[0], b[2], b[3]) for b in net.logs[leader.node_id].batches()]
    assert [(b[0], b[2], b[3]) for b in net.logs[3].batches()] == expected
    assert net.clients[3].metrics["truncations"] >= 1
    assert all(c.high_watermark == leader.log.end_offset for c in net.clients.values())


# ---------------------------------------------------------------------------------------- high watermark
def test_leader_high_watermark_needs_a_majority_and_a_record_of_its_epoch():
    s = LeaderState(1, epoch=4, epoch_start_offset=5, voters=VOTERS, granting_voters={1, 2},
                    fetch_timeout_ms=2000, now_ms=0)
    assert not s.update_local(6)                           # only the leader has offset 5
    assert not s.update_replica(2, 0, 5)                   # a majority at 5: all of epoch < 4 ...
    assert s.high_watermark is None                        # ... but nothing of epoch 4 yet
    assert s.update_replica(2, 0, 6)                       # the LeaderChange record on a majority
    assert s.high_watermark == 6
    assert not s.update_replica(3, 0, 6)
    s.update_local(9)
    assert s.update_replica(3, 0, 8) and s.high_watermark == 8
    assert not s.update_replica(2, 0, 6) and s.high_watermark == 8  # never backwards


def test_five_voters_need_three():
    s = LeaderState(1, 1, 0, frozenset({1, 2, 3, 4, 5}), {1, 2, 3}, 2000, 0)
    s.update_local(10)
    s.update_replica(2, 0, 10)
    assert s.high_watermark is None
    s.update_replica(3, 0, 7)
    assert s.high_watermark == 7


def test_follower_high_watermark_is_bounded_by_its_own_log():
    net = Net()
    leader = net.elect()
    for i in range(5):
        leader.append(batch(b"x%d" % i), net.now)
    net.poll(leader.node_id)
    # node 3 only receives part of the log: cap what it is sent
    net.advance(3000)
    for c in net.clients.values():
        assert c.high_watermark <= c.log.end_offset
    assert {c.high_watermark for c in net.clients.values()} == {leader.log.end_offset}


def test_followers_learn_a_commit_without_waiting_out_the_fetch_wait():
    """The fetch that moves the leader's HW is parked (no records to return), but it carries a
    HW the follower has not been sent: it is answered at once, so every voter knows the commit in
    one more round trip instead of after fetch_max_wait_ms (500 ms)."""
    net = Net()
    leader = net.elect()
    net.advance(1000)   # quiet: every follower's fetch is parked at the leader
    leader.append(batch(b"commit me"), net.now)
    net.deliver()       # no simulated time passes
    end = leader.log.end_offset
    assert leader.high_watermark == end
    assert {c.high_watermark for c in net.clients.values()} == {end}
    assert len(leader._parked) == 2   # and then both park again rather than spin


# ---------------------------------------------------------------------------------------- snapshots
def test_lagging_follower_catches_up_from_a_snapshot_in_chunks():
    net = Net(fetch_snapshot_max_bytes=4)
    leader = net.elect()
    lagging = next(i for i in net.clients if i != leader.node_id)
    cut = lambda src, dst, msg: lagging in (src, dst)      # noqa: E731
    for i in range(6):
        leader.append(batch(b"v%d" % i), net.now)
        net.advance(50, drop=cut)
    hw = leader.high_watermark
    assert hw == leader.log.end_offset and net.logs[lagging].end_offset < hw
    sid = leader.create_snapshot(hw, b"state-at-%d" % hw, net.now)
    assert leader.log.start_offset == hw and sid.offset == hw
    net.clients[lagging].take_events()
    net.advance(3000)                                      # healed
    follower = net.clients[lagging]
    events = follower.take_events()
    loads = [e for e in events if isinstance(e, SnapshotLoaded)]
    assert loads and loads[0].data == b"state-at-%d" % hw and loads[0].snapshot_id == sid
    assert follower.log.start_offset == hw and follower.log.read_snapshot(sid) == b"state-at-%d" % hw
    assert follower.metrics["snapshot_installs"] == 1
    assert leader.metrics["snapshot_chunks_served"] >= len(b"state-at-%d" % hw) // 4
    # and replication continues after the snapshot
    last = leader.append(batch(b"after"), net.now)
    net.advance(1000)
    assert follower.high_watermark == last + 1


def test_snapshot_must_be_committed():
    net = Net()
    leader = net.elect()
    with pytest.raises(ValueError):
        leader.create_snapshot(leader.high_watermark + 1, b"x", net.now)


# ---------------------------------------------------------------------------------------- restart
def test_leader_restarts_resigned_and_cannot_lead_the_same_epoch_again():
    net = Net()
    leader = net.elect()
    epoch = leader.epoch
    net.crash(leader.node_id)
    restarted = net.start(leader.node_id)
    assert restarted.role is Role.RESIGNED and restarted.epoch == epoch
    net.advance(10_000)
    assert net.leader() is not None and net.leader().epoch > epoch


def test_a_vote_survives_a_restart():
    store = MemoryQuorumStateStore()
    log = MemoryRaftLog()
    c = client(store=store, log=log)
    assert vote(c, 1, 2, 0, 0).vote_granted
    c2 = client(store=store, log=log)
    assert c2.epoch == 1 and c2.quorum.state.voted_id == 2
    assert not vote(c2, 1, 3, 0, 0).vote_granted


# ---------------------------------------------------------------------------------------- leadership
def test_graceful_resignation_hands_over_quickly():
    net = Net()
    leader = net.elect()
    old_epoch = leader.epoch
    leader.resign(net.now)
    start = net.now
    new = None
    while net.now - start < 3000:
        net.advance(10)
        new = net.leader()
        if new is not None and new.epoch > old_epoch:
            break
    assert new is not None and new.node_id != leader.node_id
    # without EndQuorumEpoch the followers would wait out the fetch timeout (2000 ms)
    assert net.now - start < 2000


def test_partitioned_leader_resigns_after_check_quorum_timeout():
    net = Net()
    leader = net.elect()
    alone = lambda src, dst, msg: leader.node_id in (src, dst)  # noqa: E731
    net.advance(2900, drop=alone)
    assert leader.is_leader
    # 1.5 x fetch timeout = 3000 ms after the last fetch, which may have been parked up to 500 ms
    net.advance(700, drop=alone)
    assert not leader.is_leader
    assert leader.metrics["resigned_check_quorum"] == 1


def test_single_voter_leads_at_once_and_commits_on_poll():
    c = client(voters=frozenset({1}))
    assert c.is_leader and c.epoch == 1
    offset = c.append(batch(b"a", b"b"), 0)
    assert offset == 2                                      # 0 is the LeaderChange record
    c.poll(0)
    assert c.high_watermark == 3
    events = c.take_events()
    # the local leadership is announced after every record before the epoch, before its first batch
    (i,) = [k for k, e in enumerate(events) if isinstance(e, LeaderChanged) and e.leader.leader_id == 1]
    assert events[i].epoch_start_offset == 0
    batches = [e for e in events if isinstance(e, CommittedBatch)]
    assert i < events.index(batches[0])
    assert [b.base_offset for b in batches] == [0, 1] and batches[0].is_control
    assert batches[1].last_offset == 2 and batches[1].epoch == 1


def test_append_needs_the_leader_of_the_given_epoch():
    net = Net()
    leader = net.elect()
    follower = next(c for c in net.clients.values() if not c.is_leader)
    with pytest.raises(NotLeaderError) as e:
        follower.append(batch(b"x"), net.now)
    assert e.value.leader.leader_id == leader.node_id
    with pytest.raises(NotLeaderError):
        leader.append(batch(b"x"), net.now, epoch=leader.epoch - 1)
    with pytest.raises(ValueError):
        leader.append(batch(b"x")[:-1], net.now)


def test_observer_finds_the_leader_and_replicates():
    net = Net(observers=(9,))
    leader = net.elect()
    last = leader.append(batch(b"for-brokers"), net.now)
    net.advance(3000)
    observer = net.clients[9]
    assert observer.role is Role.FOLLOWER and observer.leader_and_epoch == leader.leader_and_epoch
    assert observer.high_watermark == last + 1
    data = leader.describe_quorum(net.now)
    assert [v.replica_id for v in data.current_voters] == [1, 2, 3]
    assert [o.replica_id for o in data.observers] == [9]


def test_describe_quorum():
    net = Net()
    leader = net.elect()
    net.advance(600)
    leader.handle_request(DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.PartitionData()])]), "d", net.now)
    (resp,) = [o.response for o in leader.poll(net.now).outbound if type(o) is Reply]
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0 and p.leader_id == leader.node_id and p.leader_epoch == leader.epoch
    assert p.high_watermark == leader.high_watermark
    for v in p.current_voters:
        assert v.log_end_offset == leader.log.end_offset
        assert v.last_fetch_timestamp > 0 and v.last_caught_up_timestamp > 0
    follower = next(c for c in net.clients.values() if not c.is_leader)
    follower.handle_request(DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.PartitionData()])]), "d", net.now)
    (resp,) = [o.response for o in follower.poll(net.now).outbound if type(o) is Reply]
    assert resp.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_wrong_cluster_id_is_refused():
    c = client()
    c.handle_request(m.vote_request(P, "other", 1, 2, 1, 0, 0, False), "r", 0)
    (resp,) = replies(c)
    assert resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    c.handle_request(m.fetch_request(P, "other", 2, 0, 0, 0, 0, 100), "r", 0)
    (resp,) = replies(c)
    assert resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID


def test_requests_go_out_with_ids_and_late_responses_are_ignored():
    net = Net()
    net.now = 5000
    c = net.clients[1]
    sends = [o for o in c.poll(net.now).outbound if type(o) is Send]
    assert sends and all(s.destination in (2, 3) for s in sends)
    c.handle_response(10_000, None, net.now)               # unknown id: ignored
    for s in sends:
        c.handle_response(s.request_id, None, net.now)     # failures back off, no crash


def test_election_backoffs():
    from kcompat.kraft.raft.candidate import binary_exponential_backoff_ms, strict_exponential_backoff_ms
    rng = random.Random(3)
    assert all(binary_exponential_backoff_ms(1, 1000, rng) in (0, 100) for _ in range(50))
    assert all(0 <= binary_exponential_backoff_ms(30, 1000, rng) <= 1000 for _ in range(50))
    # the most caught-up successor stands at once, the others later and later
    assert [strict_exponential_backoff_ms(p, 3, 1000) for p in range(3)] == [0, 250, 500]
    assert strict_exponential_backoff_ms(-1, 3, 1000) == 1000


def test_resigning_leader_names_successors_most_caught_up_first():
    s = LeaderState(1, 2, 0, frozenset({1, 2, 3, 4, 5}), {1, 2, 3}, 2000, 0)
    s.update_local(10)
    s.update_replica(4, 0, 9)
    s.update_replica(2, 0, 5)
    s.update_replica(5, 0, 9)
    assert s.successors_by_progress() == [4, 5, 2, 3]
