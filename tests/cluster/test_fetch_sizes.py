"""A consumer reading records already below the high watermark of a replicated partition gets, on
every fetch, at once, as many whole batches as ``partition_max_bytes`` allows from one segment.

Issue 25 item 3 asked why a consumer of records already there waited on a 3-node cluster: fetch
responses smaller than Kafka's, fetches parking although data was there, one-segment reads. This
pins what the leader returns (Kafka ``LogSegment.read`` under ``ReplicaManager.readFromLog``, KIP-74):
from the batch holding the fetch offset, consecutive whole batches of that segment while they fit
in ``partition_max_bytes`` (at least one), and nothing parks while data is readable: each fetch
carries ``max_wait_ms`` of a minute and must be answered within a liveness bound far below it.
Kafka may also append the first bytes of the next batch, which clients drop; kcompat sends whole
batches only. The expected bytes come from the leader's segment files, so batch sizes and segment
boundaries are exact.
"""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.records import iter_batches
from tests.robustness.util import batch, produce
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until
from tests.support.replication_load import partition_states

FETCH_V = 12
PARKED_WAIT_MS = 60_000     # a fetch that parks although data is there answers only after this
ANSWER_BOUND_S = 20         # liveness bound for an answer to a fetch whose data is there
LIMIT = 20_000              # partition_max_bytes: several of the batches below fit, never all
SEGMENT_BYTES = 65_536      # a few segments, so reads meet segment ends
BATCHES = 90


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("fetch-sizes"), 3, {"min.insync.replicas": "2"})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def fetch(sock: socket.socket, topic: str, offset: int, correlation_id: int):
    F = FetchRequest
    wire.send_request(sock, F(replica_id=-1, max_wait_ms=PARKED_WAIT_MS, min_bytes=1, max_bytes=50 << 20,
                              isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                  F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                                      partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                                      partition_max_bytes=LIMIT)])], forgotten_topics_data=[], rack_id=""),
                      FETCH_V, correlation_id)
    corr, resp = wire.read_response(sock, 1, FETCH_V)
    assert corr == correlation_id
    return resp.responses[0].partitions[0]


def segment_batches(log_dir) -> list[tuple[int, int, int, bytes]]:
    """Every batch of the partition's segment files: (segment index, base offset, last offset, bytes)."""
    out = []
    for i, path in enumerate(sorted(log_dir.glob("*.log"))):
        data = path.read_bytes()
        for pos, h in iter_batches(data):
            out.append((i, h.base_offset, h.last_offset, data[pos:pos + h.size]))
    return out


def expected_read(batches, offset: int) -> bytes:
    """What Kafka's leader reads at ``offset``: from the batch holding it, consecutive whole
    batches of the same segment within LIMIT bytes, at least one."""
    start = next(i for i, b in enumerate(batches) if b[2] >= offset)
    seg, out = batches[start][0], batches[start][3]
    for s, _base, _last, data in batches[start + 1:]:
        if s != seg or len(out) + len(data) > LIMIT:
            break
        out += data
    return out


def test_reads_below_the_high_watermark_answer_at_once_with_every_whole_batch_that_fits(cluster):
    topic = "sizes"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"internal.segment.bytes": str(SEGMENT_BYTES)})],
                        operation_timeout=20)[topic].result(30)
    bootstrap = f"127.0.0.1:{cluster.client_ports[0]}"

    def in_sync():
        s = partition_states(bootstrap, topic).get(0)
        return s.leader if s and s.leader > 0 and len(s.isr) == 3 else None
    leader = wait_until(in_sync, 30, f"{topic} led with all three replicas in sync")
    leader_addr = f"127.0.0.1:{cluster.client_ports[leader - 1]}"

    # batches of 1 to 7 records of 1,000 bytes (~1.1 to ~7.1 kB): several fit in LIMIT, in
    # varying numbers, and segments end at varying batches
    total = 0
    for i in range(BATCHES):
        n = i % 7 + 1
        res = produce(leader_addr, topic, 0, batch([struct.pack(">I", total + k) * 250 for k in range(n)]))
        assert res.error_code == ErrorCode.NONE, res
        total += n

    batches = segment_batches(cluster.node(leader).data_dir / f"{topic}-0")
    assert batches[-1][2] == total - 1 and len({b[0] for b in batches}) > 2
    with wire.connect(leader_addr, timeout=ANSWER_BOUND_S) as sock:
        # every batch start, and one offset inside every batch of more than one record
        offsets = sorted({b[1] for b in batches} | {b[1] + 1 for b in batches if b[2] > b[1]})
        for corr, offset in enumerate(offsets, 1):
            pd = fetch(sock, topic, offset, corr)
            assert pd.error_code == ErrorCode.NONE, (offset, pd)
            assert pd.high_watermark == total, (offset, pd.high_watermark)   # acks=all: all replicated
            got = bytes(pd.records or b"")
            want = expected_read(batches, offset)
            assert got == want, (f"fetch at {offset}: {len(got)} bytes in "
                                 f"{sum(1 for _ in iter_batches(got))} batches, expected {len(want)} bytes in "
                                 f"{sum(1 for _ in iter_batches(want))}")
