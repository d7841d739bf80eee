"""ApiVersions (every version, KIP-511 downgrade), client version negotiation and Metadata."""

from __future__ import annotations

import re
import time

from conformance import wire
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, KCAT, WIRE, scenario

# APIs every client in the suite needs for plain produce/consume (client-requirements.md section 1).
CORE_APIS = (0, 1, 2, 3, 18)


@scenario("api.apiversions", area="api", title="ApiVersions v0-v4 answer with error 0 and a v0 response header",
          clients=[WIRE])
def apiversions(ctx):
    """Each version is asked on its own connection; v3+ use request header v2. The response header
    must stay v0 (no tagged fields) for every version, so the body must parse exactly."""
    ranges = None
    for v in range(5):
        with ctx.wire() as conn:
            r = conn.request(18, v, wire.api_versions_body(v), flexible=v >= 3, flexible_response=False)
            res = wire.parse_api_versions(r, v)
            if v >= 3:
                r.skip_tags()
            ctx.check(res.error_code == 0, f"ApiVersions v{v}: error {wire.error_name(res.error_code)}")
            ctx.check(r.remaining() == 0, f"ApiVersions v{v}: {r.remaining()} bytes left over after the body "
                                          "(response header must be v0 for every version)")
            ctx.check(18 in res.apis, f"ApiVersions v{v}: key 18 missing from the list")
            ranges = res.apis
    lo, hi = ranges[18]
    ctx.check(lo == 0 and hi >= 3, f"ApiVersions range {lo}-{hi}; clients need v0 and v3+")
    missing = [wire.api_name(k) for k in CORE_APIS if k not in ranges]
    ctx.check(not missing, f"core APIs missing: {missing}")
    ctx.observe(versions_answered=[0, 1, 2, 3, 4])
    ctx.detail(advertised={wire.api_name(k): f"{a}-{b}" for k, (a, b) in sorted(ranges.items())})


@scenario("api.apiversions-kip511", area="api",
          title="An unknown ApiVersions version gets the KIP-511 reply and the connection stays usable",
          clients=[WIRE])
def apiversions_kip511(ctx):
    """ApiVersions v127 (flexible header) must be answered with UNSUPPORTED_VERSION in a v0 body that
    lists the broker's range for key 18; the client then retries on the same connection."""
    with ctx.wire() as conn:
        r = conn.request(18, 127, wire.api_versions_body(3), flexible=True, flexible_response=False)
        res = wire.parse_api_versions(r, 0)
        ctx.expect_eq("error", wire.error_name(res.error_code), wire.error_name(35))
        ctx.check(18 in res.apis, f"KIP-511 reply lacks the ApiVersions range (got keys {sorted(res.apis)})")
        ctx.observe(kip511_lists_key_18=True)
        retry = wire.api_versions(conn, res.apis[18][1] if res.apis[18][1] <= 4 else 3)
        ctx.expect_eq("retry_error_on_same_connection", wire.error_name(retry.error_code), wire.error_name(0))


@scenario("api.version-negotiation", area="api",
          title="The client negotiates versions from ApiVersions and infers a broker release",
          clients=[KAFKA_PYTHON, JAVA])
def version_negotiation(ctx):
    """kafka-python infers a broker release from the advertised ranges; the Java client's
    BrokerApiVersionsCommand prints the usable version of every API."""
    if ctx.case.client == KAFKA_PYTHON:
        c = ctx.client.consumer(group_id=None)
        inferred = c._client.check_version()
        c.close()
        ctx.detail(inferred_broker_version=".".join(map(str, inferred)))
        ctx.observe(inferred_broker_version=".".join(map(str, inferred)))
        ctx.check(tuple(inferred) >= (0, 11), f"kafka-python infers broker {inferred}: no record format v2, "
                                              "no idempotence")
        return
    res = ctx.client.tools.run("kafka.admin.BrokerApiVersionsCommand", ["--bootstrap-server", ctx.bootstrap],
                               timeout=ctx.timeout(60))
    usable = {}
    for name, lo, hi, use in re.findall(r"(\w+)\(\d+\): (\d+) to (\d+) \[usable: (\d+)\]", res.stdout):
        usable[name] = int(use)
    ctx.detail(usable=usable)
    for name in ("Produce", "Fetch", "ListOffsets", "Metadata", "ApiVersions"):
        ctx.check(name in usable, f"the Java client finds no usable {name} version")
    ctx.observe(usable_core={k: usable[k] for k in ("Produce", "Metadata", "ApiVersions", "ListOffsets")})


@scenario("metadata.describe-topic", area="metadata",
          title="Metadata describes a 3-partition topic: leaders, replicas and ISR",
          clients=[KAFKA_PYTHON, CONFLUENT, JAVA, KCAT])
def describe_topic(ctx):
    topic = ctx.topic(partitions=3)
    parts = ctx.client.describe_topic(topic)
    ctx.expect_eq("partitions", sorted(parts), [0, 1, 2])
    with ctx.wire() as conn:
        brokers = wire.metadata(conn, []).brokers
    for p, info in parts.items():
        ctx.check(info["leader"] in brokers, f"partition {p}: leader {info['leader']} is not a broker {sorted(brokers)}")
        ctx.check(info["leader"] in info["replicas"], f"partition {p}: leader not among replicas {info['replicas']}")
        ctx.check(set(info["isr"]) <= set(info["replicas"]) and info["isr"],
                  f"partition {p}: ISR {info['isr']} not a non-empty subset of replicas {info['replicas']}")
    ctx.observe(replicas_per_partition=sorted({len(i["replicas"]) for i in parts.values()}))


@scenario("metadata.list-topics", area="metadata", title="A created topic is listed; a deleted one is not",
          clients=[KAFKA_PYTHON, CONFLUENT, JAVA])
def list_topics(ctx):
    topic = ctx.topic()
    ctx.check(topic in ctx.client.list_topics(), f"{topic} missing from the topic list")
    ctx.admin.delete_topics([topic])
    deadline = time.monotonic() + 15
    while topic in ctx.client.list_topics():
        ctx.check(time.monotonic() < deadline, f"{topic} still listed 15s after deletion")
        time.sleep(0.5)
    ctx.observe(listed_after_create=True, listed_after_delete=False)


@scenario("metadata.unknown-topic", area="metadata",
          title="Metadata for an unknown topic without auto-creation: UNKNOWN_TOPIC_OR_PARTITION",
          clients=[WIRE])
def unknown_topic(ctx):
    topic = ctx.topic(create=False)
    with ctx.wire() as conn:
        md = wire.metadata(conn, [topic], version=4, allow_auto_create=False)
        ctx.expect_eq("error", wire.error_name(md.topics[topic]["error"]), wire.error_name(3))
        time.sleep(0.5)
        again = wire.metadata(conn, [topic], version=4, allow_auto_create=False)
        ctx.expect_eq("error_again", wire.error_name(again.topics[topic]["error"]), wire.error_name(3))


@scenario("metadata.auto-create", area="metadata",
          title="A topic is auto-created on Metadata/produce (auto.create.topics.enable=true, num.partitions)",
          clients=[WIRE, KAFKA_PYTHON, CONFLUENT])
def auto_create(ctx):
    topic = ctx.topic(create=False)
    if ctx.client is None:
        deadline = time.monotonic() + 15
        with ctx.wire() as conn:
            while True:
                md = wire.metadata(conn, [topic], version=4, allow_auto_create=True)
                t = md.topics[topic]
                if t["error"] == 0 and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"].values()):
                    break
                ctx.check(time.monotonic() < deadline, f"not created after 15s: {wire.error_name(t['error'])}")
                time.sleep(0.2)
        ctx.expect_eq("partitions", len(t["partitions"]), 1)
        return
    from conformance.clients.base import Rec

    offsets = ctx.client.produce(topic, [Rec(b"auto")], acks="all")
    ctx.expect_eq("offsets", offsets, [0])
    ctx.expect_eq("partitions", len(ctx.client.describe_topic(topic)), 1)
