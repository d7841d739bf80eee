"""A broker data directory holding every kind of file kcompat reads at start-up, built with the
real storage code, and the start-up sequence of a broker's storage run in this process (for the
table-driven corruption tests, tests/log/test_corruption.py).

:func:`build` writes, in ``<root>/data``: ``meta.properties``; the four top-level offset
checkpoints; a partition ``t-0`` with several segments (``.log``, ``.index``, ``.timeindex``),
plain, idempotent and transactional batches in two leader epochs, an aborted transaction (so a
``.txnindex``), producer snapshots (``.snapshot``), ``leader-epoch-checkpoint``,
``partition.metadata`` and a log start offset moved by DeleteRecords; and ``__cluster_metadata-0``
with metadata records in three epochs over several segments, a metadata snapshot
(``.checkpoint``) and ``quorum-state``. It ends with a clean shutdown.

:func:`start_up` runs what a broker's start does with those files - ``LogManager.startup``, the
partition's producer-state load (:class:`kcompat.isr.partition.Partition`), the metadata log
(``DiskRaftLog`` with snapshot checks) and ``quorum-state`` - then reads everything back as
clients and the metadata loader would: every batch of ``t-0`` through ``Log.read``, the aborted
transactions, timestamp lookups, the producer state, the metadata snapshot's and log's records.
A refusal propagates as LogDirError, as it ends a broker's start-up.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kcompat.broker.metadata_loader import snapshot_bytes, snapshot_records
from kcompat.broker.quorum import QuorumRuntime
from kcompat.isr.partition import Partition
from kcompat.kraft.disk_log import DiskRaftLog
from kcompat.kraft.metadata_log import decode_record, encode_record
from kcompat.kraft.raft.store import ElectionState, FileQuorumStateStore
from kcompat.kraft.raft.types import SnapshotId
from kcompat.log import CorruptLogError, LogConfig, LogManager, read_meta_properties, write_offset_checkpoint
from kcompat.protocol import records as rb
from kcompat.protocol.metadata_records import FeatureLevelRecord, PartitionRecord, TopicRecord

NOW = 1_700_000_000_000
CLUSTER = "golden-cluster-0000000"
NODE = 1
TOPIC_ID = uuid.UUID("3b1f9c2e-5d4a-4e6f-9a7b-0c1d2e3f4a5b")
CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=200)
METADATA_SEGMENT_BYTES = 700
TIMESTAMP_PROBES = (NOW - 10**9, NOW + 31, NOW + 57, NOW + 64, NOW + 82, NOW + 101, NOW + 10**9)


def _batch(base_ts: int, n: int, tag: bytes, **kw) -> memoryview:
    recs = [(base_ts + i, b"%s-k%d" % (tag, i), b"%s-value-%d-" % (tag, i) * 3, ()) for i in range(n)]
    return memoryview(bytearray(rb.build_batch(recs, **kw)))


def _metadata_batch(records: list) -> bytes:
    return rb.build_batch([(NOW, None, encode_record(r), ()) for r in records])


def _metadata_records(i: int) -> list:
    topic_id = uuid.UUID(int=1000 + i)
    return [TopicRecord(name=f"topic-{i}", topic_id=topic_id),
            PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[NODE], isr=[NODE], leader=NODE,
                            leader_epoch=0, partition_epoch=0)]


def build(root: Path) -> Path:
    """Write the golden data directory under ``root``; returns it (``root/data``)."""
    data = root / "data"
    m = LogManager([data], lambda _topic: CONFIG)
    m.startup(NOW, CLUSTER, NODE)
    p = Partition("t", 0, TOPIC_ID, m.create("t", 0, CONFIG, TOPIC_ID, NOW), leader_epoch=0)
    p.txn_verifier = lambda *_args: 0
    ts = NOW
    for i in range(8):                                              # epoch 0: plain and idempotent
        p.append(_batch(ts, 2, b"plain%d" % i), ts)
        p.append(_batch(ts + 1, 3, b"idem%d" % i, producer_id=5, producer_epoch=0, base_sequence=3 * i), ts)
        ts += 7
    p.leader_epoch = 2                                              # epoch 2: transactions
    p.append(_batch(ts, 2, b"txa", producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
             ts, "txn-a")
    p.append(_batch(ts, 2, b"txb", producer_id=8, producer_epoch=0, base_sequence=0, transactional=True),
             ts, "txn-b")
    p.append(_batch(ts, 1, b"mid"), ts)
    p.append_marker(7, 0, 0, False, ts)                            # abort txn-a: a .txnindex entry
    p.append_marker(8, 0, 0, True, ts)                             # commit txn-b
    for i in range(10):
        ts += 5
        p.append(_batch(ts, 2, b"late%d" % i), ts)
        p.append(_batch(ts, 2, b"lidem%d" % i, producer_id=5, producer_epoch=0, base_sequence=24 + 2 * i), ts)
    p.delete_records(p.log.segments[1].base_offset + 1)            # a log start offset inside a segment
    p.write_snapshot()
    m.write_high_watermarks({("t", 0): p.high_watermark})
    write_offset_checkpoint(data / "cleaner-offset-checkpoint", {("t", 0): p.log.segments[2].base_offset})
    m.shutdown()

    md = DiskRaftLog(data / "__cluster_metadata-0", NOW, segment_bytes=METADATA_SEGMENT_BYTES)
    applied = [FeatureLevelRecord(name="metadata.version", feature_level=21)]
    md.append_as_leader(_metadata_batch(applied), 1)
    for i in range(12):
        recs = _metadata_records(i)
        md.append_as_leader(_metadata_batch(recs), 1 + i // 5)
        if i < 6:
            applied += recs
        if i == 5:                                                  # a snapshot of what came before
            md.update_high_watermark(md.end_offset)
            sid = SnapshotId(md.end_offset, md.epoch_for_offset(md.end_offset - 1))
            md.create_snapshot(sid, snapshot_bytes(applied, NOW))
            md.delete_before_snapshot(sid)
    md.flush()
    md.close()
    FileQuorumStateStore(data / "__cluster_metadata-0" / "quorum-state").write(
        ElectionState(epoch=3, leader_id=NODE, voters=frozenset({NODE})))
    return data


@dataclass
class Outcome:
    """What a start-up over a data directory serves."""

    log_start: int
    log_end: int
    batches: dict[int, bytes] = field(default_factory=dict)       # base offset -> bytes served
    refused: list[int] = field(default_factory=list)               # offsets whose read was refused
    producers: dict = field(default_factory=dict)
    aborted: list = field(default_factory=list)
    epochs: list = field(default_factory=list)
    by_timestamp: list = field(default_factory=list)
    topic_id: uuid.UUID | None = None
    snapshot_records: list[bytes] = field(default_factory=list)
    metadata_records: list[bytes] = field(default_factory=list)


def start_up(data: Path) -> Outcome:
    """Run the storage part of a broker's start-up over ``data`` and read everything back.
    Raises LogDirError when start-up refuses (nothing else may escape)."""
    props = read_meta_properties(data / "meta.properties") or {}
    cluster = props.get("cluster.id") or "a-new-cluster-id"        # as Broker._find_cluster_id
    QuorumRuntime.check_storage(data)                             # as Broker.start, in its order
    m = LogManager([data], lambda _topic: CONFIG)
    m.startup(NOW, cluster, NODE)
    md = None
    try:
        md = DiskRaftLog(data / "__cluster_metadata-0", NOW, segment_bytes=METADATA_SEGMENT_BYTES,
                         check_snapshots=True)
        FileQuorumStateStore(data / "__cluster_metadata-0" / "quorum-state").read()
        log = m.get("t", 0)
        p = Partition("t", 0, m.topic_id_of("t", 0), log, leader_epoch=2,
                      high_watermark=m.high_watermarks.get(("t", 0)))
        out = Outcome(log.log_start_offset, log.log_end_offset, topic_id=m.topic_id_of("t", 0))
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            try:
                data_read = log.read(offset, 1 << 16)
            except CorruptLogError:
                out.refused.append(offset)
                offset += 1
                continue
            assert data_read, f"an empty read at {offset} below the log end {log.log_end_offset}"
            for pos, h in rb.iter_batches(data_read):
                assert rb.crc_valid(data_read, pos, h), f"served a batch with a bad CRC at offset {h.base_offset}"
                out.batches[h.base_offset] = bytes(data_read[pos:pos + h.size])
                offset = h.next_offset
        out.producers = {pid: (e.producer_epoch, e.last_seq, e.batches[-1].last_offset if e.batches else -1,
                               e.current_txn_first_offset) for pid, e in p.producer_state.producers.items()}
        out.aborted = log.collect_aborted_txns(log.log_start_offset, log.log_end_offset)
        out.epochs = log.leader_epoch_cache.entries
        for t in TIMESTAMP_PROBES:
            try:
                out.by_timestamp.append(log.offset_for_timestamp(t))
            except CorruptLogError:                                 # the batch to decode is damaged
                out.by_timestamp.append("refused")
        snap = md.latest_snapshot_id()
        if snap is not None:
            out.snapshot_records = [encode_record(r) for r in snapshot_records(md.read_snapshot(snap))]
        offset = md.start_offset
        while offset < md.end_offset:
            chunk = md.read(offset, 1 << 16)
            for pos, h in rb.iter_batches(chunk):
                for rec in rb.iter_records(memoryview(chunk)[pos:pos + h.size]):
                    out.metadata_records.append(encode_record(decode_record(rec.value)))
                offset = h.next_offset
        return out
    finally:   # inspect only: close without writing anything
        for lg in m.logs.values():
            lg.close_without_flush()
        if md is not None:
            md._log.close_without_flush()
