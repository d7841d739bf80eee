"""Incremental fetch sessions (KIP-227) on the wire, against a real broker: Fetch requests written
with kcompat's codecs over a socket, checked against what Kafka's ``FetchManager`` /
``FetchSession.scala`` answer.

A full fetch with epoch 0 creates a session (its id in the response); incremental fetches
(epoch 1, 2, ...) read every partition of the session but answer only those that changed
(records, high watermark, log start offset, errors); partitions that returned records move to the
end of the session's order; forgotten partitions leave the session; a wrong epoch or an unknown
id is a top-level error with no partitions; epoch -1 closes the session; with
``max.incremental.fetch.session.cache.slots`` = 0 or a full cache no session is created."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest
from kcompat.protocol.messages.fetch import FetchRequest as F
from kcompat.testing import wire
from tests.quotas.support import set_quota
from tests.support.broker_process import BrokerProcess
from tests.support.wire_helpers import broker_with_metrics, produce_batch, scrape

ZERO_UUID = uuid.UUID(int=0)
V = 16          # topic ids
V_NAMES = 12    # topic names


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with broker_with_metrics(tmp_path_factory.mktemp("fetch-sessions") / "data") as b:
        yield b


def metrics(b) -> dict[str, float]:
    return scrape(b, "kafka_server_fetchsessioncache_")


def create(bootstrap: str, topic: str, partitions: int) -> uuid.UUID:
    resp = wire.call(bootstrap, CreateTopicsRequest(timeout_ms=10000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1)]), 7)
    assert resp.topics[0].error_code == 0
    return resp.topics[0].topic_id


def produce(bootstrap: str, topic: str, partition: int, n: int = 1, size: int = 100) -> int:
    batch = rb.build_batch([(int(time.time() * 1000), None, bytes([65 + partition]) * size, ()) for _ in range(n)])
    return produce_batch(bootstrap, topic, partition, batch)


class Session:
    """One fetcher's view of a session over one connection: ``fetch`` sends a request with the
    given metadata and partitions ``{partition: fetch offset}`` of one topic; returns the
    response and ``{partition: PartitionData}``."""

    def __init__(self, bootstrap: str, topic: str, topic_id: uuid.UUID, version: int = V,
                 client_id: str = "kcompat-testing") -> None:
        self.sock = wire.connect(bootstrap, timeout=60)
        self.topic, self.topic_id, self.version, self.client_id = topic, topic_id, version, client_id
        self.correlation = 0

    def _topic(self, cls, partitions):
        if self.version >= 13:
            return cls(topic_id=self.topic_id, partitions=partitions)
        return cls(topic=self.topic, partitions=partitions)

    def fetch(self, session_id: int, epoch: int, offsets: dict[int, int] | None = None, forget=(),
              max_wait_ms: int = 0, max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20):
        parts = [F.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes)
                 for p, o in (offsets or {}).items()]
        req = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                session_id=session_id, session_epoch=epoch, topics=[self._topic(F.FetchTopic, parts)] if parts else [],
                forgotten_topics_data=[self._topic(F.ForgottenTopic, list(forget))] if forget else [], rack_id="")
        self.correlation += 1
        wire.send_request(self.sock, req, self.version, self.correlation, client_id=self.client_id)
        cid, resp = wire.read_response(self.sock, 1, self.version)
        assert cid == self.correlation
        got = {}
        for t in resp.responses:
            assert (t.topic_id, t.topic) == ((self.topic_id, "") if self.version >= 13 else (ZERO_UUID, self.topic))
            for p in t.partitions:
                got[p.partition_index] = p
        return resp, got

    def close(self) -> None:
        self.sock.close()


def open_session(bootstrap: str, topic, offsets: dict[int, int], **kwargs) -> tuple[Session, int]:
    """A :class:`Session` of ``topic`` ``(name, id)`` whose full fetch (epoch 0) of ``offsets``
    created a session: (it, the session id)."""
    s = Session(bootstrap, *topic, **kwargs)
    resp, _ = s.fetch(0, 0, offsets)
    assert resp.error_code == 0 and resp.session_id != 0
    return s, resp.session_id


def records_of(p) -> list[bytes]:
    buf = bytes(p.records or b"")
    return [r.value for pos, h in rb.iter_batches(buf) for r in rb.iter_records(buf[pos:pos + h.size])]


@pytest.fixture
def topic(broker, request):
    name = "fs-" + request.node.name[-40:].replace("[", "-").replace("]", "")
    return name, create(broker.bootstrap, name, 3)


def test_a_session_answers_only_the_partitions_that_changed(broker, topic):
    name, tid = topic
    s = Session(broker.bootstrap, name, tid)
    before = metrics(broker)
    resp, got = s.fetch(0, 0, {0: 0, 1: 0, 2: 0})
    assert resp.error_code == 0 and resp.session_id != 0
    assert sorted(got) == [0, 1, 2] and all(p.high_watermark == 0 for p in got.values())
    sid = resp.session_id
    after = metrics(broker)
    assert after["kafka_server_fetchsessioncache_numincrementalfetchsessions"] == \
        before["kafka_server_fetchsessioncache_numincrementalfetchsessions"] + 1
    assert after["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"] == \
        before["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"] + 3

    resp, got = s.fetch(sid, 1)            # nothing changed: no partitions
    assert (resp.error_code, resp.session_id, got) == (0, sid, {})

    produce(broker.bootstrap, name, 1, n=2)
    resp, got = s.fetch(sid, 2)            # the session's fetch offsets (0) are kept
    assert (resp.error_code, resp.session_id, sorted(got)) == (0, sid, [1])
    assert got[1].high_watermark == 2 and len(records_of(got[1])) == 2

    resp, got = s.fetch(sid, 3, {1: 2})    # the fetcher moved on: nothing new
    assert (resp.error_code, got) == (0, {})

    produce(broker.bootstrap, name, 0)
    resp, got = s.fetch(sid, 4)
    assert sorted(got) == [0] and records_of(got[0]) and got[0].high_watermark == 1
    resp, got = s.fetch(sid, 5, {0: 1})
    assert got == {}
    s.close()


def test_a_changed_high_watermark_or_log_start_alone_is_sent_and_data_rotates(broker, topic):
    """Partitions fill the byte budget in session order; one that got nothing but whose high
    watermark moved is sent with no records; partitions that returned records go last."""
    name, tid = topic
    s, sid = open_session(broker.bootstrap, topic, {0: 0, 1: 0, 2: 0})
    produce(broker.bootstrap, name, 0, size=2000)
    produce(broker.bootstrap, name, 1, size=2000)
    resp, got = s.fetch(sid, 1, max_bytes=1)   # the first batch comes whole (KIP-74), nothing more fits
    assert sorted(got) == [0, 1]
    assert records_of(got[0]) and records_of(got[1]) == [] and got[1].high_watermark == 1
    # partition 0 returned records: the order is now 1, 2, 0 and partition 1 is read first
    resp, got = s.fetch(sid, 2, {0: 1}, max_bytes=1)
    assert sorted(got) == [1] and records_of(got[1])
    resp, got = s.fetch(sid, 3, {1: 1})
    assert got == {}

    deleted = wire.call(broker.bootstrap, DeleteRecordsRequest(timeout_ms=5000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=1)])]), 2)
    assert deleted.topics[0].partitions[0].error_code == 0
    resp, got = s.fetch(sid, 4)
    assert sorted(got) == [0] and got[0].log_start_offset == 1 and records_of(got[0]) == []
    s.close()


def test_forgotten_partitions_leave_the_session_and_new_ones_join(broker, topic):
    name, tid = topic
    s, sid = open_session(broker.bootstrap, topic, {0: 0, 1: 0})
    resp, got = s.fetch(sid, 1, {2: 0}, forget=[1])
    assert (resp.error_code, sorted(got)) == (0, [2])   # a partition joining is sent (nothing cached yet)
    produce(broker.bootstrap, name, 1)
    produce(broker.bootstrap, name, 2)
    resp, got = s.fetch(sid, 2)
    assert sorted(got) == [2]
    resp, got = s.fetch(sid, 3, forget=[0, 2])          # nothing left: the session is closed
    assert (resp.error_code, resp.session_id, got) == (0, 0, {})
    resp, got = s.fetch(sid, 4)
    assert (resp.error_code, got) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, {})
    s.close()


def test_session_errors_are_top_level_with_no_partitions(broker, topic):
    name, tid = topic
    s, sid = open_session(broker.bootstrap, topic, {0: 0, 1: 0})
    for epoch in (2, 7, -2):
        resp, got = s.fetch(sid, epoch, {0: 0})
        assert (resp.error_code, resp.session_id, got) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, {})
    resp, got = s.fetch(sid + 1 if sid < 2**31 - 1 else 1, 1, {0: 0})
    assert (resp.error_code, resp.session_id, got) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, {})
    resp, got = s.fetch(0, 1, {0: 0})    # no session named, not a full fetch
    assert (resp.error_code, got) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, {})
    resp, got = s.fetch(sid, 1)          # the errors did not move the session on
    assert (resp.error_code, resp.session_id) == (0, sid)
    # the other side of v13: topic names cannot continue a session keyed by topic ids
    named = Session(broker.bootstrap, name, tid, V_NAMES)
    resp, got = named.fetch(sid, 2)
    assert (resp.error_code, got) == (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, {})
    named.close()
    s.close()


def test_epoch_minus_one_closes_and_epoch_zero_replaces(broker, topic):
    name, tid = topic
    s = Session(broker.bootstrap, name, tid)
    produce(broker.bootstrap, name, 0)
    resp, _ = s.fetch(0, 0, {0: 0, 1: 0})
    first = resp.session_id
    resp, got = s.fetch(first, 0, {0: 0, 2: 0})        # close it, open another: a full fetch
    second = resp.session_id
    assert resp.error_code == 0 and second not in (0, first) and sorted(got) == [0, 2] and records_of(got[0])
    resp, got = s.fetch(first, 1)
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    resp, got = s.fetch(second, -1, {0: 0, 1: 0})      # close it: a sessionless full fetch
    assert (resp.error_code, resp.session_id, sorted(got)) == (0, 0, [0, 1])
    resp, got = s.fetch(second, 1)
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    s.close()


def test_sessions_by_topic_name_before_v13(broker, topic):
    name, tid = topic
    s = Session(broker.bootstrap, name, tid, V_NAMES)
    resp, got = s.fetch(0, 0, {0: 0, 1: 0, 2: 0})
    sid = resp.session_id
    assert sid != 0 and sorted(got) == [0, 1, 2]
    produce(broker.bootstrap, name, 2)
    resp, got = s.fetch(sid, 1, forget=[0])
    assert sorted(got) == [2] and records_of(got[2])
    produce(broker.bootstrap, name, 0)
    resp, got = s.fetch(sid, 2, {2: 1})
    assert got == {}
    by_id = Session(broker.bootstrap, name, tid, V)
    resp, got = by_id.fetch(sid, 3)
    assert resp.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    by_id.close()
    s.close()


def test_a_long_poll_with_no_partitions_wakes_for_any_session_partition(broker, topic):
    """The incremental fetch names no partition, yet waits on all of the session's: records
    produced to one of them answer it (long before max_wait_ms, else the socket times out)."""
    name, tid = topic
    s, sid = open_session(broker.bootstrap, topic, {0: 0, 1: 0, 2: 0})
    timer = threading.Timer(0.5, produce, (broker.bootstrap, name, 2))
    timer.start()
    try:
        resp, got = s.fetch(sid, 1, max_wait_ms=300_000)
    finally:
        timer.join()
    assert (resp.error_code, sorted(got)) == (0, [2]) and records_of(got[2])
    s.close()


def test_a_sessionless_fetch_is_unchanged(broker, topic):
    name, tid = topic
    produce(broker.bootstrap, name, 1)
    s = Session(broker.bootstrap, name, tid)
    for _ in range(2):
        resp, got = s.fetch(0, -1, {0: 0, 1: 0, 2: 0})
        assert (resp.error_code, resp.session_id, sorted(got)) == (0, 0, [0, 1, 2]) and records_of(got[1])
    s.close()


def test_a_throttled_incremental_fetch_keeps_its_session_unchanged(broker, topic):
    """Over ``consumer_byte_rate`` the answer is empty with the throttle time and the session's id;
    the session is not updated, so the next fetch sends what the throttled one left out (Kafka's
    ``IncrementalFetchContext.getThrottledResponse``)."""
    name, tid = topic
    set_quota(broker.bootstrap, [("client-id", "fs-throttled")], consumer_byte_rate=2000)   # 20000 B per window
    s, sid = open_session(broker.bootstrap, topic, {0: 0, 1: 0}, client_id="fs-throttled")
    produce(broker.bootstrap, name, 0, size=15000)
    resp, got = s.fetch(sid, 1)
    assert (resp.error_code, resp.throttle_time_ms, sorted(got)) == (0, 0, [0])
    produce(broker.bootstrap, name, 1, size=15000)
    resp, got = s.fetch(sid, 2, {0: 1})            # 30000 B in the window: over the quota
    assert (resp.error_code, resp.session_id, got) == (0, sid, {}) and resp.throttle_time_ms > 0
    epoch = 3
    deadline = time.monotonic() + 60    # the rate falls back once the window's samples expire (11 s)
    while resp.throttle_time_ms > 0 and time.monotonic() < deadline:
        time.sleep(resp.throttle_time_ms / 1000)
        resp, got = s.fetch(sid, epoch)  # throttled again: still the session, still nothing sent
        assert (resp.error_code, resp.session_id) == (0, sid) and (got == {} or resp.throttle_time_ms == 0)
        epoch += 1
    assert (resp.throttle_time_ms, sorted(got)) == (0, [1])
    assert got[1].high_watermark == 1 and records_of(got[1])
    s.close()


def _small_broker(tmp_path, slots: int) -> BrokerProcess:
    return BrokerProcess(tmp_path / "data", {"max.incremental.fetch.session.cache.slots": str(slots)})


def test_no_sessions_with_zero_slots(tmp_path):
    with _small_broker(tmp_path, 0) as b:
        tid = create(b.bootstrap, "zero-slots", 2)
        s = Session(b.bootstrap, "zero-slots", tid)
        for _ in range(3):
            resp, got = s.fetch(0, 0, {0: 0, 1: 0})
            assert (resp.error_code, resp.session_id, sorted(got)) == (0, 0, [0, 1])
        resp, got = s.fetch(12345, 1)
        assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        s.close()


def test_a_full_cache_answers_without_a_session(tmp_path):
    """One slot, taken by a recent session of the same size: a consumer's new session may not
    evict it (Kafka's tryEvict), so its full fetch is answered with session id 0."""
    with _small_broker(tmp_path, 1) as b:
        tid = create(b.bootstrap, "one-slot", 2)
        first, other = Session(b.bootstrap, "one-slot", tid), Session(b.bootstrap, "one-slot", tid)
        resp, _ = first.fetch(0, 0, {0: 0, 1: 0})
        sid = resp.session_id
        assert sid != 0
        resp, got = other.fetch(0, 0, {0: 0, 1: 0})
        assert (resp.error_code, resp.session_id, sorted(got)) == (0, 0, [0, 1])
        resp, got = first.fetch(sid, 1)
        assert (resp.error_code, resp.session_id) == (0, sid)
        resp, got = first.fetch(sid, -1, {0: 0})     # closed: the slot is free again
        resp, got = other.fetch(0, 0, {0: 0, 1: 0})
        assert resp.session_id != 0
        first.close()
        other.close()
