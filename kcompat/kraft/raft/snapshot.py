"""Snapshots and fetch-position validation (KIP-630, Kafka ``ReplicatedLog.validateOffsetAndEpoch``
and ``KafkaRaftClient.handleFetchSnapshotRequest``).

A snapshot holds the application state of every record below its end offset; it may only be taken
at a committed offset (at most the high watermark), so it never has to be undone. Once it exists the
log below it can be deleted; a follower whose fetch position falls below the leader's log start —
or does not match the epoch the snapshot records there — is sent the snapshot id and downloads it in
chunks with FetchSnapshot, then continues fetching from the snapshot's end offset.
"""

from __future__ import annotations

from kcompat.kraft.raft.log import RaftLog
from kcompat.kraft.raft.types import OffsetAndEpoch, SnapshotId, ValidKind, ValidOffsetAndEpoch


def validate_fetch_position(log: RaftLog, fetch_offset: int, last_fetched_epoch: int) -> ValidOffsetAndEpoch:
    """How the leader answers a Fetch at (``fetch_offset``, ``last_fetched_epoch``):

    - SNAPSHOT with the latest snapshot id if the follower's log is empty while a snapshot exists
      (cheaper than replaying the log), or its position is below the log start, or at the log start
      with another epoch than the snapshot there, or its epoch is older than that snapshot's;
    - DIVERGING with (end offset, epoch) of the largest epoch <= ``last_fetched_epoch`` in the
      leader's log if that epoch is not in the log or ends before ``fetch_offset``;
    - VALID otherwise: the follower's log is a prefix of the leader's.
    """
    latest = log.latest_snapshot_id()
    if fetch_offset == 0 and latest is not None and latest.offset > 0:
        return ValidOffsetAndEpoch(ValidKind.SNAPSHOT, latest)
    start = log.start_offset
    if start == 0 and fetch_offset == 0:
        return ValidOffsetAndEpoch(ValidKind.VALID, OffsetAndEpoch(0, 0))
    earliest = log.earliest_snapshot_id()
    if earliest is not None and start > 0 and (
            fetch_offset < start
            or (fetch_offset == start and last_fetched_epoch != earliest.epoch)
            or last_fetched_epoch < earliest.epoch):
        return ValidOffsetAndEpoch(ValidKind.SNAPSHOT, latest)
    end = log.end_offset_for_epoch(last_fetched_epoch)
    if end.epoch != last_fetched_epoch or end.offset < fetch_offset:
        return ValidOffsetAndEpoch(ValidKind.DIVERGING, end)
    return ValidOffsetAndEpoch(ValidKind.VALID, OffsetAndEpoch(fetch_offset, last_fetched_epoch))


def snapshot_id_at(log: RaftLog, end_offset: int) -> SnapshotId:
    """The id of a snapshot ending at ``end_offset``: its epoch is that of record ``end_offset - 1``."""
    if end_offset == 0:
        return SnapshotId(0, 0)
    return SnapshotId(end_offset, log.epoch_for_offset(end_offset - 1))
