"""A consumer's long-poll fetch ends when the high watermark moves, not only on an append.

On a replicated partition an append is readable by consumers only once the ISR has it (the HW
passed it). A consumer fetch parked at the HW while the leader's log end offset is ahead must be
answered when the followers catch up, even if nothing else is appended: before this was fixed the
fetch counted appended bytes only, missed the HW advance and answered at ``max_wait_ms`` — the
half-second stalls measured on a 3-node cluster at the default ``fetch.wait.max.ms`` of 500 ms.

The test makes the order deterministic: the follower's replication link is cut (tests/support
link proxies) while a record is appended with acks=1, so the HW cannot pass it; a consumer fetch
with a long ``max_wait_ms`` parks; then the link heals, the follower fetches the record, the HW
advances and the parked fetch must answer with the record. No further append happens, so only
the HW advance can end the wait. The bounds below are liveness bounds far below ``max_wait_ms``
(never a speed assertion): a missed wake-up answers only after the full minute.
"""

from __future__ import annotations

import socket

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.records import build_batch, iter_batches, iter_records
from tests.robustness.util import produce
from kcompat.testing import wire
from tests.support.cluster import ProxiedCluster, wait_until
from tests.support.link_proxy import CUT
from tests.support.replication_load import in_sync, partition_states

FETCH_V = 12
PARKED_WAIT_MS = 60_000     # far beyond the bounds below: a missed wake-up cannot pass
ANSWER_BOUND_S = 20         # liveness bound for the answer after the HW moved
RETRIABLE = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ProxiedCluster(tmp_path_factory.mktemp("fetch-wakeups"))
    try:
        c.start()
        yield c
    finally:
        c.close()


def addr(cluster, node: int) -> str:
    return f"127.0.0.1:{cluster.client_ports[node - 1]}"


def replicated_topic(cluster, topic: str, configs: dict | None = None) -> tuple[int, int]:
    """Create ``topic`` (1 partition, replication factor 2); returns (leader, follower) once every
    node shows both in the ISR."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 2, config=configs or {})], operation_timeout=20)[topic].result(30)
    wait_until(lambda: in_sync(cluster, topic, [0]), 30, f"{topic} with both replicas in sync everywhere")
    s = partition_states(addr(cluster, 1), topic)[0]
    return s.leader, next(r for r in s.replicas if r != s.leader)


def produce_to_leader(cluster, leader: int, topic: str, value: bytes):
    """Produce ``value`` with acks=1, retrying what a client retries while the leader applies the
    metadata that made it leader (its Metadata answer can come first)."""
    def attempt():
        resp = produce(addr(cluster, leader), topic, 0, build_batch([(0, b"k", value, ())]), acks=1)
        return None if resp.error_code in RETRIABLE else resp
    return wait_until(attempt, 30, f"a produce to {topic} on its leader {leader}")


def send_fetch(sock: socket.socket, topic: str, offset: int, isolation: int = 0) -> None:
    F = FetchRequest
    wire.send_request(sock, F(replica_id=-1, max_wait_ms=PARKED_WAIT_MS, min_bytes=1, max_bytes=1 << 20,
                              isolation_level=isolation, session_id=0, session_epoch=-1, topics=[
                                  F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                                      partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                                      partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""), FETCH_V)


def parked(sock: socket.socket, seconds: float = 1.0) -> bool:
    """Nothing came back on ``sock`` within ``seconds``: the fetch is waiting."""
    sock.settimeout(seconds)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except socket.timeout:
        return True
    return False


def values(resp) -> list[bytes]:
    pd = resp.responses[0].partitions[0]
    assert pd.error_code == ErrorCode.NONE, pd
    data = bytes(pd.records or b"")
    return [r.value for pos, h in iter_batches(data) for r in iter_records(data[pos:pos + h.size])]


def parked_fetch_after_heal(cluster, topic: str, value: bytes, isolation: int):
    """Append ``value`` with acks=1 while the follower's replication link is cut, park a consumer
    fetch at offset 0 on the leader, heal the link; the fetch's answer (the HW advance must end it)."""
    leader, follower = replicated_topic(cluster, topic)
    cluster.mesh.set(CUT, src=follower, dst=leader, kinds=["replication"])
    try:
        resp = produce_to_leader(cluster, leader, topic, value)
        assert resp.error_code == ErrorCode.NONE and resp.base_offset == 0
        with wire.connect(addr(cluster, leader), timeout=ANSWER_BOUND_S) as sock:
            send_fetch(sock, topic, 0, isolation)
            assert parked(sock), "the fetch answered although the record is not replicated (HW 0)"
            cluster.mesh.heal()
            sock.settimeout(ANSWER_BOUND_S)
            return wire.read_response(sock, 1, FETCH_V)[1]
    finally:
        cluster.mesh.heal()


def test_parked_consumer_fetch_answers_when_the_high_watermark_advances(cluster):
    resp = parked_fetch_after_heal(cluster, "hw-wakeup", b"only-record", isolation=0)
    assert values(resp) == [b"only-record"]
    assert resp.responses[0].partitions[0].high_watermark == 1


def test_parked_read_committed_fetch_answers_when_the_high_watermark_advances(cluster):
    """read_committed reads below the LSO, which here follows the HW (no open transaction)."""
    resp = parked_fetch_after_heal(cluster, "lso-wakeup", b"committed", isolation=1)
    assert values(resp) == [b"committed"]
    assert resp.responses[0].partitions[0].last_stable_offset == 1
