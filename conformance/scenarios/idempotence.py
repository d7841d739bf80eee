"""Idempotent producers: the broker's sequence checks over the wire, and real producers through a proxy
that closes connections after the broker has already appended (so the client retries what is done)."""

from __future__ import annotations

from conformance import wire
from conformance.clients.base import Rec
from conformance.faultproxy import FaultProxy, Faults
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, WIRE, scenario


@scenario("idempotence.sequence-semantics", area="idempotence",
          title="Produce sequence checks: duplicate batch answered with its first offset, gaps refused",
          clients=[WIRE], requires=[22])
def sequence_semantics(ctx):
    topic = ctx.topic()
    with ctx.wire() as conn:
        pid = wire.init_producer_id_retrying(conn)
        ctx.check(pid["error"] == 0, f"InitProducerId: {wire.error_name(pid['error'])}")
        p, e = pid["producer_id"], pid["producer_epoch"]

        def send(seq, n, tag):
            batch = wire.record_batch([b"%s-%d" % (tag, i) for i in range(n)], producer_id=p, producer_epoch=e,
                                      base_sequence=seq)
            res = wire.produce(conn, topic, 0, batch)
            return wire.error_name(res["error"]), res["base_offset"]

        ctx.expect_eq("first_batch_seq0", send(0, 5, b"a"), (wire.error_name(0), 0))
        ctx.expect_eq("duplicate_of_first_batch", send(0, 5, b"a"), (wire.error_name(0), 0))
        ctx.expect_eq("gap_seq10", send(10, 2, b"gap")[0], wire.error_name(45))
        ctx.expect_eq("next_batch_seq5", send(5, 3, b"b"), (wire.error_name(0), 5))
        other = wire.init_producer_id_retrying(conn)
        ctx.check(other["error"] == 0 and other["producer_id"] != p,
                  f"a second InitProducerId: {other} (must be a new producer id)")
        first_seen = wire.produce(conn, topic, 0, wire.record_batch(
            [b"late"], producer_id=other["producer_id"], producer_epoch=other["producer_epoch"], base_sequence=17))
        # a producer id first seen on a partition starts its state there, whatever its sequence
        ctx.expect_eq("first_seen_producer_nonzero_seq", (wire.error_name(first_seen["error"]),
                                                           first_seen["base_offset"]), (wire.error_name(0), 8))
        ctx.expect_eq("log_end_offset", wire.list_offsets(conn, topic, 0, -1)["offset"], 9)


@scenario("idempotence.connection-faults", area="idempotence",
          title="Idempotent producer through dropped connections and lost Produce responses: every record "
                "exactly once, in order", clients=[KAFKA_PYTHON, CONFLUENT, JAVA], requires=[22],
          timeout=180)
def connection_faults(ctx):
    """A proxy in front of the broker swallows about 1 in 15 Produce responses (at most 12) after the
    broker appended the batch, closing the connection; the client must retry, and the broker must
    deduplicate the retries by producer id and sequence. (kcat is not driven here: it exits as soon as
    all broker connections are down, which with one broker is every injected fault.)"""
    topic = ctx.topic()
    n = 2000
    faults = Faults(swallow_response=0.07, api_keys=frozenset({0}), max_faults=12, skip_first=3)
    with FaultProxy(ctx.bootstrap, faults=faults, seed=7) as proxy:
        # ~100-byte records in ~1 KiB batches: a couple of hundred Produce requests to inject faults into
        recs = [Rec(value=b"%d:" % i + b"x" * 96, key=b"k") for i in range(n)]
        extra = {}
        if ctx.case.client == KAFKA_PYTHON:
            extra = {"retries": 50, "max_in_flight_requests_per_connection": 5, "batch_size": 1024}
        elif ctx.case.client == CONFLUENT:
            extra = {"batch.size": 1024, "max.in.flight": 5}
        elif ctx.case.client == JAVA:
            extra = {"batch.size": 1024, "max.in.flight.requests.per.connection": 5}
        ctx.client.produce(topic, recs, acks="all", idempotent=True, bootstrap=proxy.bootstrap, linger_ms=0,
                           **extra)
        ctx.detail(faults_injected=proxy.stats.faults, produce_requests=proxy.stats.by_api.get(0, 0),
                   connections=proxy.stats.connections, responses_rewritten=proxy.stats.rewritten)
        ctx.check(proxy.stats.faults > 0, "no fault was injected (the producer sent too few requests)")
    # read everything the log holds (duplicates included) without waiting for records that never come
    with ctx.wire() as conn:
        log_end = wire.list_offsets(conn, topic, 0, -1)["offset"]
    ctx.detail(log_end_offset=log_end)
    got = ctx.client.fetch(topic, 0, "earliest", log_end, timeout_s=ctx.timeout(20))
    values = [int(r.value.split(b":")[0]) for r in got]
    dups = len(values) - len(set(values))
    missing = n - len(set(values))
    ctx.expect_eq("duplicates", dups, 0)
    ctx.expect_eq("missing", missing, 0)
    ctx.expect_eq("in_order", values == sorted(values), True)
