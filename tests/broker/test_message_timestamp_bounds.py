"""Message timestamp bounds on the wire, as Kafka 4.3.1 answers them (KIP-937, finished in 4.0).

``message.timestamp.after.max.ms`` defaults to one hour (``log.message.timestamp.after.max.ms``),
``message.timestamp.before.max.ms`` stays Long.MAX_VALUE, and ``message.timestamp.difference.max.ms``
is no topic config any more. A CreateTime record more than an hour ahead of the broker's clock is
INVALID_TIMESTAMP (32) naming it by its batch index; a topic override widens the bound. The answers
here are those a probe of Kafka 4.3.1 gave (Produce v9 and v11, DescribeConfigs v4, CreateTopics v7,
AlterConfigs v2, IncrementalAlterConfigs v1); tests/clients/test_message_timestamps_reference.py asks
Kafka 4.3.1 the same :func:`scenario`.
"""

from __future__ import annotations

import re
import time
import uuid

from kcompat.protocol import records
from kcompat.protocol.messages.alter_configs import AlterConfigsRequest as ACQ
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CTQ
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DCQ
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IQ
from kcompat.protocol.messages.produce import ProduceRequest as PQ
from kcompat.testing import wire

HOUR = 3_600_000
LONG_MAX = 2**63 - 1
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC, DEFAULT_CONFIG = 1, 5
AFTER, BEFORE = "message.timestamp.after.max.ms", "message.timestamp.before.max.ms"
DIFFERENCE = "message.timestamp.difference.max.ms"
REJECTED = "One or more records have been rejected due to invalid timestamp"
OUT_OF_RANGE = re.compile(r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. "
                          r"The timestamp should be within \[(-?\d+), (-?\d+)\]")


def _java_long(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def create(addr: str, name: str, configs: dict[str, str] | None = None):
    """CreateTopics v7 of one single-partition topic: (error code, message, its timestamp configs)."""
    r = wire.call(addr, CTQ(topics=[CTQ.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1,
        configs=[CTQ.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=10000), 7)
    (t,) = r.topics
    return t.error_code, t.error_message, sorted((c.name, c.value, c.config_source) for c in t.configs
                                                 if c.name.startswith("message.timestamp."))


def describe(addr: str, resource_type: int, name: str, keys: list[str] | None = None) -> dict:
    """DescribeConfigs v4 with synonyms: {config: (value, source, read only, synonyms)} of the
    timestamp bounds (entry order is not compared: kcompat sorts by name)."""
    r = wire.call(addr, DCQ(resources=[DCQ.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                                   configuration_keys=keys)],
                            include_synonyms=True), 4)
    (res,) = r.results
    assert (res.error_code, res.error_message) == (0, ""), res   # Kafka: the message's default, not null
    return dict(sorted((c.name, (c.value, c.config_source, c.read_only, [(s.name, s.value, s.source)
                                                                          for s in c.synonyms]))
                       for c in res.configs if "timestamp.after" in c.name or "timestamp.before" in c.name
                       or "timestamp.difference" in c.name))


def incremental(addr: str, topic: str, name: str, op: int, value: str | None):
    r = wire.call(addr, IQ(resources=[IQ.AlterConfigsResource(resource_type=TOPIC, resource_name=topic, configs=[
        IQ.AlterableConfig(name=name, config_operation=op, value=value)])]), 1)
    (x,) = r.responses
    return x.error_code, x.error_message


def alter(addr: str, topic: str, configs: dict[str, str]):
    r = wire.call(addr, ACQ(resources=[ACQ.AlterConfigsResource(resource_type=TOPIC, resource_name=topic, configs=[
        ACQ.AlterableConfig(name=k, value=v) for k, v in configs.items()])]), 2)
    (x,) = r.responses
    return x.error_code, x.error_message


def produce(addr: str, topic: str, offsets_ms: list[int], version: int, after_ms: int):
    """Produce one batch of records stamped now + each offset (ms) to partition 0; returns
    (error code, error message, [(batch index, message with its numbers checked and replaced)])."""
    start = int(time.time() * 1000)
    stamps = [start + d for d in offsets_ms]
    batch = records.build_batch([(ts, b"k%d" % i, b"v", ()) for i, ts in enumerate(stamps)])
    deadline = time.monotonic() + 30
    while True:   # until the new topic's leader is known
        r = wire.call(addr, PQ(acks=-1, timeout_ms=10000, topic_data=[PQ.TopicProduceData(
            name=topic, partition_data=[PQ.PartitionProduceData(index=0, records=batch)])]), version)
        p = r.responses[0].partition_responses[0]
        if p.error_code not in (3, 6) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    end = int(time.time() * 1000)
    errors = []
    for index, message in ((e.batch_index, e.batch_index_error_message) for e in p.record_errors):
        m = OUT_OF_RANGE.fullmatch(message)
        assert m, message
        ts, offset, low, high = (int(g) for g in m.groups())
        # the bounds are the broker's now - before (Long.MAX_VALUE: wrapped as Java's long) and now + after
        assert (ts, offset) == (stamps[index], index)
        assert start + after_ms <= high <= end + after_ms and low == _java_long(high - after_ms - LONG_MAX)
        errors.append((index, OUT_OF_RANGE.sub("Timestamp T of message with offset O is out of range. "
                                               "The timestamp should be within [LOW, HIGH]", message)))
    return p.error_code, p.error_message, errors


def scenario(addr: str) -> list:
    """The requests and their answers: [(step, answer)]; topic names replaced."""
    out: list = []
    plain, wide = f"ts-{uuid.uuid4().hex[:8]}", f"ts-wide-{uuid.uuid4().hex[:8]}"
    out.append(("create", create(addr, plain)))
    out.append(("describe topic", describe(addr, TOPIC, plain)))
    out.append(("describe topic, difference asked for", describe(addr, TOPIC, plain, [AFTER, BEFORE, DIFFERENCE])))
    out.append(("describe broker", describe(addr, BROKER, "1")))
    out.append(("create with difference", create(addr, f"ts-d-{uuid.uuid4().hex[:8]}", {DIFFERENCE: "1000"})))
    out.append(("IAC SET difference", incremental(addr, plain, DIFFERENCE, 0, "1000")))
    out.append(("IAC DELETE difference", incremental(addr, plain, DIFFERENCE, 1, None)))
    out.append(("AlterConfigs difference", alter(addr, plain, {DIFFERENCE: "1000"})))
    for v in (9, 11):
        out.append((f"v{v} now+2h", produce(addr, plain, [2 * HOUR], v, HOUR)))
        out.append((f"v{v} now-2h", produce(addr, plain, [-2 * HOUR], v, HOUR)[:2]))
        out.append((f"v{v} now+30min", produce(addr, plain, [HOUR // 2], v, HOUR)[:2]))
        out.append((f"v{v} now, +2h, +3h", produce(addr, plain, [0, 2 * HOUR, 3 * HOUR], v, HOUR)))
    out.append(("create after=3h", create(addr, wide, {AFTER: str(3 * HOUR)})))
    out.append(("describe after=3h", describe(addr, TOPIC, wide, [AFTER])))
    out.append(("now+2h, after=3h", produce(addr, wide, [2 * HOUR], 11, 3 * HOUR)[:2]))
    return [(step, _named(answer, {plain: "T", wide: "W"})) for step, answer in out]


def _named(answer, names: dict[str, str]):
    text = repr(answer)
    for name, label in names.items():
        text = text.replace(name, label)
    return text


def test_timestamp_bounds_answer_as_kafka_4_3_1(broker):
    answers = dict(scenario(broker.bootstrap))
    created = [(AFTER, str(HOUR), DEFAULT_CONFIG), (BEFORE, str(LONG_MAX), DEFAULT_CONFIG),
               ("message.timestamp.type", "CreateTime", DEFAULT_CONFIG)]
    assert answers["create"] == repr((0, None, created))
    topic = {AFTER: (str(HOUR), DEFAULT_CONFIG, False, [("log." + AFTER, str(HOUR), DEFAULT_CONFIG)]),
             BEFORE: (str(LONG_MAX), DEFAULT_CONFIG, False, [("log." + BEFORE, str(LONG_MAX), DEFAULT_CONFIG)])}
    assert answers["describe topic"] == answers["describe topic, difference asked for"] == repr(topic)
    assert answers["describe broker"] == repr({"log." + k: v[:3] + (v[3],) for k, v in topic.items()})
    unknown = f"Unknown topic config name: {DIFFERENCE}"
    assert answers["create with difference"] == repr((40, unknown, []))
    assert answers["IAC SET difference"] == answers["AlterConfigs difference"] == repr((40, unknown))
    assert answers["IAC DELETE difference"] == repr((0, None))
    for v in (9, 11):
        message = "Timestamp T of message with offset O is out of range. The timestamp should be within [LOW, HIGH]"
        assert answers[f"v{v} now+2h"] == repr((32, REJECTED, [(0, message)]))
        assert answers[f"v{v} now-2h"] == repr((0, None))
        assert answers[f"v{v} now+30min"] == repr((0, None))
        assert answers[f"v{v} now, +2h, +3h"] == repr((32, REJECTED, [(1, message), (2, message)]))
    assert answers["create after=3h"] == repr((0, None, [(AFTER, str(3 * HOUR), DYNAMIC_TOPIC)] + created[1:]))
    assert answers["describe after=3h"] == repr({AFTER: (str(3 * HOUR), DYNAMIC_TOPIC, False, [
        (AFTER, str(3 * HOUR), DYNAMIC_TOPIC), ("log." + AFTER, str(HOUR), DEFAULT_CONFIG)])})
    assert answers["now+2h, after=3h"] == repr((0, None))
