"""``POST /v3/clusters/{cluster_id}/topics/{topic_name}/records``: produce records over HTTP as
Confluent's REST Proxy v3 does ("Produce Records", Records (v3) in Confluent's API reference,
``api/v3/openapi.yaml`` of confluentinc/kafka-rest).

Request (``Content-Type: application/json``): one ProduceRequest, or several concatenated (the
REST Proxy's streaming mode)::

    {"partition_id": 1,                                   # optional; else by key, else sticky
     "headers": [{"name": "h1", "value": "<base64>"}],   # optional; value may be null
     "key":   {"type": "BINARY", "data": "<base64>"},     # optional; data may be null
     "value": {"type": "JSON", "data": {"any": "json"}},  # optional; JSON, BINARY or STRING
     "timestamp": "2021-02-05T19:14:42Z"}                 # optional; default: now

Key and value types: ``JSON`` (the data serialized as compact UTF-8 JSON), ``BINARY`` (base64,
padded), ``STRING`` (UTF-8). The schema-based ones (AVRO, JSONSCHEMA, PROTOBUF, or no type with a
schema id/version) need a Schema Registry, which kcompat does not have: 400.

Partition: ``partition_id`` if given (404 40402 if the topic has no such partition), else
``murmur2(key bytes) & 0x7fffffff % partitions`` for a record with a key (Kafka's default
partitioner, so the REST Proxy and Kafka clients agree), else one partition for all keyless
records of a request, the next one for the next request (the sticky partitioner, KIP-480).

Response: one ProduceResponse per record, in request order, each followed by ``\\r\\n``::

    {"error_code": 200, "cluster_id": "...", "topic_name": "t", "partition_id": 1, "offset": 42,
     "timestamp": "2021-02-05T19:14:42.123Z", "key": {"type": "BINARY", "size": 6},
     "value": {"type": "JSON", "size": 13}}

or ``{"error_code": <code>, "message": "..."}`` for a record that failed (Confluent's codes: 400
bad record, 404/40402 no such partition, 413 record larger than the topic's max.message.bytes,
500/50003 retriable Kafka error, 500/50002 other Kafka error; see :func:`rest_common.kafka_error`).
With one record in the request the HTTP status is the record's (200, or the error's status); with
several it is 200 and each record has its own ``error_code``, as in Confluent's streaming mode.

Whole-request errors, answered before anything is written: 404 (error_code 404) unknown cluster,
404 40401 unknown topic (created first instead when ``auto.create.topics.enable``, as the Java
producer behind the REST Proxy would), 415 not ``application/json``, 413 a body (with a
Content-Length) larger than ``max(4 x message.max.bytes, 1 MiB)``, 400 a body that is not a
sequence of JSON objects, 422 42206 an empty body.

A body sent with ``Transfer-Encoding: chunked`` is produced as it arrives: each run of complete
records is produced as soon as it has arrived, and its results are sent back (chunked) before
more is read, so a client can keep one request open and stream; the size limit then applies to
each record, and malformed JSON ends the stream with a 400 entry after the results of the records
before it (those were written), as in Confluent's streaming mode.

Records are appended with acks=all, several records of a partition in one batch (split at the
topic's ``max.message.bytes``), uncompressed, without idempotence (see :mod:`.kafka_client`).
"""

from __future__ import annotations

import base64
import binascii
import random
import re
import time
from typing import TYPE_CHECKING

from aiohttp import web

from kcompat.broker.http.kafka_client import ClusterClient
from kcompat.broker.http.rest_common import (
    INVALID_PAYLOAD, RestError, V3_CONTENT_TYPE, bad_request, dumps, iso_timestamp, json_response, kafka_error,
    add_route, media_type, parse_json, parse_timestamp, partition_not_found, read_body, rest_handler, too_large,
    topic_not_found, unprocessable,
)
from kcompat.protocol.topic_names import INTERNAL_TOPICS, validate_topic_name
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.murmur2 import murmur2
from kcompat.protocol.records import HEADER_SIZE, build_batch

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

SEPARATOR = "\r\n"
_RECORD_OVERHEAD = 40      # bytes: at least a record's varints, attributes and deltas beyond its payload


# ------------------------------------------------------------------------------------------------
# Kafka's default partitioner
# ------------------------------------------------------------------------------------------------

def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# ------------------------------------------------------------------------------------------------
# concatenated JSON
# ------------------------------------------------------------------------------------------------

_NON_SPACE = re.compile(rb"[^ \t\r\n]")
_STRUCTURAL = re.compile(rb'[{}\[\]"]')
_IN_STRING = re.compile(rb'["\\]')


class JsonSplitter:
    """Cuts a byte stream of concatenated JSON objects (or arrays) into one ``bytes`` per value,
    fed piece by piece as it arrives; the values are decoded afterwards with
    :func:`rest_common.parse_json`. ValueError when the stream holds something else at the top
    level (a number, a string, a stray bracket); RestError 413 when one value passes ``limit``
    bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.pos = 0
        self.start: int | None = None
        self.depth = 0
        self.in_string = False

    def feed(self, data: bytes) -> list[bytes]:
        buf = self.buf
        buf += data
        out = []
        while True:
            if self.start is None:
                m = _NON_SPACE.search(buf, self.pos)
                if m is None:
                    self.pos = len(buf)
                    break
                if buf[m.start()] not in b"{[":
                    raise ValueError(f"expected a JSON object at byte {m.start()}, found {bytes(buf[m.start():m.start() + 20])!r}")
                self.start, self.pos, self.depth, self.in_string = m.start(), m.start(), 0, False
            if self.in_string:
                m = _IN_STRING.search(buf, self.pos)
                if m is None:
                    self.pos = len(buf)
                    break
                if buf[m.start()] == 0x5C:   # backslash: skip the escaped byte once it is here
                    if m.start() + 2 > len(buf):
                        self.pos = m.start()
                        break
                    self.pos = m.start() + 2
                else:
                    self.in_string = False
                    self.pos = m.start() + 1
                continue
            m = _STRUCTURAL.search(buf, self.pos)
            if m is None:
                self.pos = len(buf)
                break
            c = buf[m.start()]
            self.pos = m.start() + 1
            if c == 0x22:
                self.in_string = True
            elif c in b"{[":
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 0:
                    out.append(bytes(buf[self.start:self.pos]))
                    self.start = None
        if self.start is not None and len(buf) - self.start > self.limit:
            raise too_large(f"A record of the request is larger than the {self.limit} bytes accepted.")
        keep = self.start if self.start is not None else self.pos
        if keep:
            del buf[:keep]
            self.pos -= keep
            if self.start is not None:
                self.start = 0
        return out

    def finish(self) -> None:
        """The stream ended: ValueError if it stopped inside a value."""
        if self.start is not None:
            raise ValueError("unexpected end of input inside a JSON value")


def split_json(body: bytes, limit: int) -> list:
    """The JSON documents of a complete body (ValueError, UnicodeDecodeError if malformed)."""
    splitter = JsonSplitter(limit)
    pieces = splitter.feed(body)
    splitter.finish()
    return [parse_json(p) for p in pieces]


# ------------------------------------------------------------------------------------------------
# one record
# ------------------------------------------------------------------------------------------------

class Prepared:
    """A validated ProduceRequest: ``key``/``value`` bytes (None: null), their requested types
    (None: not given), headers ``[(name, bytes | None)]``, ``partition`` (None: to choose),
    ``timestamp`` (epoch ms)."""

    __slots__ = ("partition", "key", "key_type", "value", "value_type", "headers", "timestamp")

    def __init__(self, partition, key, key_type, value, value_type, headers, timestamp) -> None:
        self.partition = partition
        self.key = key
        self.key_type = key_type
        self.value = value
        self.value_type = value_type
        self.headers = headers
        self.timestamp = timestamp

    def size(self) -> int:
        return (_RECORD_OVERHEAD + len(self.key or b"") + len(self.value or b"")
                + sum(len(n) + len(v or b"") + 10 for n, v in self.headers))


def _b64(value, what: str) -> bytes:
    if not isinstance(value, str):
        raise bad_request(f"Bad Request: {what} must be a base64 string, not {type(value).__name__}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise bad_request(f"Bad Request: {what}={value[:64]} is not a base64 string.") from None


def _data(part, what: str) -> tuple[bytes | None, str | None]:
    """(bytes, type) of a ``key``/``value`` object."""
    if part is None:
        return None, None
    if not isinstance(part, dict):
        raise bad_request(f"Bad Request: {what} must be an object with type and data")
    kind = part.get("type")
    data = part.get("data")
    if kind is None:
        raise bad_request(f"Bad Request: {what}.type is required (BINARY, JSON or STRING): schema-based "
                          f"formats need a Schema Registry, which kcompat does not provide")
    if not isinstance(kind, str):
        raise bad_request(f"Bad Request: {what}.type must be a string")
    kind = kind.upper()
    if kind in ("AVRO", "JSONSCHEMA", "PROTOBUF"):
        raise bad_request(f"Bad Request: {what}.type {kind} needs a Schema Registry, which kcompat does not provide")
    if kind not in ("BINARY", "JSON", "STRING"):
        raise bad_request(f"Bad Request: {what}.type must be BINARY, JSON or STRING, not {part.get('type')!r}")
    if data is None:
        return None, kind
    if kind == "BINARY":
        return _b64(data, f"{what}.data"), kind
    if kind == "STRING":
        if not isinstance(data, str):
            raise bad_request(f"Bad Request: {what}.data must be a string for type STRING")
        return data.encode("utf-8"), kind
    return dumps(data).encode("utf-8"), kind


def prepare(doc, partitions: int, now_ms: int) -> Prepared:
    """Validate one ProduceRequest document; RestError for what Confluent refuses."""
    if not isinstance(doc, dict):
        raise bad_request(f"Bad Request: a produce record must be a JSON object, not {type(doc).__name__}")
    partition = doc.get("partition_id")
    if partition is not None:
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise bad_request(f"Bad Request: partition_id must be an integer, not {partition!r}")
        if not 0 <= partition < partitions:
            raise partition_not_found()
    headers = []
    raw_headers = doc.get("headers")
    if raw_headers is not None:
        if not isinstance(raw_headers, list):
            raise bad_request("Bad Request: headers must be an array of {name, value}")
        for h in raw_headers:
            if not isinstance(h, dict) or not isinstance(h.get("name"), str):
                raise bad_request("Bad Request: each header needs a string name")
            value = h.get("value")
            headers.append((h["name"], None if value is None else _b64(value, f"header {h['name']} value")))
    key, key_type = _data(doc.get("key"), "key")
    value, value_type = _data(doc.get("value"), "value")
    ts = doc.get("timestamp")
    if ts is None:
        timestamp = now_ms
    else:
        try:
            timestamp = parse_timestamp(ts)
        except (ValueError, OverflowError) as e:
            raise bad_request(f"Bad Request: timestamp {ts!r} is not an ISO 8601 date-time: {e}") from None
    return Prepared(partition, key, key_type, value, value_type, headers, timestamp)


# ------------------------------------------------------------------------------------------------
# producing
# ------------------------------------------------------------------------------------------------

class RestProducer:
    """Produces the records of REST requests for one HTTP listener (one :class:`ClusterClient`)."""

    def __init__(self, services: HttpServices, client: ClusterClient) -> None:
        self.services = services
        self.client = client
        self._sticky: dict[str, int] = {}

    def body_limit(self) -> int:
        """Largest request body (bytes): 4 x message.max.bytes, at least 1 MiB."""
        return max(4 * int(self.services.config.get("message.max.bytes")), 1 << 20)

    async def ensure_topic(self, topic: str) -> None:
        """RestError 40401 unless ``topic`` exists, after creating it when auto.create.topics.enable."""
        services = self.services
        if topic in services.image.topics:
            return
        if services.config.get("auto.create.topics.enable") and topic not in INTERNAL_TOPICS:
            try:
                validate_topic_name(topic)
            except KafkaError:
                raise topic_not_found() from None
            try:
                await services.auto_create_topics([topic])
            except KafkaError as e:
                raise kafka_error(e.code, e.message) from None
            await services.wait_for_topics([topic], 10.0)
            if topic in services.image.topics:
                return
        raise topic_not_found()

    def _next_sticky(self, topic: str, partitions: int) -> int:
        prev = self._sticky.get(topic)
        p = random.randrange(partitions) if prev is None else (prev + 1) % partitions
        self._sticky[topic] = p
        return p

    async def produce(self, cluster_id: str, topic: str, docs: list) -> list[dict]:
        """Produce ``docs`` (decoded ProduceRequests) to ``topic``; one ProduceResponse dict per doc."""
        partitions = self.client.partition_count(topic)
        if partitions is None:
            return [topic_not_found().body() for _ in docs]
        now = int(time.time() * 1000)
        results: list[dict | None] = [None] * len(docs)
        prepared: dict[int, Prepared] = {}
        sticky = None
        for i, doc in enumerate(docs):
            try:
                rec = prepare(doc, partitions, now)
            except RestError as e:
                results[i] = e.body()
                continue
            if rec.partition is None:
                if rec.key is not None:
                    rec.partition = partition_for_key(rec.key, partitions)
                else:
                    if sticky is None:
                        sticky = self._next_sticky(topic, partitions)
                    rec.partition = sticky
            prepared[i] = rec
        cap = max(1024, int(self.services.topic_values(topic)["max.message.bytes"]) - HEADER_SIZE)
        # partition -> batches, each a list of record indexes
        plan: dict[int, list[list[int]]] = {}
        sizes: dict[int, int] = {}
        for i, rec in prepared.items():
            batches = plan.setdefault(rec.partition, [[]])
            size = rec.size()
            if batches[-1] and sizes[rec.partition] + size > cap:
                batches.append([])
                sizes[rec.partition] = 0
            batches[-1].append(i)
            sizes[rec.partition] = sizes.get(rec.partition, 0) + size
        encoded = {p: [build_batch([(prepared[i].timestamp, prepared[i].key, prepared[i].value, prepared[i].headers)
                                    for i in batch]) for batch in batches]
                   for p, batches in plan.items()}
        outcome = await self.client.produce(topic, encoded)
        for p, batches in plan.items():
            for batch, (code, base, log_append, message) in zip(batches, outcome[p]):
                for pos, i in enumerate(batch):
                    if code != ErrorCode.NONE:
                        results[i] = kafka_error(code, message).body()
                        continue
                    rec = prepared[i]
                    r = {"error_code": 200, "cluster_id": cluster_id, "topic_name": topic, "partition_id": p,
                         "offset": base + pos, "timestamp": iso_timestamp(log_append if log_append >= 0 else rec.timestamp)}
                    if rec.key_type is not None:
                        r["key"] = {"type": rec.key_type, "size": len(rec.key or b"")}
                    if rec.value_type is not None:
                        r["value"] = {"type": rec.value_type, "size": len(rec.value or b"")}
                    results[i] = r
        return [r if r is not None else kafka_error(int(ErrorCode.UNKNOWN_SERVER_ERROR)).body() for r in results]


def _status_of(result: dict) -> int:
    code = result["error_code"]
    return 200 if code == 200 else (code if code < 1000 else code // 100)


def add_routes(app: web.Application, services: HttpServices, producer: RestProducer, check_cluster) -> None:
    """Register ``POST /v3/clusters/{cluster_id}/topics/{topic_name}/records``; ``check_cluster``
    raises the 404 for a cluster id that is not this cluster's."""

    @rest_handler(V3_CONTENT_TYPE)
    async def produce_records(request: web.Request) -> web.StreamResponse:
        cluster_id = check_cluster(request)
        topic = request.match_info["topic_name"]
        if media_type(request) != "application/json":
            raise RestError(415, 415, "HTTP 415 Unsupported Media Type")
        await producer.ensure_topic(topic)
        limit = producer.body_limit()
        if request.content_length is not None or not request.body_exists:
            body = await read_body(request, limit)
            try:
                docs = split_json(body, limit)
            except (ValueError, UnicodeDecodeError) as e:
                raise bad_request(f"Error processing JSON: {e}") from None
            if not docs:
                raise unprocessable("Payload error. Request body is empty. Data is required.", INVALID_PAYLOAD)
            results = await producer.produce(cluster_id, topic, docs)
            if len(results) == 1:
                return json_response(results[0], _status_of(results[0]))
            return web.Response(text="".join(dumps(r) + SEPARATOR for r in results), content_type=V3_CONTENT_TYPE)
        return await _stream(request, producer, cluster_id, topic, limit)

    add_route(app, "POST", "/v3/clusters/{cluster_id}/topics/{topic_name}/records", produce_records)


async def _stream(request: web.Request, producer: RestProducer, cluster_id: str, topic: str,
                  limit: int) -> web.StreamResponse:
    """A chunked body: produce each run of complete records as it arrives (see the module doc)."""
    resp: web.StreamResponse | None = None
    splitter = JsonSplitter(limit)
    error: RestError | None = None
    produced = False

    async def emit(results: list[dict]) -> None:
        nonlocal resp
        if resp is None:
            resp = web.StreamResponse(status=200, headers={"Content-Type": V3_CONTENT_TYPE})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
        await resp.write("".join(dumps(r) + SEPARATOR for r in results).encode("utf-8"))

    async for chunk in request.content.iter_any():
        docs = []
        try:
            for piece in splitter.feed(chunk):
                docs.append(parse_json(piece))
        except RestError as e:
            error = e
        except (ValueError, UnicodeDecodeError) as e:
            error = bad_request(f"Error processing JSON: {e}")
        if docs:
            produced = True
            await emit(await producer.produce(cluster_id, topic, docs))
        if error is not None:
            break
    else:
        try:
            splitter.finish()
        except ValueError as e:
            error = bad_request(f"Error processing JSON: {e}")
    if error is not None:
        if resp is None:
            return json_response(error.body(), error.status)
        await emit([error.body()])
    elif resp is None:
        assert not produced
        raise unprocessable("Payload error. Request body is empty. Data is required.", INVALID_PAYLOAD)
    await resp.write_eof()
    return resp
