"""Raw Kafka protocol access, written for the suite (independent of any client and of kcompat).

Only what the wire scenarios and probes need: framing, request headers v1/v2, ApiVersions v0-v4,
Metadata v1/v4, Fetch v4, ListOffsets v1, InitProducerId v1, Produce v7, and RecordBatch v2 encoding
and header decoding (CRC32C from the ``crc32c`` package).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 4: "LeaderAndIsr", 5: "StopReplica",
    6: "UpdateMetadata", 7: "ControlledShutdown", 8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator",
    11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords",
    22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn",
    26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls",
    31: "DeleteAcls", 32: "DescribeConfigs", 33: "AlterConfigs", 34: "AlterReplicaLogDirs", 35: "DescribeLogDirs",
    36: "SaslAuthenticate", 37: "CreatePartitions", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
    40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments", 46: "ListPartitionReassignments",
    47: "OffsetDelete", 48: "DescribeClientQuotas", 49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch",
    55: "DescribeQuorum", 56: "AlterPartition", 57: "UpdateFeatures", 58: "Envelope", 59: "FetchSnapshot",
    60: "DescribeCluster", 61: "DescribeProducers", 62: "BrokerRegistration", 63: "BrokerHeartbeat",
    64: "UnregisterBroker", 65: "DescribeTransactions", 66: "ListTransactions", 67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 73: "AssignReplicasToDirs",
    74: "ListClientMetricsResources", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge", 80: "AddRaftVoter", 81: "RemoveRaftVoter",
    82: "UpdateRaftVoter",
}

ERROR_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR", 0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION", 4: "INVALID_FETCH_SIZE", 5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 10: "MESSAGE_TOO_LARGE", 17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE", 35: "UNSUPPORTED_VERSION", 36: "TOPIC_ALREADY_EXISTS", 37: "INVALID_PARTITIONS",
    38: "INVALID_REPLICATION_FACTOR", 40: "INVALID_CONFIG", 42: "INVALID_REQUEST", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER", 47: "INVALID_PRODUCER_EPOCH", 59: "UNKNOWN_PRODUCER_ID",
    87: "INVALID_RECORD", 29: "TOPIC_AUTHORIZATION_FAILED", 30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED", 33: "UNSUPPORTED_SASL_MECHANISM", 34: "ILLEGAL_SASL_STATE",
    58: "SASL_AUTHENTICATION_FAILED",
}


def api_name(key: int) -> str:
    return f"{API_NAMES.get(key, 'api')}({key})"


def error_name(code: int) -> str:
    return f"{ERROR_NAMES.get(code, 'error')}({code})"


# -- primitives ------------------------------------------------------------------------------------

class Writer:
    """Appends Kafka primitive types to a bytearray."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def i8(self, v: int) -> "Writer":
        self.buf += struct.pack(">b", v)
        return self

    def i16(self, v: int) -> "Writer":
        self.buf += struct.pack(">h", v)
        return self

    def i32(self, v: int) -> "Writer":
        self.buf += struct.pack(">i", v)
        return self

    def u32(self, v: int) -> "Writer":
        self.buf += struct.pack(">I", v)
        return self

    def i64(self, v: int) -> "Writer":
        self.buf += struct.pack(">q", v)
        return self

    def uvarint(self, v: int) -> "Writer":
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                self.buf.append(b | 0x80)
            else:
                self.buf.append(b)
                return self

    def varint(self, v: int) -> "Writer":
        return self.uvarint((v << 1) ^ (v >> 63))

    def string(self, s: str | None) -> "Writer":
        if s is None:
            return self.i16(-1)
        b = s.encode()
        self.i16(len(b))
        self.buf += b
        return self

    def compact_string(self, s: str | None) -> "Writer":
        if s is None:
            return self.uvarint(0)
        b = s.encode()
        self.uvarint(len(b) + 1)
        self.buf += b
        return self

    def bytes_(self, b: bytes | None) -> "Writer":
        if b is None:
            return self.i32(-1)
        self.i32(len(b))
        self.buf += b
        return self

    def raw(self, b: bytes) -> "Writer":
        self.buf += b
        return self

    def tags(self) -> "Writer":
        return self.uvarint(0)

    def getvalue(self) -> bytes:
        return bytes(self.buf)


class Reader:
    """Reads Kafka primitive types from bytes, raising ValueError when data runs out."""

    def __init__(self, data: bytes, off: int = 0) -> None:
        self.data = data
        self.off = off

    def _take(self, n: int) -> bytes:
        if n < 0 or self.off + n > len(self.data):
            raise ValueError(f"truncated response: need {n} bytes at {self.off}, have {len(self.data) - self.off}")
        b = self.data[self.off:self.off + n]
        self.off += n
        return b

    def i8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def i16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def i64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode("utf-8", "replace")

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n).decode("utf-8", "replace")

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def array(self, item, compact: bool = False) -> list:
        n = self.uvarint() - 1 if compact else self.i32()
        return [] if n < 0 else [item() for _ in range(n)]

    def remaining(self) -> int:
        return len(self.data) - self.off


# -- framing -----------------------------------------------------------------------------------------

def request_frame(api_key: int, version: int, correlation_id: int, body: bytes, *, flexible: bool = False,
                  client_id: str | None = "conformance") -> bytes:
    """A size-prefixed request: header v1 (or v2 when ``flexible``) followed by ``body``."""
    w = Writer().i16(api_key).i16(version).i32(correlation_id).string(client_id)
    if flexible:
        w.tags()
    payload = w.getvalue() + body
    return struct.pack(">i", len(payload)) + payload


class Closed(ConnectionError):
    """The broker closed the connection."""


class Connection:
    """A blocking connection to one broker, sending raw frames and reading whole responses."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.settimeout(timeout)
        self._corr = 0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def next_correlation(self) -> int:
        self._corr += 1
        return self._corr

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise Closed("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        if size < 0 or size > 1 << 30:
            raise ValueError(f"bogus response size {size}")
        return self._recv_exact(size)

    def request(self, api_key: int, version: int, body: bytes, *, flexible: bool = False,
                flexible_response: bool | None = None) -> Reader:
        """Send one request and return a Reader positioned after the response header."""
        corr = self.next_correlation()
        self.send_raw(request_frame(api_key, version, corr, body, flexible=flexible))
        frame = self.recv_frame()
        r = Reader(frame)
        got = r.i32()
        if got != corr:
            raise ValueError(f"correlation id {got} in response, expected {corr}")
        if flexible if flexible_response is None else flexible_response:
            r.skip_tags()
        return r

    def closed_by_peer(self, wait: float = 3.0) -> bool:
        """True if the broker closes (or resets) the connection within ``wait`` seconds."""
        self.sock.settimeout(wait)
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline:
                data = self.sock.recv(65536)
                if not data:
                    return True
            return False
        except socket.timeout:
            return False
        except OSError:
            return True


# -- ApiVersions (18) -----------------------------------------------------------------------------------

@dataclass
class ApiVersionsResult:
    error_code: int
    apis: dict[int, tuple[int, int]] = field(default_factory=dict)
    throttle_ms: int | None = None


def api_versions_body(version: int) -> bytes:
    if version >= 3:
        return Writer().compact_string("conformance").compact_string("1.0").tags().getvalue()
    return b""


def parse_api_versions(r: Reader, version: int) -> ApiVersionsResult:
    """Parse an ApiVersions response body (the header is always v0). An error reply may use the v0
    body whatever the request version (KIP-511), so on a non-zero error the v0 layout is read."""
    error = r.i16()
    flexible = version >= 3 and error == 0

    def entry():
        key, lo, hi = r.i16(), r.i16(), r.i16()
        if flexible:
            r.skip_tags()
        return key, lo, hi

    entries = r.array(entry, compact=flexible)
    throttle = r.i32() if version >= 1 and error == 0 else None
    return ApiVersionsResult(error, {k: (lo, hi) for k, lo, hi in entries}, throttle)


def api_versions(conn: Connection, version: int = 3) -> ApiVersionsResult:
    r = conn.request(18, version, api_versions_body(version), flexible=version >= 3, flexible_response=False)
    return parse_api_versions(r, version)


def fetch_api_versions(bootstrap: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """The broker's advertised API ranges, asked with ApiVersions v3 (falling back to v0)."""
    with Connection(bootstrap, timeout) as conn:
        res = api_versions(conn, 3)
        if res.error_code == 35:
            res = api_versions(conn, 0)
        if res.error_code != 0:
            raise ValueError(f"ApiVersions error {error_name(res.error_code)}")
        return res.apis


# -- Metadata (3) v1/v4 --------------------------------------------------------------------------------

@dataclass
class MetadataResult:
    brokers: dict[int, tuple[str, int]]
    controller_id: int
    topics: dict[str, dict]  # name -> {"error": code, "partitions": {id: {"error", "leader", "replicas", "isr"}}}


def metadata_body(topics: list[str] | None, version: int = 1, allow_auto_create: bool = False) -> bytes:
    w = Writer()
    if topics is None:
        w.i32(-1)
    else:
        w.i32(len(topics))
        for t in topics:
            w.string(t)
    if version >= 4:
        w.i8(1 if allow_auto_create else 0)
    return w.getvalue()


def parse_metadata(r: Reader, version: int) -> MetadataResult:
    if version >= 3:
        r.i32()  # throttle
    brokers = {}
    for _ in range(r.i32()):
        node, host, port = r.i32(), r.string(), r.i32()
        r.string()  # rack
        brokers[node] = (host, port)
    if version >= 2:
        r.string()  # cluster id
    controller = r.i32()
    topics = {}
    for _ in range(r.i32()):
        err, name, _internal = r.i16(), r.string(), r.i8()
        parts = {}
        for _ in range(r.i32()):
            perr, pid, leader = r.i16(), r.i32(), r.i32()
            replicas = r.array(r.i32)
            isr = r.array(r.i32)
            parts[pid] = {"error": perr, "leader": leader, "replicas": replicas, "isr": isr}
        topics[name] = {"error": err, "partitions": parts}
    return MetadataResult(brokers, controller, topics)


def metadata(conn: Connection, topics: list[str] | None = None, version: int = 1,
             allow_auto_create: bool = False) -> MetadataResult:
    r = conn.request(3, version, metadata_body(topics, version, allow_auto_create))
    return parse_metadata(r, version)


# -- RecordBatch v2 ---------------------------------------------------------------------------------------

def record_batch(values: list[bytes], *, base_timestamp: int | None = None, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1, corrupt_crc: bool = False,
                 keys: list[bytes | None] | None = None, timestamp_deltas: list[int] | None = None) -> bytes:
    """An uncompressed RecordBatch v2 holding ``values`` with ``keys`` (default: none) and record
    timestamps ``base_timestamp + timestamp_deltas[i]`` (default: all the base), no headers."""
    import crc32c

    ts = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    deltas = timestamp_deltas or [0] * len(values)
    recs = Writer()
    for i, v in enumerate(values):
        key = keys[i] if keys is not None else None
        body = Writer().i8(0).varint(deltas[i]).varint(i)
        if key is None:
            body.varint(-1)
        else:
            body.varint(len(key)).raw(key)
        body = body.varint(len(v)).raw(v).varint(0).getvalue()
        recs.varint(len(body)).raw(body)
    after_crc = (Writer().i16(0).i32(len(values) - 1).i64(ts).i64(ts + max(deltas)).i64(producer_id).i16(producer_epoch)
                 .i32(base_sequence).i32(len(values)).raw(recs.getvalue()).getvalue())
    crc = crc32c.crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    head = Writer().i32(-1).i8(2).u32(crc).getvalue()  # partitionLeaderEpoch, magic, crc
    batch_len = len(head) + len(after_crc)
    return Writer().i64(0).i32(batch_len).raw(head).raw(after_crc).getvalue()


@dataclass
class BatchHeader:
    base_offset: int
    length: int
    last_offset_delta: int
    record_count: int
    attributes: int
    producer_id: int
    base_sequence: int


def batch_headers(records: bytes) -> list[BatchHeader]:
    """Headers of the whole batches in a Fetch response's records field (a partial tail is ignored)."""
    out = []
    off = 0
    while off + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, off)
        if off + 12 + length > len(records):
            break
        attributes, last_delta = struct.unpack_from(">hi", records, off + 21)
        producer_id = struct.unpack_from(">q", records, off + 43)[0]
        base_seq, count = struct.unpack_from(">ii", records, off + 53)
        out.append(BatchHeader(base, length, last_delta, count, attributes, producer_id, base_seq))
        off += 12 + length
    return out


# -- Produce (0) v7, InitProducerId (22) v1, Fetch (1) v4, ListOffsets (2) v1 ------------------------------

def produce(conn: Connection, topic: str, partition: int, batch: bytes, *, acks: int = -1,
            timeout_ms: int = 10000) -> dict:
    """Produce one batch; returns {"error", "base_offset", "log_start_offset"}."""
    body = (Writer().string(None).i16(acks).i32(timeout_ms).i32(1).string(topic).i32(1).i32(partition)
            .bytes_(batch).getvalue())
    r = conn.request(0, 7, body)
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            out = {"error": r.i16(), "base_offset": r.i64(), "log_append_time": r.i64(), "log_start_offset": r.i64()}
    return out


def produce_v8(conn: Connection, topic: str, partition: int, batch: bytes, *, acks: int = -1,
               timeout_ms: int = 10000) -> dict:
    """Produce one batch with v8 (KIP-467); returns {"error", "base_offset", "log_start_offset",
    "record_errors": [(batch index, message)], "error_message"}."""
    body = (Writer().string(None).i16(acks).i32(timeout_ms).i32(1).string(topic).i32(1).i32(partition)
            .bytes_(batch).getvalue())
    r = conn.request(0, 8, body)
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            out = {"error": r.i16(), "base_offset": r.i64(), "log_append_time": r.i64(), "log_start_offset": r.i64()}
            out["record_errors"] = r.array(lambda: (r.i32(), r.string()))
            out["error_message"] = r.string()
    return out


def init_producer_id(conn: Connection, transactional_id: str | None = None, timeout_ms: int = 60000) -> dict:
    r = conn.request(22, 1, Writer().string(transactional_id).i32(timeout_ms).getvalue())
    r.i32()
    return {"error": r.i16(), "producer_id": r.i64(), "producer_epoch": r.i16()}


RETRIABLE_COORDINATOR_ERRORS = {14, 15, 51}  # load in progress, not available, concurrent transactions


def init_producer_id_retrying(conn: Connection, transactional_id: str | None = None, timeout: float = 30.0) -> dict:
    """InitProducerId, retried while the broker answers a retriable coordinator error (a fresh Kafka
    answers COORDINATOR_LOAD_IN_PROGRESS until its producer-id manager is ready)."""
    deadline = time.monotonic() + timeout
    while True:
        res = init_producer_id(conn, transactional_id)
        if res["error"] not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
            return res
        time.sleep(0.25)


def fetch(conn: Connection, topic: str, partition: int, offset: int, *, max_wait_ms: int = 500, min_bytes: int = 1,
          max_bytes: int = 1 << 20, isolation: int = 0) -> dict:
    """Fetch v4 of one partition; returns {"error", "high_watermark", "last_stable_offset", "records"}."""
    body = (Writer().i32(-1).i32(max_wait_ms).i32(min_bytes).i32(max_bytes).i8(isolation).i32(1).string(topic)
            .i32(1).i32(partition).i64(offset).i32(max_bytes).getvalue())
    r = conn.request(1, 4, body)
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            err, hw, lso = r.i16(), r.i64(), r.i64()
            aborted = r.array(lambda: (r.i64(), r.i64()))
            out = {"error": err, "high_watermark": hw, "last_stable_offset": lso, "aborted": aborted,
                   "records": r.bytes_() or b""}
    return out


def list_offsets(conn: Connection, topic: str, partition: int, timestamp: int) -> dict:
    """ListOffsets v1 of one partition: {"error", "timestamp", "offset"}."""
    body = Writer().i32(-1).i32(1).string(topic).i32(1).i32(partition).i64(timestamp).getvalue()
    r = conn.request(2, 1, body)
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            out = {"error": r.i16(), "timestamp": r.i64(), "offset": r.i64()}
    return out
