"""Leader and follower Partitions over real logs in tmp_path, replicating through the I/O-free
pieces the broker will wire: FollowerFetch (follower), the epoch cache's diverging_epoch and
ReplicaState (leader), and Partition.append_as_follower. Covers KIP-101/KIP-320 truncation of
divergent followers, OFFSET_OUT_OF_RANGE recovery, and byte-for-byte convergence."""

from __future__ import annotations

import uuid

import pytest

from kcompat.isr.follower import (
    AppendRecords, Backoff, Fenced, FollowerFetch, IncrementLogStartOffset, ListLeaderOffsets, SetHighWatermark,
    Truncate, TruncateFullyAndStartAt,
)
from kcompat.isr.partition import Partition
from kcompat.isr.replica_state import ReplicaState
from kcompat.log import Log, LogConfig, OffsetOutOfRangeError
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError

NOW = 1_700_000_000_000
CFG = LogConfig(segment_bytes=600, index_interval_bytes=100)


class Replica:
    """One broker's replica of t-0: a Partition, and the follower HW the fetcher maintains."""

    def __init__(self, path, leader_epoch: int = 0) -> None:
        self.path = path
        self.p = Partition("t", 0, uuid.UUID(int=1), Log.open(path, CFG, clean_shutdown=True, now_ms=NOW),
                           leader_epoch=leader_epoch)
        self.hw = 0

    @property
    def log(self) -> Log:
        return self.p.log

    def make_leader(self, epoch: int) -> None:
        """Kafka Partition.makeLeader: the new epoch starts at the LEO."""
        self.p.leader_epoch = epoch
        self.log.leader_epoch_cache.assign(epoch, self.log.log_end_offset)

    def produce(self, *values: bytes, pid: int = -1, seq: int = -1, txn: bool = False) -> int:
        b = rb.build_batch([(NOW, b"k", v, ()) for v in values], producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=seq, transactional=txn)
        return self.p.append(memoryview(bytearray(b)), NOW, "tx" if txn else None).base_offset

    def apply(self, actions, leader: "Replica") -> None:
        """Execute follower actions as the broker's fetcher would."""
        for a in actions:
            if isinstance(a, Truncate):
                self.log.truncate_to(a.offset)
                self.p.producer_state.truncate_and_reload(None)
                self.p._load_producer_state()
            elif isinstance(a, TruncateFullyAndStartAt):
                self.log.truncate_fully_and_start_at(a.offset)
                self.p.producer_state.truncate_and_reload(None)
            elif isinstance(a, AppendRecords):
                assert self.p.append_as_follower(a.records, NOW) == (a.first_offset, a.last_offset)
            elif isinstance(a, SetHighWatermark):
                self.hw = a.high_watermark
            elif isinstance(a, IncrementLogStartOffset):
                self.log.delete_records_before(a.offset)
            elif isinstance(a, ListLeaderOffsets):
                self.apply(self.fetcher.on_leader_offsets(self.log, leader_log_start_offset=leader.log.log_start_offset,
                                                          leader_log_end_offset=leader.log.log_end_offset), leader)
            else:
                raise AssertionError(f"unexpected action {a}")

    def entries(self) -> list[tuple[int, int, bytes]]:
        """(offset, partition leader epoch, value) of every stored record."""
        out = []
        for h in self.log.iter_batch_headers(self.log.log_start_offset):
            data = self.log.read(max(h.base_offset, self.log.log_start_offset), h.size)
            out += [(r.offset, h.partition_leader_epoch, r.value) for r in rb.iter_records(memoryview(data)[:h.size])]
        return out


def serve_fetch(leader: Replica, pos, state: ReplicaState | None = None, max_bytes: int = 300) -> dict:
    """The leader's side of a follower Fetch v12+ (what the Fetch handler will do)."""
    if pos.current_leader_epoch != leader.p.leader_epoch:
        code = ErrorCode.FENCED_LEADER_EPOCH if pos.current_leader_epoch < leader.p.leader_epoch \
            else ErrorCode.UNKNOWN_LEADER_EPOCH
        return dict(error_code=code, high_watermark=-1, log_start_offset=-1, records=b"")
    log = leader.log
    leo_before = log.log_end_offset
    try:
        diverging = None
        if pos.last_fetched_epoch >= 0:
            diverging = log.leader_epoch_cache.diverging_epoch(pos.last_fetched_epoch, pos.fetch_offset,
                                                               log.log_start_offset, leo_before)
        records = b"" if diverging else log.read(pos.fetch_offset, max_bytes)
    except OffsetOutOfRangeError:
        return dict(error_code=ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark=-1, log_start_offset=-1, records=b"")
    hw = leo_before
    if state is not None and diverging is None:
        state.update_follower_fetch(2, fetch_offset=pos.fetch_offset, log_start_offset=pos.log_start_offset,
                                    fetch_time_ms=NOW, leader_end_offset=leo_before)
        hw = state.high_watermark
    return dict(error_code=0, high_watermark=hw, log_start_offset=log.log_start_offset, records=records,
                diverging_epoch=diverging, fetch_offset=pos.fetch_offset)


def replicate(follower: Replica, leader: Replica, state: ReplicaState | None = None, rounds: int = 50) -> int:
    """Fetch until a round changes nothing; returns the number of fetches."""
    for n in range(rounds):
        pos = follower.fetcher.fetch_position(follower.log)
        assert pos is not None
        actions = follower.fetcher.on_fetch_response(follower.log, **serve_fetch(leader, pos, state))
        assert not any(isinstance(a, (Backoff, Fenced)) for a in actions), actions
        before = (follower.log.log_end_offset, follower.hw, follower.log.log_start_offset)
        follower.apply(actions, leader)
        if before == (follower.log.log_end_offset, follower.hw, follower.log.log_start_offset) and \
                not any(isinstance(a, (Truncate, AppendRecords, ListLeaderOffsets)) for a in actions):
            return n + 1
    raise AssertionError("replication did not settle")


def follow(follower: Replica, leader: Replica) -> None:
    follower.fetcher = FollowerFetch("t", 0, leader_id=1, leader_epoch=leader.p.leader_epoch)
    follower.apply(follower.fetcher.start(follower.log, follower.hw), leader)


def test_follower_converges_byte_for_byte_and_the_leader_hw_follows(tmp_path):
    leader, follower = Replica(tmp_path / "a" / "t-0", 3), Replica(tmp_path / "b" / "t-0", 3)
    leader.make_leader(3)
    for i in range(12):
        leader.produce(b"v%d" % i, b"w%d" % i, pid=7, seq=2 * i)
    state = ReplicaState(1, replicas=(1, 2), isr=(1, 2), leader_epoch=3, partition_epoch=0,
                         leader_epoch_start_offset=0, high_watermark=0,
                         leader_log_end_offset=lambda: leader.log.log_end_offset, now_ms=NOW)
    assert state.maybe_increment_high_watermark(NOW) is False          # the follower has nothing yet
    follow(follower, leader)
    assert replicate(follower, leader, state) > 3                      # several fetches of max 300 bytes
    assert follower.entries() == leader.entries()
    assert follower.log.read(0, 10**6) == leader.log.read(0, 10**6)
    assert follower.log.leader_epoch_cache.entries == leader.log.leader_epoch_cache.entries == [(3, 0)]
    assert state.high_watermark == follower.hw == leader.log.log_end_offset == 24
    assert follower.p.producer_state.producers[7].last_seq == 23      # idempotence state replicated
    state.isr_change_committed((1, 2), 1, NOW)
    assert not state.out_of_sync_replicas(NOW + 10**6)                 # at the leader's LEO


def test_returning_old_leader_truncates_exactly_the_divergent_suffix(tmp_path):
    a, b = Replica(tmp_path / "a" / "t-0", 1), Replica(tmp_path / "b" / "t-0", 1)
    a.make_leader(1)
    for i in range(3):
        a.produce(b"a%d" % i, b"a%d'" % i)                              # 0-5 in epoch 1
    follow(b, a)
    replicate(b, a)
    a.produce(b"lost1", b"lost2")                                       # 6-7: never replicated, never committed
    a.produce(b"lost3")                                                 # 8
    # a dies; b is elected in epoch 2 and takes writes
    b.make_leader(2)
    b.produce(b"b1", b"b2")                                             # 6-7 in epoch 2
    assert b.log.leader_epoch_cache.entries == [(1, 0), (2, 6)]
    # a comes back as a follower of b: Fetch with last_fetched_epoch 1 at offset 9
    follow(a, b)
    pos = a.fetcher.fetch_position(a.log)
    assert (pos.fetch_offset, pos.last_fetched_epoch, pos.current_leader_epoch) == (9, 1, 2)
    reply = serve_fetch(b, pos)
    assert reply["diverging_epoch"] == (1, 6)
    assert a.fetcher.on_fetch_response(a.log, **reply) == [Truncate(6)]
    replicate(a, b)
    assert a.entries() == b.entries()
    assert [v for _o, _e, v in a.entries()][:6] == [b"a0", b"a0'", b"a1", b"a1'", b"a2", b"a2'"]
    assert a.log.leader_epoch_cache.entries == [(1, 0), (2, 6)]


def test_an_epoch_unknown_to_the_follower_takes_two_rounds(tmp_path):
    leader, follower = Replica(tmp_path / "l" / "t-0"), Replica(tmp_path / "f" / "t-0")
    # leader history: epoch 1 at 0-3, epoch 2 at 4-7, epoch 4 at 8-11
    for epoch, start in ((1, 0), (2, 4), (4, 8)):
        leader.make_leader(epoch)
        leader.produce(b"l%d" % start, b"l%d" % (start + 1))
        leader.produce(b"l%d" % (start + 2), b"l%d" % (start + 3))
    # follower: epoch 1 up to 3, then led epoch 3 itself with records 4-9 nobody else has
    follower.make_leader(1)
    follower.produce(b"l0", b"l1")
    follower.produce(b"l2", b"l3")
    follower.make_leader(3)
    for i in range(3):
        follower.produce(b"x", b"y")
    follower.p.leader_epoch = 4
    follow(follower, leader)
    r1 = serve_fetch(leader, follower.fetcher.fetch_position(follower.log))
    assert r1["diverging_epoch"] == (2, 8)                              # leader: epoch <= 3 is 2, ending at 8
    assert follower.fetcher.on_fetch_response(follower.log, **r1) == [Truncate(4)]   # our end of epoch 1
    follower.apply([Truncate(4)], leader)
    r2 = serve_fetch(leader, follower.fetcher.fetch_position(follower.log))
    assert r2["diverging_epoch"] is None                                # epoch 1 ends at 4 on both
    replicate(follower, leader)
    assert follower.entries() == leader.entries()
    assert follower.log.leader_epoch_cache.entries == [(1, 0), (2, 4), (4, 8)]


def test_follower_behind_the_leaders_log_start_restarts_there(tmp_path):
    leader, follower = Replica(tmp_path / "l" / "t-0"), Replica(tmp_path / "f" / "t-0")
    leader.make_leader(0)
    follower.make_leader(0)
    follower.produce(b"old")                                            # 0
    for i in range(10):
        leader.produce(b"v%d" % i, b"w%d" % i)
    leader.p.delete_records(12)                                         # leader keeps 12-19
    follower.p.leader_epoch = 0
    follow(follower, leader)
    pos = follower.fetcher.fetch_position(follower.log)
    assert pos.fetch_offset == 1
    actions = follower.fetcher.on_fetch_response(follower.log, **serve_fetch(leader, pos))
    assert actions == [ListLeaderOffsets()]
    follower.apply(actions, leader)                                     # -> TruncateFullyAndStartAt(12)
    assert follower.log.log_start_offset == follower.log.log_end_offset == 12
    replicate(follower, leader)
    assert follower.entries() == leader.entries()
    assert follower.entries()[0][0] == 12


def test_leader_log_start_inside_a_batch_restarts_the_empty_follower_at_the_batch(tmp_path):
    leader, follower = Replica(tmp_path / "l" / "t-0"), Replica(tmp_path / "f" / "t-0")
    leader.make_leader(0)
    leader.produce(b"a", b"b", b"c")                                    # 0-2
    leader.produce(b"d", b"e")                                          # 3-4
    leader.p.delete_records(1)                                          # log start inside the first batch
    follower.log.truncate_fully_and_start_at(1)
    follow(follower, leader)
    replicate(follower, leader)
    assert follower.log.log_end_offset == 5
    assert [o for o, _e, _v in follower.entries()] == [0, 1, 2, 3, 4]   # the whole batch, as the leader serves it
    assert follower.log.log_start_offset == 1                           # back to the leader's log start


def test_transactions_replicate_with_their_aborted_index(tmp_path):
    leader, follower = Replica(tmp_path / "l" / "t-0"), Replica(tmp_path / "f" / "t-0")
    leader.make_leader(0)
    leader.produce(b"t1", pid=5, seq=0, txn=True)                       # 0
    leader.p.append_marker(5, 0, 0, False, NOW)                         # 1: ABORT
    leader.produce(b"t2", pid=5, seq=1, txn=True)                       # 2: open
    follow(follower, leader)
    replicate(follower, leader)
    assert follower.p.aborted_transactions(0, 3) == leader.p.aborted_transactions(0, 3) == [(5, 0)]
    assert follower.p.producer_state.first_unstable_offset() == 2


def test_append_as_follower_rejects_corrupt_batches_and_keeps_bytes(tmp_path):
    f = Replica(tmp_path / "t-0")
    good = rb.build_batch([(NOW, b"k", b"v", ())], base_offset=0, partition_leader_epoch=4)
    bad = bytearray(rb.build_batch([(NOW, b"k", b"w", ())], base_offset=1, partition_leader_epoch=4))
    bad[-1] ^= 0xFF
    with pytest.raises(KafkaError) as e:
        f.p.append_as_follower(good + bytes(bad), NOW)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    assert f.log.log_end_offset == 0                                    # nothing appended
    assert f.p.append_as_follower(b"", NOW) is None
    assert f.p.append_as_follower(good + good[:20], NOW) == (0, 0)      # trailing partial batch ignored
    assert f.log.read(0, 10**6) == good                                 # stored as the leader sent it
    assert f.log.leader_epoch_cache.entries == [(4, 0)]
    with pytest.raises(ValueError):
        f.p.append_as_follower(good, NOW)                               # offset 0 is below the LEO 1
