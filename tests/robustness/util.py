"""Raw-protocol helpers shared by the robustness tests (built on kcompat/testing/wire.py)."""

from __future__ import annotations

import random
import socket
import struct
import time
from pathlib import Path

from kcompat.protocol.messages import api_classes
from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.headers import RequestHeader
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.protocol.records import build_batch, iter_batches, iter_records
from kcompat.testing import wire

FETCH_V = 12        # flexible, topics by name
PRODUCE_V = 9
NOW_MS = lambda: int(time.time() * 1000)  # noqa: E731
IO_TIMEOUT = 3.0    # seconds a bad frame may take to be answered or closed


def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                 replication_factor: int = 1) -> None:
    C = CreateTopicsRequest
    req = C(topics=[C.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=10000)
    resp = wire.call(bootstrap, req, 7)
    assert resp.topics[0].error_code == 0, resp


def init_producer_id(bootstrap: str, version: int = 4) -> tuple[int, int]:
    resp = wire.call(bootstrap, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), version)
    assert resp.error_code == 0, resp
    return resp.producer_id, resp.producer_epoch


def produce_request(topic: str, partition: int, records, acks: int = -1) -> ProduceRequest:
    P = ProduceRequest
    return P(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=records)])])


def produce(bootstrap_or_sock, topic: str, partition: int, records, *, acks: int = -1,
            version: int = PRODUCE_V, correlation_id: int = 1):
    """Produce raw record bytes; returns the PartitionProduceResponse."""
    req = produce_request(topic, partition, records, acks)
    if isinstance(bootstrap_or_sock, str):
        resp = wire.call(bootstrap_or_sock, req, version)
    else:
        wire.send_request(bootstrap_or_sock, req, version, correlation_id)
        _corr, resp = wire.read_response(bootstrap_or_sock, 0, version)
    return resp.responses[0].partition_responses[0]


def batch(values, *, producer_id: int = -1, epoch: int = -1, seq: int = -1, ts: int | None = None,
          key: bytes | None = None, codec: int = 0) -> bytes:
    ts = NOW_MS() if ts is None else ts
    return build_batch([(ts, key, v, ()) for v in values], producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=seq, codec=codec)


def fetch_request(topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 0,
                  max_bytes: int = 1 << 20) -> FetchRequest:
    F = FetchRequest
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                 F.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])


def fetch(bootstrap: str, topic: str, partition: int, offset: int, **kw):
    """One Fetch; returns the PartitionData (error_code, high_watermark, records, ...)."""
    resp = wire.call(bootstrap, fetch_request(topic, partition, offset, **kw), FETCH_V)
    assert resp.error_code == 0, resp
    return resp.responses[0].partitions[0]


def read_batches(bootstrap: str, topic: str, partition: int, start: int = 0) -> list[bytes]:
    """Every stored batch of a partition from ``start`` up to the high watermark, as raw bytes,
    read with plain Fetch requests straight from the broker."""
    out: list[bytes] = []
    offset = start
    with wire.connect(bootstrap) as sock:
        corr = 0
        while True:
            corr += 1
            wire.send_request(sock, fetch_request(topic, partition, offset), FETCH_V, corr)
            _c, resp = wire.read_response(sock, 1, FETCH_V)
            pd = resp.responses[0].partitions[0]
            assert pd.error_code == 0, pd
            data = bytes(pd.records or b"")
            if offset >= pd.high_watermark or not data:
                assert offset >= pd.high_watermark, f"no data below the high watermark at {offset}"
                return out
            before = offset
            for pos, h in iter_batches(data):
                if h.next_offset <= offset:
                    continue
                out.append(data[pos:pos + h.size])
                offset = h.next_offset
            assert offset > before, f"fetch at {before} made no progress"


def snapshot(bootstrap: str, data_dirs, topic: str, partitions: int) -> tuple[dict[int, list[bytes]], dict[str, bytes]]:
    """What must not change: every batch of ``topic`` as Fetch serves it (per partition), and the
    bytes of its segment files in each of ``data_dirs`` (``"<dir #>/<partition>/<file>"``)."""
    fetched = {p: read_batches(bootstrap, topic, p) for p in range(partitions)}
    return fetched, segment_files(data_dirs, topic, partitions)


def segment_files(data_dirs, topic: str, partitions: int) -> dict[str, bytes]:
    """``{"<dir #>/<partition>/<file>": bytes}`` of the ``.log`` files of ``topic``."""
    files = {}
    for i, d in enumerate(data_dirs):
        for p in range(partitions):
            for f in sorted(Path(d, f"{topic}-{p}").glob("*.log")):
                files[f"{i}/{p}/{f.name}"] = f.read_bytes()
    return files


def read_records(bootstrap: str, topic: str, partition: int, start: int = 0):
    """(offset, key, value) of every record at or after ``start``."""
    recs = []
    for b in read_batches(bootstrap, topic, partition, start):
        recs += [(r.offset, r.key, r.value) for r in iter_records(b) if r.offset >= start]
    return recs


# -- frame building ----------------------------------------------------------------------------------

def header_bytes(api_key: int, version: int, correlation_id: int, client_id: str | None = "fuzz") -> bytes:
    try:
        req_cls, _ = api_classes(api_key)
        flexible = req_cls.FLEXIBLE_MIN is not None and version >= req_cls.FLEXIBLE_MIN
    except KeyError:
        flexible = False
    out = bytearray()
    RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                  client_id=client_id).write(out, 2 if flexible else 1)
    return bytes(out)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def mutate(rng: random.Random, body: bytes) -> bytes:
    """One random change: flipped bytes, a truncation, inserted garbage, a huge or negative int32
    (counts, lengths), or a 5-byte varint (compact counts)."""
    b = bytearray(body)
    kind = rng.randrange(5)
    if kind == 0 and b:                       # flip a few bytes
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1 and b:                     # truncate
        del b[rng.randrange(len(b)):]
    elif kind == 2:                           # insert garbage
        pos = rng.randint(0, len(b))
        b[pos:pos] = rng.randbytes(rng.randint(1, 16))
    elif kind == 3 and len(b) >= 4:           # a huge / negative int32 somewhere (counts, lengths)
        pos = rng.randrange(len(b) - 3)
        b[pos:pos + 4] = struct.pack(">i", rng.choice([0x7FFFFFFF, -2, -0x80000000, 0x10000000, 65535]))
    elif len(b) >= 1:                         # a long varint somewhere (compact counts)
        pos = rng.randrange(len(b))
        b[pos:pos + 1] = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
    return bytes(b)


def encode(req, version: int) -> bytes:
    out = bytearray()
    req.write(out, version)
    return bytes(out)


PROBE_CORRELATION_ID = 0x7EADBEEF
PROBE = frame(header_bytes(18, 0, PROBE_CORRELATION_ID) + b"")  # ApiVersions v0, empty body


# Controller operations run one at a time and answer once their records are applied, so one that
# creates many partitions holds the ones queued behind it (kcompat does not time them out at
# their timeout_ms as Kafka's controller queue does); they get a longer bound.
CONTROLLER_QUEUED = {19, 20, 33, 37, 43, 44}
CONTROLLER_IO_TIMEOUT = 30.0


def io_bound(data: bytes) -> float:
    """Seconds the frames in ``data`` may take to be answered or closed: IO_TIMEOUT, or
    CONTROLLER_IO_TIMEOUT if the first frame is a controller operation."""
    if len(data) >= 6 and struct.unpack_from(">h", data, 4)[0] in CONTROLLER_QUEUED:
        return CONTROLLER_IO_TIMEOUT
    return IO_TIMEOUT


LIVENESS_TIMEOUT = 60.0  # seconds a fresh connection's ApiVersions may take on a starved machine


def send_and_drain(item: tuple[str, bytes, bool], address: tuple[str, int], timeout: float | None = None) -> str:
    """Send the bytes of ``(label, bytes, probe)``; with ``probe`` also an ApiVersions request
    behind them, then read until the broker closes the connection ("closed"), answers the probe
    ("answered"), or ``timeout`` seconds pass ("open"). Without ``probe`` the client closes right
    after sending ("sent": a truncated frame). "refused" if the broker does not accept.
    ``timeout`` defaults to :func:`io_bound`.

    A connection silent past the bound gets a second chance only if the broker answers an
    ApiVersions on a fresh connection meanwhile (:func:`broker_answers`): then the silence was the
    whole process being slow (a starved machine), not this connection hanging; it is "open" if it
    stays silent for the bound again while the broker answers others."""
    _label, data, probe = item
    timeout = io_bound(data) if timeout is None else timeout
    try:
        with socket.create_connection(address, timeout=LIVENESS_TIMEOUT) as sock:
            try:
                sock.sendall(data + (PROBE if probe else b""))
            except (BrokenPipeError, ConnectionResetError):
                return "closed"
            if not probe:
                return "sent"
            buf = bytearray()
            outcome = _drain(sock, buf, timeout)
            if outcome == "open" and broker_answers(address):
                outcome = _drain(sock, buf, timeout)
            return outcome
    except ConnectionRefusedError:
        return "refused"


def _drain(sock: socket.socket, buf: bytearray, timeout: float) -> str:
    """Read until the probe's answer ("answered"), EOF or a reset ("closed"), or ``timeout``
    seconds ("open"); ``buf`` keeps a partial frame across calls."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return "open"
        except ConnectionResetError:
            return "closed"
        if not chunk:
            return "closed"
        buf += chunk
        while len(buf) >= 8:
            size, corr = struct.unpack_from(">ii", buf, 0)
            if len(buf) < 4 + size:
                break
            if corr == PROBE_CORRELATION_ID:
                return "answered"
            del buf[:4 + size]
    return "open"


def broker_answers(address: tuple[str, int], timeout: float = LIVENESS_TIMEOUT) -> bool:
    """The broker answers an ApiVersions request on a new connection within ``timeout`` s."""
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(PROBE)
            return _drain(sock, bytearray(), timeout) == "answered"
    except OSError:
        return False


# -- frames real clients sent (tools/capture_client_frames.py) -----------------------------------------

CAPTURES = Path(__file__).resolve().parent / "data" / "frames"
CLIENT_CAPTURES = ("kafka-python", "confluent-kafka", "kcat", "java")  # and "controller", "replication"
# requests a broker may rightly hold longer than IO_TIMEOUT: group joins wait for the other members
WAITING_APIS = {11, 14}


def read_frames(path: Path) -> list[bytes]:
    """The frames of a ``.frames`` capture, each with its int32 size prefix."""
    data = Path(path).read_bytes()
    out, pos = [], 0
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        out.append(data[pos:pos + 4 + n])
        pos += 4 + n
    return out


def decode_request(payload: bytes):
    """``(header, request)`` of a request frame's payload (header + body) as kcompat's connection
    reads it, or None if it does not decode."""
    if len(payload) < 8:
        return None
    key, version = struct.unpack_from(">hh", payload, 0)
    try:
        req_cls, _ = api_classes(key)
        if not req_cls.VALID_VERSIONS[0] <= version <= req_cls.VALID_VERSIONS[1]:
            return None
        flexible = req_cls.FLEXIBLE_MIN is not None and version >= req_cls.FLEXIBLE_MIN
        mv = memoryview(payload)
        header, off = RequestHeader.read(mv, 0, 2 if flexible else 1)
        return header, req_cls.read(mv, off, version)[0]
    except (KeyError, ValueError):
        return None


def may_wait(payload: bytes, bound_ms: int = int(IO_TIMEOUT * 1000) // 2) -> bool:
    """True if the request decodes and the broker may rightly hold its answer (and the answers
    behind it on the connection) for a while: a group join or sync, or a request whose
    ``max_wait_ms`` / ``timeout_ms`` is above ``bound_ms`` (a long-polling Fetch, an acks=all
    Produce, a CreateTopics waiting for the metadata)."""
    decoded = decode_request(payload)
    if decoded is None:
        return False
    header, req = decoded
    if header.request_api_key in WAITING_APIS:
        return True
    return any(getattr(req, f, 0) > bound_ms for f in ("max_wait_ms", "timeout_ms"))


def captured_items(rng: random.Random, frames: list[bytes], label: str,
                   mutations: int = 8) -> list[tuple[str, bytes, bool]]:
    """``(label, bytes, probe)`` for :func:`send_and_drain` from captured frames: each frame as
    sent, cut short on the wire (then the client closes), with its payload cut short, with
    ``mutations`` mutated payloads, and with its header and a random body. ``probe`` is False
    where the broker may rightly wait (:func:`may_wait`)."""
    out = []
    for i, f in enumerate(frames):
        payload = f[4:]
        decoded = decode_request(payload)
        hlen = len(payload) - len(encode(decoded[1], struct.unpack_from(">h", payload, 2)[0])) if decoded else 8
        variants = [("as sent", payload)]
        variants += [(f"mutated {j}", mutate(rng, payload)) for j in range(mutations)]
        variants.append(("cut", payload[:rng.randrange(len(payload))]))
        variants.append(("random body", payload[:hlen] + rng.randbytes(rng.choice((1, 4, 16, 100)))))
        for name, p in variants:
            out.append((f"capture {label} #{i} {name}", frame(p), not may_wait(p)))
        out.append((f"truncated capture {label} #{i}", f[:rng.randrange(1, len(f))], False))
    return out
