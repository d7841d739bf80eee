"""aiokafka 0.14.0 (the asyncio client) against a real kcompat process: round trips in every codec
aiokafka accepts (none, gzip, snappy, lz4, zstd) with keys, null/empty values, headers, explicit
timestamps and several partitions (also read back by confluent-kafka); consecutive send_and_wait
offsets, seek / seek_to_beginning / seek_to_end / offsets_for_times / beginning_offsets / end_offsets
(also after DeleteRecords); two group members sharing a topic, manual commits and a new member
resuming from them; the idempotent producer, committed and aborted transactions under both isolation
levels, a read-process-write copy with send_offsets_to_transaction; the AIOKafkaAdminClient. Records
read are compared field by field with what was acknowledged; the codec, producer id and sequences of
the stored batches are read from the segment files. Each test body is one coroutine run by
``asyncio.run`` under an ``asyncio.wait_for`` deadline.

aiokafka's RecordMetadata gives every record of a batch the first record's timestamp when the broker
answers LogAppendTime -1 (``BatchBuilder.done`` overwrites its loop variable): the expected CreateTime
is the one we sent, and ``md.timestamp`` is checked only for one-record batches (send_and_wait).
"""

from __future__ import annotations

import asyncio
from dataclasses import astuple

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.structs import OffsetAndMetadata

from kcompat.protocol import compression as codecs
from kcompat.protocol import records as rb
from tests.clients.common import (
    COMPRESSIONS, CREATE_TIME, Got, Rec, Sent, assert_same_records, ck_consume, make_records, now_ms, topic_name,
)


def run(coro, timeout: float = 90.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def admin_client(bootstrap: str) -> AIOKafkaAdminClient:
    a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await a.start()
    return a


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    a = await admin_client(bootstrap)
    try:
        resp = await a.create_topics([NewTopic(name, partitions, 1)])
        assert [(e[0], e[1]) for e in resp.topic_errors] == [(name, 0)], resp
    finally:
        await a.close()


async def produce(p: AIOKafkaProducer | str, topic: str, recs: list[Rec], partitions: list[int],
                  **config) -> list[Sent]:
    """Send every record (without waiting in between, so batches hold several) and wait for all,
    with ``p`` or, given a bootstrap address, a producer of its own. Explicit timestamps (see above)."""
    assert all(r.timestamp is not None for r in recs)
    if isinstance(p, str):
        own = AIOKafkaProducer(bootstrap_servers=p, **config)
        await own.start()
        try:
            return await produce(own, topic, recs, partitions)
        finally:
            await own.stop()
    futures = [await p.send(topic, r.value, r.key, partition=part, timestamp_ms=r.timestamp, headers=list(r.headers))
               for r, part in zip(recs, partitions)]
    mds = await asyncio.gather(*futures)
    out = []
    for r, part, md in zip(recs, partitions, mds):
        assert (md.topic, md.partition, md.timestamp_type) == (topic, part, CREATE_TIME), md
        out.append(Sent(topic, md.partition, md.offset, r.key, r.value, tuple(r.headers), r.timestamp))
    return out


def got(m) -> Got:
    return Got(m.topic, m.partition, m.offset, m.key, m.value, tuple((k, v) for k, v in m.headers or ()),
               m.timestamp, m.timestamp_type)


async def read_to(c: AIOKafkaConsumer, ends: dict[TopicPartition, int], timeout: float = 20.0) -> list[Got]:
    """getmany until every partition's position reaches its end; records ordered by (partition, offset)."""
    out: list[Got] = []

    async def loop():
        while not all([await c.position(tp) >= end for tp, end in ends.items()]):
            for tp, msgs in (await c.getmany(*ends, timeout_ms=200)).items():
                out.extend(got(m) for m in msgs if m.offset < ends[tp])
    await asyncio.wait_for(loop(), timeout)
    return sorted(out, key=lambda g: (g.partition, g.offset))


def stored_batches(broker, topic: str, partition: int) -> list[rb.BatchHeader]:
    """The headers of the batches in the partition's segment files, as the broker stored them."""
    segments = sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log"))
    return [h for seg in segments for _, h in rb.iter_batches(seg.read_bytes())]


def by_place(sent: list[Sent]) -> list[Sent]:
    return sorted(sent, key=lambda s: (s.partition, s.offset))


def assert_consecutive(sent: list[Sent], first: dict[int, int] | None = None) -> dict[int, int]:
    """Acknowledged offsets run consecutively per partition (from ``first``, default 0); returns the ends."""
    nxt = dict(first or {})
    for s in sent:
        assert s.offset == nxt.setdefault(s.partition, 0), f"p{s.partition}@{s.offset}, expected {nxt[s.partition]}"
        nxt[s.partition] += 1
    return nxt


async def until(check, timeout: float = 10.0) -> None:
    """Await ``check()`` every 50 ms until it is true, for at most ``timeout`` seconds."""
    async def loop():
        while not await check():
            await asyncio.sleep(0.05)
    await asyncio.wait_for(loop(), timeout)


async def wait_for_assignment(consumers: list[AIOKafkaConsumer], partitions: int) -> list[set[TopicPartition]]:
    """Until the members hold disjoint, non-empty assignments covering every partition."""
    async def split():
        sets = [c.assignment() for c in consumers]
        return all(sets) and sum(map(len, sets)) == partitions == len(set().union(*sets))
    await until(split, 30)
    return [c.assignment() for c in consumers]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_round_trip_every_compression(broker, request, compression):
    topic = topic_name(request)
    base = now_ms() - 600_000
    # CreateTimes mostly increasing, with repeats and steps backwards
    timestamps = [base + 1000 * i - (2500 if i % 7 == 3 else 0) - (1000 if i % 9 == 4 else 0) for i in range(90)]
    recs = make_records(90, f"aio-{compression}", timestamps=timestamps)
    parts = [i % 3 for i in range(90)]

    async def body():
        await create_topic(broker.bootstrap, topic, 3)
        sent = await produce(broker.bootstrap, topic, recs, parts, linger_ms=20,
                             compression_type=None if compression == "none" else compression)
        assert assert_consecutive(sent) == {0: 30, 1: 30, 2: 30}
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, max_partition_fetch_bytes=4096)
        await c.start()
        try:
            c.assign(tps := [TopicPartition(topic, i) for i in range(3)])
            await c.seek_to_beginning(*tps)
            assert await c.end_offsets(tps) == {tp: 30 for tp in tps}
            assert_same_records(by_place(sent), await read_to(c, {tp: 30 for tp in tps}))
        finally:
            await c.stop()
        return sent

    sent = run(body())
    for part in range(3):  # batches of several records, stored in the requested codec
        batches = stored_batches(broker, topic, part)
        assert {h.compression for h in batches} == {codecs.BY_NAME[compression]}
        assert max(h.records_count for h in batches) > 1
    # another client decodes the batches aiokafka compressed the same way
    assert_same_records([s for s in by_place(sent) if s.partition == 1], ck_consume(broker.bootstrap, topic, 1))


def test_offsets_seeks_and_offsets_for_times(broker, request):
    topic = topic_name(request)
    base = now_ms() - 3_600_000
    deltas = [0, 1000, 1000, 500, 3000, 4000, 4000, 2500, 9000, 10_000, 12_000, 11_000]
    recs = [Rec(b"k%d" % i, b"v%d" % i, (("i", b"%d" % i),), base + d) for i, d in enumerate(deltas)]

    async def body():
        await create_topic(broker.bootstrap, topic, 2)
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        a = await admin_client(broker.bootstrap)
        await p.start()
        await c.start()
        try:
            sent: list[Sent] = []
            for part in (0, 1):
                for r in recs:
                    md = await p.send_and_wait(topic, r.value, r.key, partition=part, timestamp_ms=r.timestamp,
                                               headers=list(r.headers))
                    assert (md.partition, md.timestamp, md.timestamp_type) == (part, r.timestamp, CREATE_TIME)
                    sent.append(Sent(topic, part, md.offset, r.key, r.value, r.headers, r.timestamp))
            n = len(recs)
            assert assert_consecutive(sent) == {0: n, 1: n}
            tp0, tp1 = tps = [TopicPartition(topic, i) for i in (0, 1)]
            c.assign(tps)
            assert await c.beginning_offsets(tps) == {tp0: 0, tp1: 0}
            assert await c.end_offsets(tps) == {tp0: n, tp1: n}

            p0 = [s for s in sent if s.partition == 0]
            for target in sorted({base - 1, now_ms(), base + max(deltas) + 1}
                                 | {base + d + e for d in deltas for e in (-1, 0, 1)}):
                res = (await c.offsets_for_times({tp0: target}))[tp0]
                first = next((s for s in p0 if s.timestamp >= target), None)
                expected = None if first is None else (first.offset, first.timestamp)
                assert (None if res is None else (res.offset, res.timestamp)) == expected, f"target {target}"

            off = (await c.offsets_for_times({tp0: base + 4000}))[tp0].offset
            assert off == 5
            for start in (off, 0, 7, n - 1):
                c.seek(tp0, start)
                c.seek(tp1, n)
                assert await c.position(tp0) == start
                assert_same_records(p0[start:], await read_to(c, {tp0: n, tp1: n}))

            await c.seek_to_beginning(tp1)
            assert await c.position(tp1) == 0
            assert got(await asyncio.wait_for(c.getone(tp1), 10)) == Got(*astuple(sent[n]))
            await c.seek_to_end(tp1)
            assert await c.position(tp1) == n
            md = await p.send_and_wait(topic, b"late", b"lk", partition=1, timestamp_ms=base + 20_000)
            assert md.offset == n
            assert got(await asyncio.wait_for(c.getone(tp1), 10)) == Got(topic, 1, n, b"lk", b"late", (),
                                                                         base + 20_000, CREATE_TIME)

            # DeleteRecords moves the log start offset: beginning_offsets and seek_to_beginning follow it
            resp = await a.delete_records({tp0: RecordsToDelete(before_offset=4)})
            assert resp == {tp0: 4}
            assert await c.beginning_offsets([tp0]) == {tp0: 4}
            await c.seek_to_beginning(tp0)
            assert await c.position(tp0) == 4
            assert_same_records(p0[4:], await read_to(c, {tp0: n}))
            assert (await c.offsets_for_times({tp0: base}))[tp0].offset == 4
        finally:
            await c.stop()
            await p.stop()
            await a.close()

    run(body())


def test_group_members_share_partitions_commit_and_a_new_member_resumes(broker, request):
    topic = topic_name(request)
    group = f"g-{topic}"
    tps = [TopicPartition(topic, i) for i in range(4)]
    recs = make_records(80, "group", big_every=0, timestamps=[now_ms() - 60_000 + i for i in range(80)])

    def member():
        return AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest")

    async def body():
        await create_topic(broker.bootstrap, topic, 4)
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        await p.start()
        c1, c2 = member(), member()
        try:
            sent = await produce(p, topic, recs, [i % 4 for i in range(80)])
            assert assert_consecutive(sent) == {i: 20 for i in range(4)}
            await c1.start()
            await c2.start()
            a1, a2 = await wait_for_assignment([c1, c2], 4)
            for c, mine in ((c1, a1), (c2, a2)):  # each member reads exactly its partitions
                assert_same_records(by_place([s for s in sent if TopicPartition(topic, s.partition) in mine]),
                                    await read_to(c, {tp: 20 for tp in mine}))

            committed = {tp: 20 for tp in a1}  # c1 commits its positions
            await c1.commit()
            committed.update({tp: 3 + tp.partition for tp in a2})  # c2 commits explicit, earlier offsets
            await c2.commit({tp: OffsetAndMetadata(3 + tp.partition, "meta") for tp in a2})
            for c, mine in ((c1, a1), (c2, a2)):
                assert {tp: await c.committed(tp) for tp in mine} == {tp: committed[tp] for tp in mine}
            more = await produce(p, topic, make_records(8, "more", timestamps=[now_ms()] * 8), [0, 1, 2, 3] * 2)
            assert assert_consecutive(more, {i: 20 for i in range(4)}) == {i: 22 for i in range(4)}
        finally:
            await c1.stop()
            await c2.stop()
            await p.stop()

        c3 = member()
        await c3.start()
        try:
            await wait_for_assignment([c3], 4)
            assert {tp: await c3.committed(tp) for tp in tps} == committed
            expected = [s for s in sent + more if s.offset >= committed[TopicPartition(topic, s.partition)]]
            assert_same_records(by_place(expected), await read_to(c3, {tp: 22 for tp in tps}))
        finally:
            await c3.stop()

    run(body())


async def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[Got]:
    """Every record of the topic up to its high watermark, read with ``isolation``."""
    tps = [TopicPartition(topic, i) for i in range(partitions)]
    hw = AIOKafkaConsumer(bootstrap_servers=bootstrap)  # read_uncommitted: end_offsets are the high watermarks
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    await hw.start()
    await c.start()
    try:
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        return await read_to(c, await hw.end_offsets(tps))
    finally:
        await c.stop()
        await hw.stop()


def test_idempotent_and_transactional_producers(broker, request):
    topic, ttopic = topic_name(request, "idem"), topic_name(request, "txn")
    recs = make_records(40, "idem", timestamps=[now_ms() - 1000 + i for i in range(40)])

    async def body():
        await create_topic(broker.bootstrap, topic, 2)
        await create_topic(broker.bootstrap, ttopic, 2)
        sent = await produce(broker.bootstrap, topic, recs, [i % 2 for i in range(40)], enable_idempotence=True,
                             compression_type="gzip", linger_ms=5)
        assert assert_consecutive(sent) == {0: 20, 1: 20}
        for part in (0, 1):  # one producer id; each batch's sequence number is its first record's offset
            batches = stored_batches(broker, topic, part)
            assert len({h.producer_id for h in batches}) == 1 and batches[0].producer_id >= 0
            assert [h.base_sequence for h in batches] == [h.base_offset for h in batches]
        for isolation in ("read_committed", "read_uncommitted"):
            assert_same_records(by_place(sent), await read_all(broker.bootstrap, topic, 2, isolation))

        tp = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tid-{ttopic}")
        await tp.start()
        committed, aborted = outcomes = [], []  # by i % 2
        try:
            for i in range(5):  # commit, abort, commit, abort, commit
                batch = make_records(6, f"txn{i}", seed=i, timestamps=[now_ms() + j for j in range(6)])
                await tp.begin_transaction()
                outcomes[i % 2].extend(await produce(tp, ttopic, batch, [j % 2 for j in range(6)]))
                await (tp.abort_transaction() if i % 2 else tp.commit_transaction())
        finally:
            await tp.stop()
        # each transaction wrote 3 records and then its marker to each partition
        for part in (0, 1):
            offs = sorted(s.offset for s in committed + aborted if s.partition == part)
            assert offs == [4 * t + j for t in range(5) for j in range(3)], offs
        assert_same_records(by_place(committed), await read_all(broker.bootstrap, ttopic, 2, "read_committed"))
        assert_same_records(by_place(committed + aborted),
                            await read_all(broker.bootstrap, ttopic, 2, "read_uncommitted"))

    run(body())


def test_read_process_write_with_send_offsets_to_transaction(broker, request):
    src, dst = topic_name(request, "in"), topic_name(request, "out")
    group = f"copy-{src}"
    tps = [TopicPartition(src, i) for i in range(2)]
    recs = make_records(30, "copy", big_every=0, timestamps=[now_ms() - 5000 + i for i in range(30)])

    async def body():
        await create_topic(broker.bootstrap, src, 2)
        await create_topic(broker.bootstrap, dst, 2)
        sent = await produce(broker.bootstrap, src, recs, [i % 2 for i in range(30)])
        c = AIOKafkaConsumer(src, bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed")
        tp = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tid-{dst}")
        await c.start()
        await tp.start()
        try:
            await wait_for_assignment([c], 2)
            inputs = await read_to(c, {t: 15 for t in tps})
            assert_same_records(by_place(sent), inputs)

            async def copy(records: list[Got], commit: bool) -> list[Sent]:
                await tp.begin_transaction()
                out = await produce(tp, dst, [Rec(g.key, (g.value or b"").upper() + b"!", g.headers, g.timestamp)
                                              for g in records], [g.partition for g in records])
                await tp.send_offsets_to_transaction(
                    {TopicPartition(src, g.partition): g.offset + 1 for g in records}, group)
                await (tp.commit_transaction() if commit else tp.abort_transaction())
                return out

            first = [g for g in inputs if g.offset < 5]
            dropped = await copy(first, commit=False)  # aborted: neither the output nor the offsets count
            assert {t: await c.committed(t) for t in tps} == {t: None for t in tps}
            out = await copy(inputs, commit=True)

            async def offsets_committed():  # the group sees them once the commit markers are written
                return {t: await c.committed(t) for t in tps} == {t: 15 for t in tps}
            await until(offsets_committed)
        finally:
            await tp.stop()
            await c.stop()
        assert_same_records(by_place(out), await read_all(broker.bootstrap, dst, 2, "read_committed"))
        assert_same_records(by_place(dropped + out), await read_all(broker.bootstrap, dst, 2, "read_uncommitted"))

    run(body())


async def has_topic(a: AIOKafkaAdminClient, topic: str, present: bool = True) -> bool:
    return (topic in await a.list_topics()) == present


def test_admin_client_topics_and_configs(broker, request):
    topic = topic_name(request)

    async def body():
        a = await admin_client(broker.bootstrap)
        try:
            resp = await a.create_topics([NewTopic(topic, 3, 1, topic_configs={"cleanup.policy": "compact",
                                                                               "retention.ms": "123456"})])
            assert [(e[0], e[1]) for e in resp.topic_errors] == [(topic, 0)]
            resp = await a.create_topics([NewTopic(topic, 1, 1)])
            assert [(e[0], e[1]) for e in resp.topic_errors] == [(topic, 36)]  # TOPIC_ALREADY_EXISTS
            await until(lambda: has_topic(a, topic))  # once the broker's metadata has it
            (desc,) = await a.describe_topics([topic])
            assert (desc["topic"], desc["error_code"], desc["is_internal"]) == (topic, 0, False)
            assert sorted(pt["partition"] for pt in desc["partitions"]) == [0, 1, 2]
            assert all(pt["error_code"] == 0 and pt["leader"] >= 0 for pt in desc["partitions"])
            (cfg,) = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                              {"cleanup.policy": None, "retention.ms": None})])
            (res,) = cfg.resources
            assert (res[0], res[2], res[3]) == (0, ConfigResourceType.TOPIC, topic)
            entries = {e[0]: e[1] for e in res[4]}
            assert entries == {"cleanup.policy": "compact", "retention.ms": "123456"}
            resp = await a.delete_topics([topic])
            assert [(e[0], e[1]) for e in resp.topic_error_codes] == [(topic, 0)]
            await until(lambda: has_topic(a, topic, False))
            resp = await a.delete_topics([topic])
            assert [(e[0], e[1]) for e in resp.topic_error_codes] == [(topic, 3)]  # UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await a.close()

    run(body())
