"""MirrorMaker 2 between two clusters (``--group ecosystem``): replication, checkpoints, failover.

MirrorMaker 2 of Kafka 3.9.1 and of 4.3.1 runs in dedicated mode
(``org.apache.kafka.connect.mirror.MirrorMaker``) from the broker under test (alias ``src<n>``) to
the second cluster the suite starts beside it (``TargetInfo.peer_bootstrap``, alias ``dst<n>``),
with Kafka's defaults except short intervals (topics and groups refreshed, checkpoints emitted and
group offsets synced every second) and replication factor 1. ``offset.lag.max`` keeps its default
(100): with a smaller one MirrorMaker may replace a partition's first, not yet sent offset sync by a
later one (its pending syncs are kept per partition), and a group behind that later sync gets no
checkpoint at all:

1. 200 records are produced to a 2-partition topic on the source; they must all arrive, in order
   per partition, in ``src<n>.<topic>`` on the target;
2. a consumer group reads 120 of them on the source, commits and leaves;
3. the MirrorCheckpointConnector writes checkpoints for the group (``src<n>.checkpoints.internal``
   on the target) and syncs the translated offsets to the group on the target;
4. the group fails over: a consumer of the same group on the target (``auto.offset.reset=latest``,
   so only the translated offsets can make it start in the right place) reads ``src<n>.<topic>``
   until it has every record the group had not consumed on the source; none may be missing. The
   number it reads again is the translation's conservatism (recorded, not compared);
5. MirrorMaker's topic ACL sync calls DescribeAcls on the source: without an authorizer the broker
   answers SECURITY_DISABLED and MirrorMaker logs an INFO line saying so (once per connector
   start); its log must have no ERROR about ACLs.
"""

from __future__ import annotations

import time

from conformance.ecosystem import App, apps_lib, register, wait_for
from conformance.model import CaseFailure, Prerequisite

MIRROR_MAKER = "org.apache.kafka.connect.mirror.MirrorMaker"
RECORDS = 200
CONSUMED_ON_SOURCE = 120
NO_AUTHORIZER_LINE = "No ACL authorizer is configured on the source Kafka cluster"


def read_values(bootstrap: str, topic: str, group: str, want: set[str], timeout: float, *,
                reset: str = "earliest", limit: int | None = None) -> list[str]:
    """Subscribe as ``group`` and read values until ``want`` is covered (or ``limit`` records were
    read), committing synchronously; the consumer then leaves the group."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": reset,
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    got: list[str] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        def more() -> bool:
            return not want <= set(got) if limit is None else len(got) < limit

        while more() and time.monotonic() < deadline:
            for msg in c.consume(100 if limit is None else limit - len(got), 0.5):
                if msg.error() is None:
                    got.append(msg.value().decode())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def committed(admin, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets for ``topic`` (partition -> offset; missing = none)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    req = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    res = admin.list_consumer_group_offsets(req)[group].result(10)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def mirror_case(ctx, version: str) -> None:
    from confluent_kafka.admin import AdminClient

    target = ctx.target.peer_bootstrap
    if not target:
        raise Prerequisite("MirrorMaker 2 needs a second cluster: run --group ecosystem against a broker the "
                           "suite starts (--broker-cmd or the reference), which gets one beside it")
    lib = apps_lib(version)
    topic = ctx.topic(2)
    group = f"{ctx.prefix}-fo"
    tag = ctx.target.run_id + version.replace(".", "")  # the cluster aliases name MirrorMaker's topics
    src, dst = f"src{tag}", f"dst{tag}"
    remote = f"{src}.{topic}"
    tadmin = AdminClient({"bootstrap.servers": target})

    def cleanup() -> None:
        for bootstrap, admin in ((ctx.bootstrap, ctx.admin.admin), (target, tadmin)):
            names = [t for t in admin.list_topics(timeout=10).topics if src in t or dst in t or t == "heartbeats"]
            if names:
                for f in admin.delete_topics(names, operation_timeout=30).values():
                    f.exception(35)
        for admin in (ctx.admin.admin, tadmin):
            for f in admin.delete_consumer_groups([group]).values():
                f.exception(15)

    ctx.on_cleanup(cleanup)
    values = [str(i) for i in range(RECORDS)]
    ctx.setup_produce(topic, values[0::2], partition=0)
    ctx.setup_produce(topic, values[1::2], partition=1)

    props = {
        "clusters": f"{src}, {dst}", f"{src}.bootstrap.servers": ctx.bootstrap,
        f"{dst}.bootstrap.servers": target, f"{src}->{dst}.enabled": "true", f"{dst}->{src}.enabled": "false",
        f"{src}->{dst}.topics": topic, f"{src}->{dst}.groups": group,
        "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "refresh.topics.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1", "emit.heartbeats.interval.seconds": "1",
    }
    path = ctx.workdir / "mm2.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    mm2 = App(lib, ctx.workdir, "mirror-maker", MIRROR_MAKER, [path], heap="768m").start()
    ctx.on_cleanup(mm2.stop)

    mirrored = read_values(target, remote, f"{ctx.prefix}-check", set(values), ctx.timeout(180))
    if set(values) - set(mirrored):
        mm2.require_running()
        raise CaseFailure(f"{len(set(values) - set(mirrored))} of {RECORDS} records not replicated to {remote}")
    for p in (0, 1):
        part = [v for v in mirrored if int(v) % 2 == p]
        ctx.check(part == sorted(part, key=int), f"partition {p} of {remote} out of order")
    for f in tadmin.delete_consumer_groups([f"{ctx.prefix}-check"]).values():
        f.exception(15)

    on_source = read_values(ctx.bootstrap, topic, group, set(), ctx.timeout(60), limit=CONSUMED_ON_SOURCE)
    source_offsets = committed(ctx.admin.admin, group, topic, 2)
    ctx.check(sum(source_offsets.values()) == CONSUMED_ON_SOURCE,
              f"the group committed {source_offsets} on the source, not {CONSUMED_ON_SOURCE} records")

    synced: dict[int, int] = {}

    def offsets_synced() -> bool:
        synced.clear()
        synced.update(committed(tadmin, group, remote, 2))
        return len(synced) == 2 and sum(synced.values()) > 0

    wait_for(ctx, f"the group's offsets translated to {dst} (checkpoints, sync.group.offsets)",
             offsets_synced, 120, [mm2])
    checkpoints = f"{src}.checkpoints.internal"
    ctx.check(checkpoints in tadmin.list_topics(timeout=10).topics, f"no checkpoints topic {checkpoints} on the target")

    remaining = set(values) - set(on_source)
    on_target = read_values(target, remote, group, remaining, ctx.timeout(60), reset="latest")
    missing = remaining - set(on_target)
    if missing:
        raise CaseFailure(f"after failing over, {len(missing)} records the group had not consumed were never "
                          f"read on the target (translated offsets {synced}, source offsets {source_offsets})")
    ctx.observe(replicated=RECORDS, failover_records_missing=0)
    ctx.detail(source_offsets=source_offsets, translated_offsets=synced,
               reread_after_failover=len(set(on_target) & set(on_source)))

    mm2.stop()
    errors = mm2.log_lines("ERROR")
    acl_errors = [ln for ln in errors if "acl" in ln.lower()]
    ctx.detail(mirror_maker_error_lines=len(errors), mirror_maker_errors=[ln[:300] for ln in errors[:5]])
    if acl_errors:
        raise CaseFailure(f"MirrorMaker logged {len(acl_errors)} ERROR lines about ACLs, e.g. {acl_errors[0][:300]}")
    ctx.observe(no_authorizer_info_logged=any(NO_AUTHORIZER_LINE in ln for ln in mm2.log_lines()))


register("mirror.checkpoints-failover", area="mirror", func=mirror_case, doc=__doc__,
         requires=[19, 29, 9, 8], timeout=420.0,
         title="MirrorMaker 2 {version}: replication, checkpoints, offset translation, group failover")
