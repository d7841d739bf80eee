"""kcompat.log.leader_epoch: the leader-epoch-checkpoint file format and the LeaderEpochFileCache
semantics of Kafka's LeaderEpochFileCache (assign, endOffsetFor, truncateFromEnd/Start)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from kcompat.log import CheckpointError, OffsetOutOfRangeError
from kcompat.log.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT, EpochEntry, LeaderEpochFileCache, format_leader_epoch_checkpoint,
    read_leader_epoch_checkpoint,
)


def cache_at(tmp_path, entries=()) -> LeaderEpochFileCache:
    """A file-backed cache holding ``entries`` (assigned one by one, so the file has them)."""
    c = LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    for e in entries:
        c.assign(*e)
    return c


def file_text(tmp_path) -> str:
    return (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text()


# -- file format ----------------------------------------------------------------------------------
def test_format_is_kafkas_checkpoint_layout():
    assert format_leader_epoch_checkpoint([EpochEntry(0, 0), EpochEntry(3, 1200)]) == b"0\n2\n0 0\n3 1200\n"
    assert format_leader_epoch_checkpoint([]) == b"0\n0\n"


def test_reads_a_kafka_written_file(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n3\n0 0\n2  57\n7 1000\n")   # Kafka splits on any whitespace
    assert read_leader_epoch_checkpoint(path) == [(0, 0), (2, 57), (7, 1000)]
    assert read_leader_epoch_checkpoint(tmp_path / "missing") is None


def test_an_empty_file_reads_as_missing(tmp_path):
    # Kafka reads both as no entries; kcompat then rebuilds the cache from the log
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    for text in ("", "0\n"):
        path.write_text(text)
        assert read_leader_epoch_checkpoint(path) is None


@pytest.mark.parametrize("text", ["1\n", "1\n0\n", "0\n2\n0 0\n", "0\nx\n", "0\n1\n0\n", "0\n1\n0 0 0\n",
                                  "0\n1\na b\n", "0\n1\n-1 0\n", "0\n1\n0 -5\n"])
def test_malformed_files_are_rejected(tmp_path, text):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text(text)
    with pytest.raises(CheckpointError):
        read_leader_epoch_checkpoint(path)


# -- assign ---------------------------------------------------------------------------------------
def test_assign_appends_and_writes_the_file(tmp_path):
    c = cache_at(tmp_path)
    assert c.latest_epoch is None and c.entries == []
    assert c.assign(0, 0) and c.assign(2, 10)
    assert c.entries == [(0, 0), (2, 10)] and c.latest_epoch == 2
    assert file_text(tmp_path) == "0\n2\n0 0\n2 10\n"
    assert read_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) == c.entries


def test_assign_same_epoch_later_offset_is_a_no_op_without_a_write(tmp_path):
    c = cache_at(tmp_path, [(0, 0), (2, 10)])
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("sentinel")
    assert not c.assign(2, 15)
    assert c.entries == [(0, 0), (2, 10)]
    assert file_text(tmp_path) == "sentinel"


def test_assign_same_epoch_earlier_offset_moves_its_start(tmp_path):
    c = cache_at(tmp_path, [(0, 0), (2, 10)])
    assert c.assign(2, 8)
    assert c.entries == [(0, 0), (2, 8)]


def test_assign_replaces_an_epoch_that_wrote_nothing(tmp_path):
    # Partition.makeLeader assigns (epoch, LEO) before any record: the next leader at the same LEO
    # replaces it, as Kafka's maybeTruncateNonMonotonicEntries does
    c = cache_at(tmp_path, [(0, 0), (1, 5)])
    assert c.assign(2, 5)
    assert c.entries == [(0, 0), (2, 5)]


def test_assign_lower_epoch_removes_the_conflicting_suffix(tmp_path):
    c = cache_at(tmp_path, [(0, 0), (2, 10), (4, 20)])
    assert c.assign(3, 25)
    assert c.entries == [(0, 0), (2, 10), (3, 25)]
    assert c.assign(1, 5)
    assert c.entries == [(0, 0), (1, 5)]
    assert file_text(tmp_path) == "0\n2\n0 0\n1 5\n"


def test_assign_rejects_negative_values(tmp_path):
    c = cache_at(tmp_path)
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    with pytest.raises(ValueError):
        c.assign(0, -1)


def test_maybe_assign_from_batch_only_takes_higher_valid_epochs(tmp_path):
    c = cache_at(tmp_path)
    assert not c.maybe_assign_from_batch(-1, 0)     # NO_PARTITION_LEADER_EPOCH
    assert c.maybe_assign_from_batch(3, 0)
    assert not c.maybe_assign_from_batch(3, 4)
    assert not c.maybe_assign_from_batch(2, 9)      # lower: ignored, unlike assign
    assert c.maybe_assign_from_batch(5, 12)
    assert c.entries == [(3, 0), (5, 12)]


def test_constructor_enforces_monotonicity_and_rewrites_a_conflicting_file(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n3\n0 0\n3 10\n2 20\n")
    c = LeaderEpochFileCache(path, read_leader_epoch_checkpoint(path))
    assert c.entries == [(0, 0), (2, 20)]
    assert c.dirty
    c.flush_if_dirty()
    assert file_text(tmp_path) == "0\n2\n0 0\n2 20\n"
    assert not LeaderEpochFileCache(None, [EpochEntry(0, 0), EpochEntry(3, 10)]).dirty


# -- end_offset_for (OffsetForLeaderEpoch) ------------------------------------------------------
@pytest.mark.parametrize("requested, expected", [
    (-1, (-1, -1)),      # UNDEFINED_EPOCH
    (6, (6, 20)),        # latest epoch: ends at the LEO
    (7, (-1, -1)),       # above every epoch
    (0, (0, 0)),         # below the first epoch: the requested epoch and the first start offset
    (1, (1, 10)),        # a known epoch ends where the next starts
    (2, (1, 10)),        # unknown epoch between: the largest epoch <= requested
    (3, (1, 10)),
    (4, (4, 15)),
    (5, (4, 15)),
])
def test_end_offset_for(tmp_path, requested, expected):
    c = cache_at(tmp_path, [(1, 0), (4, 10), (6, 15)])
    assert c.end_offset_for(requested, 20) == expected


def test_end_offset_for_empty_cache(tmp_path):
    c = cache_at(tmp_path)
    assert c.end_offset_for(0, 7) == (-1, -1)
    assert c.end_offset_for(-1, 7) == (-1, -1)


monotonic = st.lists(st.tuples(st.integers(1, 5), st.integers(1, 50)), max_size=8).map(
    lambda steps: [(sum(e for e, _ in steps[:i + 1]), sum(o for _, o in steps[:i + 1])) for i in range(len(steps))])


@given(entries=monotonic, requested=st.integers(-1, 45), extra=st.integers(0, 100))
def test_end_offset_for_matches_its_definition(entries, requested, extra):
    """The answer is the largest epoch <= requested and the start of the next larger one (the
    LEO for the latest epoch), per the OffsetForLeaderEpoch definition; below the first epoch the
    requested epoch itself; nothing known or requested: (-1, -1)."""
    leo = (entries[-1][1] if entries else 0) + extra
    c = LeaderEpochFileCache(None, [EpochEntry(*e) for e in entries])
    got = c.end_offset_for(requested, leo)
    if requested == -1 or not entries or requested > entries[-1][0]:
        assert got == (-1, -1)
    elif requested == entries[-1][0]:
        assert got == (requested, leo)
    else:
        higher = [e for e in entries if e[0] > requested]
        lower = [e for e in entries if e[0] <= requested]
        assert got == ((lower[-1][0] if lower else requested), higher[0][1])


# -- truncation -----------------------------------------------------------------------------------
def test_truncate_from_end(tmp_path):
    c = cache_at(tmp_path, [(1, 0), (4, 10), (6, 15)])
    assert c.truncate_from_end(16) == []
    assert c.truncate_from_end(-1) == []
    assert c.truncate_from_end(15) == [(6, 15)]
    assert c.entries == [(1, 0), (4, 10)]
    assert file_text(tmp_path) == "0\n2\n1 0\n4 10\n"
    assert c.truncate_from_end(3) == [(4, 10)]
    assert c.truncate_from_end(0) == [(1, 0)]
    assert c.entries == [] and file_text(tmp_path) == "0\n0\n"


def test_truncate_from_start_keeps_the_epoch_in_force(tmp_path):
    c = cache_at(tmp_path, [(1, 0), (4, 10), (6, 15)])
    before = file_text(tmp_path)
    assert c.truncate_from_start(0) == []            # already the first entry's start
    assert not c.dirty
    assert c.truncate_from_start(12) == [(1, 0), (4, 10)]
    assert c.entries == [(4, 12), (6, 15)]
    assert c.dirty and file_text(tmp_path) == before  # deferred: written by the next write
    c.flush_if_dirty()
    assert not c.dirty and file_text(tmp_path) == "0\n2\n4 12\n6 15\n"
    assert c.truncate_from_start(15) == [(4, 12), (6, 15)]
    assert c.entries == [(6, 15)]                    # an entry exactly at the start stays
    assert c.truncate_from_start(3) == []


def test_epoch_for_offset(tmp_path):
    c = cache_at(tmp_path, [(1, 5), (4, 10)])
    assert [c.epoch_for_offset(o) for o in (0, 5, 9, 10, 99)] == [None, 1, 1, 4, 4]


def test_clear_writes_an_empty_file(tmp_path):
    c = cache_at(tmp_path, [(1, 5)])
    c.clear()
    assert c.entries == [] and file_text(tmp_path) == "0\n0\n"


# -- diverging epoch (KIP-320 Fetch v12+) --------------------------------------------------------
def test_diverging_epoch(tmp_path):
    c = cache_at(tmp_path, [(1, 0), (4, 10), (6, 15)])
    assert c.diverging_epoch(6, 18, 0, 20) is None       # same epoch, within the log
    assert c.diverging_epoch(4, 15, 0, 20) is None       # fetching exactly at the end of epoch 4
    assert c.diverging_epoch(4, 17, 0, 20) == (4, 15)    # the fetcher has epoch-4 records we do not
    assert c.diverging_epoch(5, 12, 0, 20) == (4, 15)    # epoch 5 unknown here: diverges at epoch 4
    assert c.diverging_epoch(2, 8, 0, 20) == (1, 10)
    with pytest.raises(OffsetOutOfRangeError):
        c.diverging_epoch(7, 20, 0, 20)                  # epoch beyond ours: undefined end
    with pytest.raises(OffsetOutOfRangeError):
        c.diverging_epoch(6, 3, 5, 20)                   # below the log start
