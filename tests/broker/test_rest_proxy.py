"""The Confluent REST Proxy subset on the HTTP listener against real broker processes: v3 cluster,
topic, partition and replica resources; v3 produce (JSON, BINARY and STRING keys and values,
headers, explicit partitions, key hashing that agrees with Kafka's default partitioner, several
records in one body and a chunked body streamed record by record) read back with confluent-kafka;
v2 consumer instances (subscribe with the KIP-848 protocol, assign, seek, commit) reading what
confluent-kafka produced, their commits seen by confluent-kafka; consumer lag rising and falling;
Confluent's error codes for bad requests, with nothing written for a malformed or oversized body;
idle instances expiring; a 3-node cluster served from nodes that neither lead nor coordinate."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import urllib.error
import urllib.request
import uuid

import aiohttp
import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.broker.http.rest_v3_produce import murmur2, partition_for_key, split_json
from kcompat.testing.ports import free_ports
from tests.support.broker_process import BrokerProcess, wait_for
from tests.support.cluster import Cluster, with_http_listeners

V2 = "application/vnd.kafka.v2+json"
JSON = "application/json"


def call(method: str, url: str, body=None, ctype: str | None = JSON, accept: str | None = None,
         timeout: float = 30.0):
    """(status, parsed JSON body or text or None, headers)."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    headers = {}
    if ctype is not None and (data is not None or method != "GET"):
        headers["Content-Type"] = ctype
    if accept:
        headers["Accept"] = accept
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw, hdrs = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, raw, hdrs = e.code, e.read(), e.headers
    text = raw.decode()
    if not text.strip():
        return status, None, hdrs
    try:
        return status, json.loads(text), hdrs
    except ValueError:
        return status, text, hdrs


def results_of(text) -> list[dict]:
    """The concatenated ProduceResponses of a streamed produce."""
    if isinstance(text, dict):
        return [text]
    return split_json(text.encode(), 1 << 30)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return [c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    """Every record of ``topic`` with confluent-kafka (assigned from the beginning)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    deadline = time.time() + 30
    while len(out) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(m)
    c.close()
    assert len(out) == expected
    return out


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})   # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


class Rest:
    """The REST Proxy of one broker: ``base`` URL, ``cluster`` id, ``bootstrap``."""

    def __init__(self, bootstrap: str, port: int) -> None:
        self.bootstrap = bootstrap
        self.base = f"http://127.0.0.1:{port}"
        status, body, _ = call("GET", f"{self.base}/v3/clusters")
        assert status == 200
        self.cluster = body["data"][0]["cluster_id"]

    def v3(self, path: str) -> str:
        return f"{self.base}/v3/clusters/{self.cluster}{path}"

    def records(self, topic: str) -> str:
        return self.v3(f"/topics/{topic}/records")

    def consumer(self, group: str, **settings) -> str:
        status, body, _ = call("POST", f"{self.base}/consumers/{group}", settings, V2)
        assert status == 200, body
        assert body["base_uri"] == f"{self.base}/consumers/{group}/instances/{body['instance_id']}"
        return body["base_uri"]

    def read_until(self, uri: str, n: int, fmt: str = "binary", timeout: float = 30.0) -> list[dict]:
        out = []
        deadline = time.time() + timeout
        while len(out) < n and time.time() < deadline:
            status, body, hdrs = call("GET", f"{uri}/records?timeout=1000", accept=f"application/vnd.kafka.{fmt}.v2+json")
            assert status == 200, body
            assert hdrs["Content-Type"].startswith(f"application/vnd.kafka.{fmt}.v2+json")
            out.extend(body)
        assert len(out) == n, out
        return out


@pytest.fixture(scope="module")
def rest(tmp_path_factory):
    (port,) = free_ports(1)
    overrides = {"http.listeners": f"HTTP://127.0.0.1:{port}", "auto.create.topics.enable": "false",
                 "message.max.bytes": "200000", "group.consumer.heartbeat.interval.ms": "500",
                 "group.consumer.min.heartbeat.interval.ms": "500"}
    with BrokerProcess(tmp_path_factory.mktemp("rest") / "data", overrides) as b:
        yield Rest(b.bootstrap, port)


# ------------------------------------------------------------------------------------------------
# v3 resources
# ------------------------------------------------------------------------------------------------

def test_cluster_topic_partition_and_replica_resources(rest):
    topic = f"res-{uuid.uuid4().hex[:6]}"
    create_topic(rest.bootstrap, topic, 3)
    admin = AdminClient({"bootstrap.servers": rest.bootstrap})
    assert rest.cluster == admin.describe_cluster().result(10).cluster_id
    status, cluster, hdrs = call("GET", f"{rest.base}/v3/clusters/{rest.cluster}")
    assert status == 200 and hdrs["Content-Type"].startswith("application/json")
    assert cluster["kind"] == "KafkaCluster" and cluster["cluster_id"] == rest.cluster
    assert cluster["metadata"]["self"] == rest.v3("") and cluster["topics"]["related"] == rest.v3("/topics")
    assert cluster["controller"]["related"] == rest.v3("/brokers/1")

    status, topics, _ = call("GET", rest.v3("/topics"))
    assert status == 200 and topics["kind"] == "KafkaTopicList"
    mine = [t for t in topics["data"] if t["topic_name"] == topic]
    assert len(mine) == 1 and mine[0]["partitions_count"] == 3 and mine[0]["replication_factor"] == 1
    assert mine[0]["is_internal"] is False and mine[0]["partitions"]["related"] == rest.v3(f"/topics/{topic}/partitions")
    status, t, _ = call("GET", rest.v3(f"/topics/{topic}"))
    assert status == 200 and t == mine[0]

    status, parts, _ = call("GET", rest.v3(f"/topics/{topic}/partitions"))
    assert [p["partition_id"] for p in parts["data"]] == [0, 1, 2]
    status, p1, _ = call("GET", rest.v3(f"/topics/{topic}/partitions/1"))
    assert status == 200 and p1["kind"] == "KafkaPartition" and p1["topic_name"] == topic
    assert p1["leader"]["related"] == rest.v3(f"/topics/{topic}/partitions/1/replicas/1")
    status, replicas, _ = call("GET", rest.v3(f"/topics/{topic}/partitions/1/replicas"))
    assert [(r["broker_id"], r["is_leader"], r["is_in_sync"]) for r in replicas["data"]] == [(1, True, True)]
    status, r1, _ = call("GET", rest.v3(f"/topics/{topic}/partitions/1/replicas/1"))
    assert status == 200 and r1["broker"]["related"] == rest.v3("/brokers/1")

    # Confluent's errors
    assert call("GET", f"{rest.base}/v3/clusters/nope/topics")[:2] == \
        (404, {"error_code": 404, "message": "Cluster nope cannot be found."})
    assert call("GET", rest.v3("/topics/missing"))[:2] == (404, {"error_code": 40401, "message": "Topic not found."})
    assert call("GET", rest.v3(f"/topics/{topic}/partitions/7"))[:2] == \
        (404, {"error_code": 40402, "message": "Partition not found."})
    assert call("GET", rest.v3(f"/topics/{topic}/partitions/x/replicas"))[1]["error_code"] == 40402
    assert call("GET", rest.v3(f"/topics/{topic}/partitions/1/replicas/9"))[0] == 404
    assert call("GET", rest.v3("/no/such/thing"))[:2] == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert call("DELETE", rest.v3(""))[:2] == (405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})


# ------------------------------------------------------------------------------------------------
# v3 produce
# ------------------------------------------------------------------------------------------------

def test_murmur2_is_kafkas():
    # org.apache.kafka.common.utils.UtilsTest.testMurmur2
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}
    assert {k: murmur2(k) for k in cases} == cases


def test_produce_every_type_then_consume_with_confluent_kafka(rest):
    topic = f"prod-{uuid.uuid4().hex[:6]}"
    create_topic(rest.bootstrap, topic, 3)
    url = rest.records(topic)
    sent = [
        {"partition_id": 2, "headers": [{"name": "h1", "value": b64(b"\x00\x01")}, {"name": "h2", "value": None}],
         "key": {"type": "BINARY", "data": b64(b"\xffkey")}, "value": {"type": "BINARY", "data": b64(b"\x00\xfe")}},
        {"key": {"type": "STRING", "data": "user-1"}, "value": {"type": "JSON", "data": {"n": 1, "s": "é"}}},
        {"key": {"type": "JSON", "data": {"id": 7}}, "value": {"type": "STRING", "data": "hello"},
         "headers": [{"name": "trace", "value": b64(b"abc")}]},
        {"partition_id": 0, "value": {"type": "BINARY", "data": b64(b"no key")}, "timestamp": "2021-02-05T19:14:42Z"},
        {"partition_id": 1, "key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON", "data": None}},
    ]
    expected = [  # (key, value, headers, partition or None)
        (b"\xffkey", b"\x00\xfe", [("h1", b"\x00\x01"), ("h2", None)], 2),
        (b"user-1", '{"n":1,"s":"é"}'.encode(), [], partition_for_key(b"user-1", 3)),
        (b'{"id":7}', b"hello", [("trace", b"abc")], partition_for_key(b'{"id":7}', 3)),
        (None, b"no key", [], 0),
        (b"k", None, [], 1),
    ]
    results = []
    for rec in sent:
        status, body, hdrs = call("POST", url, rec)
        assert status == 200 and hdrs["Content-Type"].startswith("application/json"), body
        results.append(body)
    r0 = results[0]
    assert r0["error_code"] == 200 and r0["cluster_id"] == rest.cluster and r0["topic_name"] == topic
    assert r0["partition_id"] == 2 and r0["offset"] == 0
    assert r0["key"] == {"type": "BINARY", "size": 4} and r0["value"] == {"type": "BINARY", "size": 2}
    assert results[1]["key"] == {"type": "STRING", "size": 6} and results[1]["value"] == {"type": "JSON", "size": 16}
    assert results[3]["timestamp"] == "2021-02-05T19:14:42Z" and "key" not in results[3]
    assert results[4]["value"] == {"type": "JSON", "size": 0}
    assert [r["partition_id"] for r in results] == [e[3] for e in expected]

    # several records in one body: one result each, in order
    stream = b"".join(json.dumps({"partition_id": 1, "value": {"type": "STRING", "data": f"s{i}"}}).encode() + b"\n"
                      for i in range(3))
    status, text, _ = call("POST", url, stream)
    assert status == 200
    streamed = results_of(text)
    assert [(r["error_code"], r["partition_id"]) for r in streamed] == [(200, 1)] * 3
    assert [r["offset"] for r in streamed] == [streamed[0]["offset"] + i for i in range(3)]
    expected += [(None, f"s{i}".encode(), [], 1) for i in range(3)]
    results += streamed

    got = {(m.partition(), m.offset()): m for m in read_all(rest.bootstrap, topic, 3, len(expected))}
    for (key, value, headers, partition), r in zip(expected, results):
        m = got[(r["partition_id"], r["offset"])]
        assert (m.key(), m.value(), m.headers() or [], m.partition()) == (key, value, headers, partition)
    assert got[(0, results[3]["offset"])].timestamp() == (ck.TIMESTAMP_CREATE_TIME, 1612552482000)


def test_key_hashing_agrees_with_kafkas_default_partitioner(rest):
    topic = f"hash-{uuid.uuid4().hex[:6]}"
    create_topic(rest.bootstrap, topic, 5)
    keys = [f"key-{i}".encode() for i in range(12)]
    p = ck.Producer({"bootstrap.servers": rest.bootstrap, "partitioner": "murmur2_random"})
    theirs = {}
    for k in keys:
        p.produce(topic, b"v", key=k, on_delivery=lambda err, m: theirs.__setitem__(m.key(), m.partition()))
    assert p.flush(30) == 0
    body = b"".join(json.dumps({"key": {"type": "BINARY", "data": b64(k)}}).encode() for k in keys)
    status, text, _ = call("POST", rest.records(topic), body)
    ours = {k: r["partition_id"] for k, r in zip(keys, results_of(text))}
    assert status == 200 and ours == theirs and len(set(ours.values())) > 1
    # keyless records of one request stay together (sticky)
    body = b"".join(json.dumps({"value": {"type": "STRING", "data": str(i)}}).encode() for i in range(6))
    assert len({r["partition_id"] for r in results_of(call("POST", rest.records(topic), body)[1])}) == 1


def test_chunked_produce_streams_results_record_by_record(rest):
    topic = f"chunk-{uuid.uuid4().hex[:6]}"
    create_topic(rest.bootstrap, topic, 1)

    async def run():
        next_record = asyncio.Event()

        async def body():
            yield json.dumps({"value": {"type": "STRING", "data": "first"}}).encode()
            await asyncio.wait_for(next_record.wait(), 20)   # only once the first result came back
            yield b'{"value": {"type": "STRING", "data": "sec'
            yield b'ond"}} {"value": {"type": "JSON", "data": [1, 2]}}'
            yield b' {"value": oops}'

        async with aiohttp.ClientSession() as s:
            async with s.post(rest.records(topic), data=body(), headers={"Content-Type": JSON}) as resp:
                assert resp.status == 200 and resp.headers.get("Transfer-Encoding") == "chunked"
                first = json.loads(await resp.content.readline())
                next_record.set()
                rest_lines = [json.loads(line) for line in (await resp.read()).decode().split("\r\n") if line.strip()]
        return [first] + rest_lines

    results = asyncio.run(run())
    assert [r["error_code"] for r in results] == [200, 200, 200, 400]
    assert [r.get("offset") for r in results[:3]] == [0, 1, 2]
    assert "Error processing JSON" in results[3]["message"]
    msgs = read_all(rest.bootstrap, topic, 1, 3)
    assert [m.value() for m in msgs] == [b"first", b"second", b"[1,2]"]


def test_bad_requests_get_confluents_errors_and_write_nothing(rest):
    topic = f"bad-{uuid.uuid4().hex[:6]}"
    create_topic(rest.bootstrap, topic, 2)
    url = rest.records(topic)
    ok = {"value": {"type": "STRING", "data": "x"}}
    # malformed JSON, alone or after a good record: 400, nothing written
    for body in (b'{"value": {"type": "STRING", "data": "x"}', b"not json", json.dumps(ok).encode() + b" {,}",
                 json.dumps(ok).encode() + b" 42", b"\xff\xfe{}", b"[" * 100000 + b"]" * 100000):
        status, err, _ = call("POST", url, body)
        assert status == 400 and err["error_code"] == 400 and "Error processing JSON" in err["message"], (body, err)
    # a body over 4 x message.max.bytes (1 MiB here): 413 before anything is read or written
    big = json.dumps({"value": {"type": "BINARY", "data": b64(b"x" * (1 << 20))}}).encode()
    status, err, _ = call("POST", url, big)
    assert (status, err["error_code"]) == (413, 413)
    assert high_watermarks(rest.bootstrap, topic, 2) == [0, 0]

    # one record the topic refuses (larger than max.message.bytes): 413, the others of the body written
    huge = {"partition_id": 0, "value": {"type": "BINARY", "data": b64(b"y" * 300000)}}
    status, err, _ = call("POST", url, huge)
    assert (status, err) == (413, {"error_code": 413, "message": "The request included a message larger than the "
                                                                 "maximum message size the server can accept."})
    assert high_watermarks(rest.bootstrap, topic, 2) == [0, 0]

    # whole-request errors
    assert call("POST", rest.records("missing"), ok)[:2] == (404, {"error_code": 40401, "message": "Topic not found."})
    assert call("POST", f"{rest.base}/v3/clusters/other/topics/{topic}/records", ok)[:2] == \
        (404, {"error_code": 404, "message": "Cluster other cannot be found."})
    assert call("POST", url, json.dumps(ok).encode(), ctype="text/plain")[:2] == \
        (415, {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"})
    assert call("POST", url, b"  ")[:2] == \
        (422, {"error_code": 422 * 100 + 6, "message": "Payload error. Request body is empty. Data is required."})
    # one bad record: its error, with its HTTP status
    for record, code in (({"partition_id": 5, **ok}, 40402), ({"partition_id": -1, **ok}, 40402),
                         ({"partition_id": "0", **ok}, 400), ({"value": {"type": "BINARY", "data": "%%"}}, 400),
                         ({"value": {"type": "AVRO", "data": 1}}, 400), ({"value": {"data": "no type"}}, 400),
                         ({"value": {"type": 5}}, 400), ({"value": {"type": "STRING", "data": 5}}, 400),
                         ({"headers": {"a": "b"}, **ok}, 400), ({"headers": [{"value": "AA=="}], **ok}, 400),
                         ({"timestamp": "yesterday", **ok}, 400), ({"timestamp": 12, **ok}, 400),
                         ([ok], 400), ({"value": "plain"}, 400)):
        status, err, _ = call("POST", url, record)
        assert (status, err["error_code"]) == (code // 100 if code > 1000 else code, code), (record, err)
        assert err["message"]
    assert high_watermarks(rest.bootstrap, topic, 2) == [0, 0]
    # in a body of several, a bad record gets its error and the good ones are written (HTTP 200)
    body = json.dumps(ok).encode() + json.dumps({"partition_id": 9, **ok}).encode() + json.dumps(ok).encode()
    status, text, _ = call("POST", url, body)
    assert status == 200 and [r["error_code"] for r in results_of(text)] == [200, 40402, 200]
    assert sum(high_watermarks(rest.bootstrap, topic, 2)) == 2


# ------------------------------------------------------------------------------------------------
# v2 consumer instances
# ------------------------------------------------------------------------------------------------

def _lag(rest: Rest, group: str):
    status, summary, _ = call("GET", rest.v3(f"/consumer-groups/{group}/lag-summary"))
    assert status == 200, summary
    status, lags, _ = call("GET", rest.v3(f"/consumer-groups/{group}/lags"))
    assert status == 200, lags
    return summary, {(x["topic_name"], x["partition_id"]): x for x in lags["data"]}


def test_subscribe_read_commit_and_lag(rest):
    topic, group = f"sub-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(rest.bootstrap, topic, 2)
    producer = ck.Producer({"bootstrap.servers": rest.bootstrap})
    sent = {}
    for i in range(10):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 2)
        sent[(f"k{i}".encode())] = (f"v{i}".encode(), i % 2)
    assert producer.flush(30) == 0
    assert call("GET", rest.v3(f"/consumer-groups/{group}/lag-summary"))[0] == 404   # nothing committed yet

    uri = rest.consumer(group, name="c1", format="binary", **{"auto.offset.reset": "earliest",
                                                               "auto.commit.enable": "false"})
    assert call("POST", f"{uri}/subscription", {"topics": [topic]}, V2)[0] == 204
    assert call("GET", f"{uri}/subscription")[1] == {"topics": [topic]}
    got = rest.read_until(uri, 10)
    assert {base64.b64decode(r["key"]): (base64.b64decode(r["value"]), r["partition"]) for r in got} == sent
    assert all(r["topic"] == topic for r in got)
    assert sorted((p["topic"], p["partition"]) for p in call("GET", f"{uri}/assignments")[1]["partitions"]) == \
        [(topic, 0), (topic, 1)]
    assert call("POST", f"{uri}/offsets/", None, V2)[:2] == (200, [])       # commit what was read

    # the commits, as confluent-kafka sees them, and no lag
    c = ck.Consumer({"bootstrap.servers": rest.bootstrap, "group.id": group})
    assert [tp.offset for tp in c.committed([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], 10)] == [5, 5]
    summary, lags = _lag(rest, group)
    assert (summary["total_lag"], summary["max_lag"]) == (0, 0)
    assert lags[(topic, 0)]["current_offset"] == 5 and lags[(topic, 0)]["log_end_offset"] == 5
    assert lags[(topic, 1)]["client_id"] == "c1" and lags[(topic, 1)]["consumer_id"]

    # more records: the lag rises, then falls to 0 once the REST consumer commits
    for i in range(7):
        producer.produce(topic, b"more", partition=1 if i < 5 else 0)
    assert producer.flush(30) == 0
    summary, lags = _lag(rest, group)
    assert (summary["total_lag"], summary["max_lag"]) == (7, 5)
    assert (summary["max_lag_topic_name"], summary["max_lag_partition_id"], summary["max_lag_client_id"]) == \
        (topic, 1, "c1")
    assert (lags[(topic, 0)]["lag"], lags[(topic, 1)]["lag"]) == (2, 5)
    assert lags[(topic, 1)]["log_end_offset"] == 10
    assert len(rest.read_until(uri, 7)) == 7
    assert _lag(rest, group)[0]["total_lag"] == 7                            # read, not committed
    assert call("POST", f"{uri}/offsets", None, V2)[0] == 200
    summary, lags = _lag(rest, group)
    assert summary["total_lag"] == 0 and lags[(topic, 1)]["current_offset"] == 10
    status, one, _ = call("GET", rest.v3(f"/consumer-groups/{group}/lags/{topic}/partitions/1"))
    assert status == 200 and one["kind"] == "KafkaConsumerLag" and one["lag"] == 0

    # explicit offsets: the REST Proxy commits offset + 1 (the last record consumed)
    assert call("POST", f"{uri}/offsets", {"offsets": [{"topic": topic, "partition": 0, "offset": 2}]}, V2)[0] == 200
    assert c.committed([ck.TopicPartition(topic, 0)], 10)[0].offset == 3
    status, committed, _ = call("GET", f"{uri}/offsets", {"partitions": [{"topic": topic, "partition": 0},
                                                                        {"topic": topic, "partition": 1}]}, V2)
    assert status == 200 and [(o["partition"], o["offset"]) for o in committed["offsets"]] == [(0, 3), (1, 10)]
    c.close()

    # the instance goes away with DELETE
    assert call("DELETE", uri)[0] == 204
    assert call("GET", f"{uri}/records")[:2] == (404, {"error_code": 40403, "message": "Consumer instance not found."})
    assert call("DELETE", uri)[1]["error_code"] == 40403
    assert call("POST", f"{uri}/offsets", None, V2)[1]["error_code"] == 40403
    assert call("GET", f"{rest.base}/consumers/{group}/instances/nobody/assignments")[:2] == \
        (404, {"error_code": 40403, "message": "Consumer instance not found."})
    wait_for(lambda: _lag(rest, group)[1][(topic, 1)]["consumer_id"] == "", 10, what="the member gone")


def test_assign_seek_and_json_format(rest):
    topic, group = f"asg-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(rest.bootstrap, topic, 2)
    body = b"".join(json.dumps({"partition_id": 1, "key": {"type": "JSON", "data": {"i": i}},
                                "value": {"type": "JSON", "data": [i, "x"]}}).encode() for i in range(5))
    assert call("POST", rest.records(topic), body)[0] == 200
    producer = ck.Producer({"bootstrap.servers": rest.bootstrap})
    producer.produce(topic, b"not json", partition=0)
    assert producer.flush(30) == 0

    uri = rest.consumer(group, name="j", format="json", **{"auto.commit.enable": "false"})
    assert call("POST", f"{uri}/assignments", {"partitions": [{"topic": topic, "partition": 1}]}, V2)[0] == 204
    assert call("GET", f"{uri}/assignments")[1] == {"partitions": [{"topic": topic, "partition": 1}]}
    # latest by default: nothing yet; then from the beginning
    assert call("GET", f"{uri}/records?timeout=200", accept="application/vnd.kafka.json.v2+json")[1] == []
    assert call("POST", f"{uri}/positions/beginning", {"partitions": [{"topic": topic, "partition": 1}]}, V2)[0] == 204
    got = rest.read_until(uri, 5, "json")
    assert [(r["key"], r["value"], r["offset"]) for r in got] == [({"i": i}, [i, "x"], i) for i in range(5)]
    assert call("POST", f"{uri}/positions", {"offsets": [{"topic": topic, "partition": 1, "offset": 3}]}, V2)[0] == 204
    assert [r["offset"] for r in rest.read_until(uri, 2, "json")] == [3, 4]
    assert call("POST", f"{uri}/positions", {"timestamps": [{"topic": topic, "partition": 1,
                                                            "timestamp": "2000-01-01T00:00:00Z"}]}, V2)[0] == 204
    assert rest.read_until(uri, 5, "json")[0]["offset"] == 0
    assert call("POST", f"{uri}/positions/end", {"partitions": [{"topic": topic, "partition": 1}]}, V2)[0] == 204
    assert call("GET", f"{uri}/records?timeout=200")[1] == []
    # max_bytes: the first record that would pass it waits for the next read
    assert call("POST", f"{uri}/positions/beginning", {"partitions": [{"topic": topic, "partition": 1}]}, V2)[0] == 204
    assert len(call("GET", f"{uri}/records?timeout=2000&max_bytes=30")[1]) == 2   # 14 bytes of key and value each
    # a commit as a non-member (assign mode), seen by confluent-kafka
    assert call("POST", f"{uri}/offsets", {"offsets": [{"topic": topic, "partition": 1, "offset": 4,
                                                        "metadata": "m"}]}, V2)[0] == 200
    c = ck.Consumer({"bootstrap.servers": rest.bootstrap, "group.id": group})
    assert c.committed([ck.TopicPartition(topic, 1)], 10)[0].offset == 5
    c.close()
    assert call("GET", f"{uri}/offsets", {"partitions": [{"topic": topic, "partition": 1}]}, V2)[1] == \
        {"offsets": [{"topic": topic, "partition": 1, "offset": 5, "metadata": "m"}]}

    # errors
    assert call("GET", f"{uri}/records", accept="application/vnd.kafka.binary.v2+json")[:2] == \
        (406, {"error_code": 40601, "message": "The requested embedded data format does not match the "
                                               "deserializer for this consumer instance"})
    status, err, _ = call("POST", f"{uri}/subscription", {"topics": [topic]}, V2)
    assert (status, err["error_code"]) == (409, 40903)
    status, err, _ = call("POST", f"{uri}/positions", {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]}, V2)
    assert (status, err["error_code"]) == (409, 40903) and "No current assignment" in err["message"]
    assert call("POST", f"{uri}/assignments", {"partitions": [{"topic": topic, "partition": -1}]}, V2)[0] == 422
    assert call("POST", f"{uri}/assignments", b"{oops", V2)[:2][0] == 400
    assert call("POST", f"{uri}/assignments", {"partitions": [{"topic": topic, "partition": 1}]}, "text/csv")[0] == 415
    status, err, _ = call("POST", f"{rest.base}/consumers/{group}", {"name": "j"}, V2)
    assert (status, err["error_code"]) == (409, 40902)
    for settings in ({"format": "avro"}, {"format": "xml"}, {"auto.offset.reset": "smallest"},
                     {"auto.commit.enable": "maybe"}):
        status, err, _ = call("POST", f"{rest.base}/consumers/{group}", settings, V2)
        assert (status, err["error_code"]) == (422, 42204), settings
    # a record that is not JSON fails a json-format read at its offset
    assert call("POST", f"{uri}/assignments", {"partitions": [{"topic": topic, "partition": 0}]}, V2)[0] == 204
    assert call("POST", f"{uri}/positions/beginning", {"partitions": [{"topic": topic, "partition": 0}]}, V2)[0] == 204
    status, err, _ = call("GET", f"{uri}/records?timeout=3000")
    assert (status, err["error_code"]) == (500, 50002) and "offset 0" in err["message"]
    assert call("DELETE", f"{uri}/subscription")[0] == 204                 # unsubscribe drops the assignment too
    assert call("GET", f"{uri}/assignments")[1] == {"partitions": []}
    status, err, _ = call("GET", f"{uri}/records")
    assert (status, err["error_code"]) == (409, 40903) and "not subscribed" in err["message"]
    assert call("DELETE", uri)[0] == 204


def test_two_instances_share_the_partitions_of_a_group(rest):
    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(rest.bootstrap, topic, 4)
    a = rest.consumer(group, name="a", **{"auto.offset.reset": "earliest"})
    assert call("POST", f"{a}/subscription", {"topic_pattern": "share-.*"}, V2)[0] == 204

    def assigned(uri):
        return {p["partition"] for p in call("GET", f"{uri}/assignments")[1]["partitions"]}
    wait_for(lambda: assigned(a) == {0, 1, 2, 3}, 20, what="a owning every partition")
    assert topic in call("GET", f"{a}/subscription")[1]["topics"]
    b = rest.consumer(group, name="b", **{"auto.offset.reset": "earliest"})
    assert call("POST", f"{b}/subscription", {"topics": [topic]}, V2)[0] == 204
    wait_for(lambda: len(assigned(a)) == 2 and len(assigned(b)) == 2 and assigned(a) | assigned(b) == {0, 1, 2, 3},
             30, what="the partitions split between a and b")
    producer = ck.Producer({"bootstrap.servers": rest.bootstrap})
    for i in range(8):
        producer.produce(topic, str(i).encode(), partition=i % 4)
    assert producer.flush(30) == 0
    got_a, got_b = rest.read_until(a, 4), rest.read_until(b, 4)
    assert {r["partition"] for r in got_a} == assigned(a) and {r["partition"] for r in got_b} == assigned(b)
    assert call("DELETE", b)[0] == 204
    wait_for(lambda: assigned(a) == {0, 1, 2, 3}, 30, what="a taking b's partitions back")
    # auto commit: what b read was committed when it left, so a does not read it again
    assert call("GET", f"{a}/records?timeout=2000")[:2] == (200, [])
    assert call("DELETE", a)[0] == 204


# ------------------------------------------------------------------------------------------------
# idle instances, shutdown
# ------------------------------------------------------------------------------------------------

def test_idle_instances_expire_and_the_broker_stops_with_a_read_in_flight(tmp_path):
    (port,) = free_ports(1)
    # The idle timeout is long against the gaps between this test's own requests (a loaded machine
    # once stretched one past 1.5 s and the instance expired before its first assignment was read);
    # expiry is then awaited through the group's lag, which does not touch the instance.
    overrides = {"http.listeners": f"HTTP://127.0.0.1:{port}", "consumer.instance.timeout.ms": "6000",
                 "group.consumer.heartbeat.interval.ms": "500",
                 "group.consumer.min.heartbeat.interval.ms": "500"}
    with BrokerProcess(tmp_path / "data", overrides) as b:
        rest = Rest(b.bootstrap, port)
        topic, group = f"idle-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create_topic(b.bootstrap, topic, 1)
        uri = rest.consumer(group, name="sleepy", **{"auto.offset.reset": "earliest"})
        assert call("POST", f"{uri}/subscription", {"topics": [topic]}, V2)[0] == 204
        wait_for(lambda: call("GET", f"{uri}/assignments")[1]["partitions"], 20, what="an assignment")
        assert call("GET", f"{uri}/records?timeout=100")[0] == 200     # position 0, committed on close
        # idle: it commits its position and leaves the group, and the instance is gone
        def gone():
            status, lags, _ = call("GET", rest.v3(f"/consumer-groups/{group}/lags"))
            return status == 200 and lags["data"][0]["consumer_id"] == ""
        wait_for(gone, 30, what="the idle member gone")
        assert call("GET", f"{uri}/records")[1]["error_code"] == 40403
        assert _lag(rest, group)[0]["total_lag"] == 0

        busy = rest.consumer(group, name="busy")
        assert call("POST", f"{busy}/assignments", {"partitions": [{"topic": topic, "partition": 0}]}, V2)[0] == 204
        outcome = {}

        def long_read():
            try:
                outcome["read"] = call("GET", f"{busy}/records?timeout=20000", timeout=40)[0]
            except Exception as e:   # the connection closed by the stopping broker
                outcome["read"] = type(e).__name__
        reader = threading.Thread(target=long_read)
        reader.start()
        time.sleep(1.0)
        t0 = time.time()
        assert b.stop() == 0
        assert time.time() - t0 < 15
        reader.join(30)
        assert "read" in outcome


# ------------------------------------------------------------------------------------------------
# a cluster
# ------------------------------------------------------------------------------------------------

def test_three_nodes_any_node_serves_any_partition_and_group(tmp_path):
    cluster = Cluster(tmp_path, 3)
    ports = with_http_listeners(cluster)
    with cluster:
        topic, group = f"tri-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 3, replica_assignment=[[1, 2], [2, 3], [3, 1]])])[topic].result(15)
        rests = [Rest(cluster.bootstrap, p) for p in ports]
        assert len({r.cluster for r in rests}) == 1
        wait_for(lambda: all(call("GET", r.v3(f"/topics/{topic}"))[0] == 200 for r in rests), 20,
                 what="every node knowing the topic")
        leaders = {}
        for p in range(3):
            _, part, _ = call("GET", rests[0].v3(f"/topics/{topic}/partitions/{p}"))
            leaders[p] = int(part["leader"]["related"].rsplit("/", 1)[1])
        assert leaders == {0: 1, 1: 2, 2: 3}
        # node 1 produces to every partition (two of them led elsewhere)
        body = b"".join(json.dumps({"partition_id": i % 3, "value": {"type": "STRING", "data": str(i)}}).encode()
                        for i in range(9))
        status, text, _ = call("POST", rests[0].records(topic), body)
        assert status == 200 and [r["error_code"] for r in results_of(text)] == [200] * 9
        # node 2 hosts a consumer whatever node coordinates the group; node 3 reports its lag
        uri = rests[1].consumer(group, name="c", **{"auto.offset.reset": "earliest", "auto.commit.enable": "false"})
        assert call("POST", f"{uri}/subscription", {"topics": [topic]}, V2)[0] == 204
        got = rests[1].read_until(uri, 9)
        assert sorted(int(base64.b64decode(r["value"])) for r in got) == list(range(9))
        assert call("POST", f"{uri}/offsets", None, V2)[0] == 200
        for r in rests:
            summary, lags = _lag(r, group)
            assert summary["total_lag"] == 0 and {tp: x["current_offset"] for tp, x in lags.items()} == \
                {(topic, p): 3 for p in range(3)}
        assert call("POST", rests[2].records(topic), {"partition_id": 0, "value": {"type": "STRING", "data": "x"}})[0] == 200
        wait_for(lambda: _lag(rests[2], group)[0]["total_lag"] == 1, 10, what="lag 1 seen from node 3")
        assert call("DELETE", uri)[0] == 204
        # auto.create.topics.enable (the default): producing to a new topic creates it, as the Java
        # producer behind the REST Proxy makes the broker do
        status, r, _ = call("POST", rests[2].records(f"new-{topic}"), {"value": {"type": "STRING", "data": "x"}})
        assert status == 200 and r["offset"] == 0
        assert call("POST", rests[2].records("bad!name"), {"value": {"type": "STRING", "data": "x"}})[:2] == \
            (404, {"error_code": 40401, "message": "Topic not found."})
