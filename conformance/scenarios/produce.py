"""Produce with every compression codec and acks level, read back by the same client; size limits.

The records (value ``"i"``, key ``"i % 7"``) are exactly what the Java VerifiableProducer sends, so
all four clients produce the same data. After producing, the batches on the broker are inspected
over the wire: with the topic's default ``compression.type=producer`` the broker must keep the
producer's codec.
"""

from __future__ import annotations

from conformance import wire
from conformance.clients.base import ACKS, CODECS, Rec
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, KCAT, scenario

N = 500
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PRODUCE_CLIENTS = [KAFKA_PYTHON, CONFLUENT, JAVA, KCAT]


def records(n: int = N) -> list[Rec]:
    return [Rec(value=str(i).encode(), key=str(i % 7).encode()) for i in range(n)]


def stored_codecs(ctx, topic: str) -> list[int]:
    """The codec ids of the batches stored for partition 0 (read over the wire)."""
    codecs: list[int] = []
    offset = 0
    with ctx.wire() as conn:
        for _ in range(200):
            res = wire.fetch(conn, topic, 0, offset, max_wait_ms=100)
            batches = wire.batch_headers(res["records"])
            if not batches:
                break
            codecs += [b.attributes & 0x7 for b in batches]
            offset = batches[-1].base_offset + batches[-1].last_offset_delta + 1
            if offset >= res["high_watermark"]:
                break
    return codecs


def _make(codec: str, acks: str):
    def run(ctx):
        topic = ctx.topic()
        recs = records()
        offsets = ctx.client.produce(topic, recs, acks=acks, codec=codec, idempotent=False)
        if acks != "0" and any(o is not None for o in offsets):
            ctx.expect_eq("offsets_in_order", offsets == list(range(N)), True)
        got = ctx.client.fetch(topic, 0, "earliest", N, timeout_s=ctx.timeout(20))
        ctx.expect_eq("records_read", len(got), N)
        ctx.expect_eq("offsets_read", [r.offset for r in got] == list(range(N)), True)
        ctx.expect_eq("values_and_keys", [(r.key, r.value) for r in got] == [(r.key, r.value) for r in recs], True)
        # the client may send a batch uncompressed (librdkafka does when compression does not pay or the
        # broker seems not to support the codec); the broker must store what it got, never recompress
        codecs = sorted(set(stored_codecs(ctx, topic)))
        ctx.detail(stored_codecs=codecs)
        ctx.check(not set(codecs) - {0, CODEC_IDS[codec]}, f"stored batches use codecs {codecs}; the producer "
                                                          f"used {codec} ({CODEC_IDS[codec]})")
        ctx.observe(requested_codec_stored=CODEC_IDS[codec] in codecs)
        ctx.check(CODEC_IDS[codec] in codecs, f"no stored batch uses {codec}: the client sent every batch "
                                              f"uncompressed (stored codec ids {codecs})")

    run.__doc__ = (f"Produce {N} keyed records with compression {codec} and acks={acks}; fetch them back "
                   "and check offsets, keys, values and that the stored batches use the producer's codec.")
    return run


for _codec in CODECS:
    for _acks in ACKS:
        scenario(f"produce.{_codec}.acks-{_acks}", area="produce",
                 title=f"Produce with {_codec} compression, acks={_acks}; read back with the same client",
                 clients=PRODUCE_CLIENTS, slow=not (_acks == "all" or _codec == "none"))(_make(_codec, _acks))


@scenario("produce.message-too-large", area="produce",
          title="A record above the topic's max.message.bytes is refused (MESSAGE_TOO_LARGE)",
          clients=[KAFKA_PYTHON, CONFLUENT])
def too_large(ctx):
    topic = ctx.topic(configs={"max.message.bytes": "2000"})
    big = Rec(value=b"x" * 5000)
    try:
        if ctx.case.client == KAFKA_PYTHON:
            # the client checks max_request_size itself; keep it out of the way so the broker decides
            ctx.client.produce(topic, [big], acks="all", retries=0)
        else:
            ctx.client.produce(topic, [big], acks="all")
        ctx.expect_eq("error", "accepted", "MESSAGE_TOO_LARGE")
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        name = "MESSAGE_TOO_LARGE" if ("MSG_SIZE_TOO_LARGE" in text or "MessageSizeTooLarge" in text
                                       or "MESSAGE_TOO_LARGE" in text) else text[:200]
        ctx.expect_eq("error", name, "MESSAGE_TOO_LARGE")
    ok = ctx.client.produce(topic, [Rec(value=b"y" * 500)], acks="all")
    ctx.expect_eq("small_record_after", ok, [0])


@scenario("produce.wire-max-message-bytes", area="produce",
          title="A batch above max.message.bytes: Produce answers MESSAGE_TOO_LARGE, nothing appended",
          clients=["wire"])
def wire_too_large(ctx):
    topic = ctx.topic(configs={"max.message.bytes": "2000"})
    with ctx.wire() as conn:
        res = wire.produce(conn, topic, 0, wire.record_batch([b"z" * 3000]))
        ctx.expect_eq("produce_error", wire.error_name(res["error"]), wire.error_name(10))
        ctx.expect_eq("log_end_offset", wire.list_offsets(conn, topic, 0, -1)["offset"], 0)


# -- record-level errors (KIP-467) -------------------------------------------------------------------------

KEYLESS = [3, 17, 29, 41, 50, 58, 66, 77, 88, 99]


def _keyless_keys() -> list[bytes | None]:
    return [None if i in KEYLESS else b"key-%d" % i for i in range(100)]


@scenario("produce.record-errors.keyless-compacted", area="produce",
          title="One batch of 100 records to a compacted topic, 10 without a key: INVALID_RECORD with "
                "record_errors naming exactly those 10 (KIP-467); the client fails only them as INVALID_RECORD",
          clients=["wire", CONFLUENT])
def record_errors_keyless(ctx):
    """Kafka's LogValidator reports every keyless record by its batch index; a client then fails those
    records with INVALID_RECORD and the rest of the batch with a different error (librdkafka:
    _INVALID_DIFFERENT_RECORD), and nothing of the batch is stored."""
    topic = ctx.topic(configs={"cleanup.policy": "compact"})
    keys = _keyless_keys()
    values = [b"value-%d" % i for i in range(100)]
    if ctx.case.client == "wire":
        with ctx.wire() as conn:
            res = wire.produce_v8(conn, topic, 0, wire.record_batch(values, keys=keys))
            ctx.expect_eq("produce_error", wire.error_name(res["error"]), wire.error_name(87))
            ctx.expect_eq("record_error_indexes", [i for i, _ in res["record_errors"]], KEYLESS)
            per_record = {(m or "").replace(topic, "<topic>") for _, m in res["record_errors"]}
            ctx.expect_eq("record_error_messages", sorted(per_record),
                          ["Compacted topic cannot accept message without key in topic partition <topic>-0"])
            summary = (res["error_message"] or "").replace(topic, "<topic>")
            ctx.observe(error_message=summary)
            ctx.check(summary.startswith("One or more records have been rejected due to 10 record errors in total"),
                      f"error_message does not summarize the 10 record errors: {summary[:200]!r}")
            ctx.expect_eq("log_end_offset", wire.list_offsets(conn, topic, 0, -1)["offset"], 0)
        return
    import confluent_kafka as ck

    # exactly one batch of the 100 records: the topic's metadata is known before the first record
    # (records queued while librdkafka waits for it become sendable at once, however old, and went
    # out as a batch of the first 98 on a loaded machine), and the batch is sent when it holds 100
    # records (batch.num.messages), the long linger never ending it earlier
    p = ctx.client.producer(**{"linger.ms": 10000, "batch.num.messages": 100, "enable.idempotence": False,
                               "retries": 0})
    p.list_topics(topic, timeout=30)
    reports: dict[int, str] = {}
    for i in range(100):
        p.produce(topic, key=keys[i], value=values[i], partition=0,
                  on_delivery=lambda err, _m, i=i: reports.__setitem__(i, err.name() if err else "NONE"))
    ctx.check(p.flush(30) == 0, "records still undelivered after flush(30)")
    ctx.expect_eq("invalid_record_indexes", sorted(i for i, e in reports.items() if e == "INVALID_RECORD"), KEYLESS)
    others = sorted({e for i, e in reports.items() if i not in KEYLESS})
    ctx.expect_eq("other_records_error", others, [ck.KafkaError(ck.KafkaError._INVALID_DIFFERENT_RECORD).name()])
    with ctx.wire() as conn:
        ctx.expect_eq("log_end_offset", wire.list_offsets(conn, topic, 0, -1)["offset"], 0)


@scenario("produce.record-errors.timestamps", area="produce",
          title="Records outside message.timestamp.before/after.max.ms: INVALID_TIMESTAMP naming each of them "
                "(KIP-467, KIP-937), nothing stored",
          clients=["wire"])
def record_errors_timestamps(ctx):
    """Kafka checks every record's CreateTime against the topic's bounds, also one older than the
    batch's first record, and lists each offender by batch index."""
    topic = ctx.topic(configs={"message.timestamp.before.max.ms": "3600000",
                               "message.timestamp.after.max.ms": "3600000"})
    hour = 3_600_000
    deltas = [0, -2 * hour, 0, 2 * hour, 10]        # records 1 (too old) and 3 (too new)
    with ctx.wire() as conn:
        res = wire.produce_v8(conn, topic, 0, wire.record_batch([b"r%d" % i for i in range(5)],
                                                                timestamp_deltas=deltas))
        ctx.expect_eq("produce_error", wire.error_name(res["error"]), wire.error_name(32))
        ctx.expect_eq("record_error_indexes", [i for i, _ in res["record_errors"]], [1, 3])
        ctx.expect_eq("error_message", res["error_message"],
                      "One or more records have been rejected due to invalid timestamp")
        ctx.check(all("is out of range" in (m or "") for _, m in res["record_errors"]),
                  f"per-record messages: {res['record_errors']}")
        ctx.expect_eq("log_end_offset", wire.list_offsets(conn, topic, 0, -1)["offset"], 0)
