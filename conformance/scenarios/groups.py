"""Consumer groups (classic protocol): join, commit and resume, rebalances (eager and cooperative), static
members, committed metadata, group administration.

Committed offsets are read back through the set-up admin (confluent-kafka's
``list_consumer_group_offsets``), not through the client under test.
"""

from __future__ import annotations

import time

from conformance.clients.members import wait_all
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, KCAT, scenario

# FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, OffsetCommit, OffsetFetch
GROUP_APIS = (10, 11, 12, 13, 14, 8, 9)
ALL = [KAFKA_PYTHON, CONFLUENT, JAVA, KCAT]


def committed(ctx, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    res = ctx.admin.admin.list_consumer_group_offsets([req], request_timeout=15)[group].result(20)
    out = {p: None for p in partitions}
    for tp in res.topic_partitions:
        out[tp.partition] = None if tp.offset < 0 else tp.offset
    return out


def wait_committed(ctx, group: str, topic: str, expected: dict[int, int | None], timeout: float = 15.0) -> dict:
    """Poll the committed offsets until they equal ``expected`` (offsets committed inside a transaction
    become visible when the coordinator has written the commit marker); returns the last value read."""
    deadline = time.monotonic() + ctx.timeout(timeout)
    while True:
        got = committed(ctx, group, topic, sorted(expected))
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def _member(ctx, topic, group, **options):
    m = ctx.client.start_member(topic, group, **options)
    ctx.on_cleanup(lambda: m.stop())
    return m


@scenario("group.consume-commit-resume", area="groups",
          title="A group member consumes and commits; the next member of the group resumes at the commit",
          clients=ALL, requires=GROUP_APIS, timeout=120)
def commit_resume(ctx):
    topic = ctx.topic()
    ctx.setup_produce(topic, [b"g%03d" % i for i in range(100)])
    group = ctx.group()
    first = ctx.client.group_consume(topic, group, 40, timeout_s=ctx.timeout(40))
    ctx.check(not first.errors, f"first member: {first.errors[:2]}")
    ctx.expect_eq("first_member_offsets", [r.offset for r in first.records], list(range(40)))
    ctx.expect_eq("committed_after_first", committed(ctx, group, topic, [0]), {0: 40})
    second = ctx.client.group_consume(topic, group, 60, timeout_s=ctx.timeout(40))
    ctx.check(not second.errors, f"second member: {second.errors[:2]}")
    ctx.expect_eq("second_member_first_offset", second.records[0].offset if second.records else None, 40)
    ctx.expect_eq("second_member_offsets", [r.offset for r in second.records], list(range(40, 100)))
    ctx.expect_eq("committed_after_second", committed(ctx, group, topic, [0]), {0: 100})


def _split(members, total: int) -> bool:
    parts = [set(m.current()) for m in members]
    union = set().union(*parts)
    return (len(union) == total and sum(len(p) for p in parts) == total
            and all(len(p) == total // len(members) for p in parts))


@scenario("group.rebalance", area="groups",
          title="Eager rebalance: a second member takes half the partitions; when it leaves the first gets all back",
          clients=ALL, requires=GROUP_APIS, timeout=150, slow=True)
def rebalance(ctx):
    topic = ctx.topic(partitions=4)
    group = ctx.group()
    a = _member(ctx, topic, group)
    a.wait_for(lambda m: len(m.current()) == 4, ctx.timeout(40), "the first member to own all 4 partitions")
    b = _member(ctx, topic, group)
    wait_all([a, b], lambda ms: _split(ms, 4), ctx.timeout(60), "a 2+2 split between two members")
    ctx.observe(split=[len(a.current()), len(b.current())])
    t0 = time.monotonic()
    b.stop(leave=True)
    a.wait_for(lambda m: len(m.current()) == 4, ctx.timeout(40), "the first member to get all 4 back after the "
                                                                  "second left")
    ctx.detail(seconds_to_reassign_after_leave=round(time.monotonic() - t0, 1))
    ctx.observe(after_leave=len(a.current()))


@scenario("group.cooperative", area="groups",
          title="Cooperative-sticky rebalance: the first member gives up only the partitions that move",
          clients=ALL, requires=GROUP_APIS, timeout=150, slow=True)
def cooperative(ctx):
    topic = ctx.topic(partitions=4)
    group = ctx.group()
    a = _member(ctx, topic, group, assignor="cooperative-sticky")
    a.wait_for(lambda m: len(m.current()) == 4, ctx.timeout(40), "the first member to own all 4 partitions")
    mark = len(a.events)
    b = _member(ctx, topic, group, assignor="cooperative-sticky")
    wait_all([a, b], lambda ms: _split(ms, 4), ctx.timeout(60), "a 2+2 split between two members")
    revoked = sorted({tp for _, kind, parts in a.events[mark:] if kind in ("revoked", "lost") for tp in parts})
    ctx.expect_eq("partitions_revoked_from_first", len(revoked), 2)
    ctx.expect_eq("first_kept_its_other_partitions", set(a.current()) | set(revoked) == {(topic, p) for p in range(4)},
                  True)


@scenario("group.member-crash", area="groups",
          title="A member that dies without leaving (SIGKILL) is expired after session.timeout.ms; the other "
                "member gets its partitions", clients=[JAVA, KCAT], requires=GROUP_APIS, timeout=150, slow=True)
def member_crash(ctx):
    topic = ctx.topic(partitions=4)
    group = ctx.group()
    a = _member(ctx, topic, group, session_timeout_ms=8000)
    b = _member(ctx, topic, group, session_timeout_ms=8000)
    wait_all([a, b], lambda ms: _split(ms, 4), ctx.timeout(60), "a 2+2 split between two members")
    t0 = time.monotonic()
    b.crash()
    a.wait_for(lambda m: len(m.current()) == 4, ctx.timeout(40),
               "the surviving member to get all 4 partitions after the other one was killed")
    took = time.monotonic() - t0
    ctx.detail(seconds_to_reassign=round(took, 1))
    ctx.check(took >= 4.0, f"partitions moved {took:.1f}s after the kill, well before session.timeout.ms=8000: "
                           "the member cannot have been expired by its session")
    ctx.observe(reassigned_after_session_timeout=True)


@scenario("group.static-member", area="groups",
          title="Static membership: a member restarting with its group.instance.id gets its partitions back "
                "without a rebalance", clients=ALL, requires=[*GROUP_APIS, (11, 5)], timeout=150, slow=True)
def static_member(ctx):
    topic = ctx.topic(partitions=4)
    group = ctx.group()
    ids = [f"{ctx.prefix}-a", f"{ctx.prefix}-b"]
    a = _member(ctx, topic, group, instance_id=ids[0], session_timeout_ms=30000)
    b = _member(ctx, topic, group, instance_id=ids[1], session_timeout_ms=30000)
    wait_all([a, b], lambda ms: _split(ms, 4), ctx.timeout(60), "a 2+2 split between two static members")
    a_parts = a.current()
    b_events = len(b.events)
    a.stop(leave=False)
    a2 = _member(ctx, topic, group, instance_id=ids[0], session_timeout_ms=30000)
    a2.wait_for(lambda m: m.current() == a_parts, ctx.timeout(40), f"the restarted member to get {a_parts} back")
    time.sleep(3)
    later = [(kind, parts) for _, kind, parts in b.events[b_events:] if kind in ("revoked", "assigned", "lost")]
    ctx.expect_eq("other_member_rebalanced", later, [])
    ctx.observe(same_partitions_after_restart=True)


@scenario("group.commit-metadata", area="groups",
          title="OffsetCommit with metadata; OffsetFetch returns the offset and the metadata string",
          clients=[KAFKA_PYTHON, CONFLUENT], requires=(10, 8, 9))
def commit_metadata(ctx):
    topic = ctx.topic()
    group = ctx.group()
    meta = "conformance-metadata-\u00e9"
    if ctx.case.client == KAFKA_PYTHON:
        from kafka import OffsetAndMetadata, TopicPartition

        c = ctx.client.consumer(group_id=group)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(5, meta, -1)})
        res = ctx.client.admin.list_group_offsets({group: [tp]})
        got = res[group][tp] if group in res else res[tp]
        offset, metadata = got.offset, got.metadata
        c.close()
    else:
        from confluent_kafka import TopicPartition

        c = ctx.client.consumer(**{"group.id": group})
        c.commit(offsets=[TopicPartition(topic, 0, 5, metadata=meta)], asynchronous=False)
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=15)
        offset, metadata = tp.offset, tp.metadata
    ctx.expect_eq("committed", (offset, metadata), (5, meta))


@scenario("group.admin", area="groups",
          title="List, describe (state Empty, protocol type consumer) and delete a group with committed offsets",
          clients=[KAFKA_PYTHON, CONFLUENT, JAVA], requires=[*GROUP_APIS, 15, 16, 42], timeout=120)
def group_admin(ctx):
    topic = ctx.topic()
    ctx.setup_produce(topic, [b"a%d" % i for i in range(10)])
    group = ctx.group()
    from conformance.clients.confluent import ConfluentDriver

    run = ConfluentDriver(ctx).group_consume(topic, group, 10, timeout_s=ctx.timeout(40))
    ctx.check(len(run.records) == 10, f"setup: the group consumed {len(run.records)} of 10 records")
    client = ctx.case.client
    if client == CONFLUENT:
        admin = ctx.client.admin
        listed = {g.group_id for g in admin.list_consumer_groups(request_timeout=15).result(20).valid}
        desc = admin.describe_consumer_groups([group], request_timeout=15)[group].result(20)
        state = desc.state.name if hasattr(desc.state, "name") else str(desc.state)
        ptype = "consumer" if not desc.is_simple_consumer_group else "simple"
        deleted = admin.delete_consumer_groups([group], request_timeout=15)[group]
        deleted.result(20)
        after = {g.group_id for g in admin.list_consumer_groups(request_timeout=15).result(20).valid}
    elif client == KAFKA_PYTHON:
        admin = ctx.client.admin
        listed = {g.get("group_id") for g in admin.list_groups()}
        desc = admin.describe_groups([group])
        d = desc[group] if isinstance(desc, dict) else desc[0]
        state = str(d.get("group_state") or d.get("state"))
        ptype = d.get("protocol_type")
        res = admin.delete_groups([group])
        outcome = res.get(group) if isinstance(res, dict) else dict(res).get(group)
        ctx.check(outcome in ("OK", None) or not getattr(outcome, "errno", 1), f"delete_groups: {outcome}")
        after = {g.get("group_id") for g in admin.list_groups()}
    else:
        tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
        base = ["--bootstrap-server", ctx.bootstrap]
        listed = set(ctx.client.tools.run(tool, base + ["--list"], timeout=ctx.timeout(60)).stdout.split())
        out = ctx.client.tools.run(tool, base + ["--describe", "--group", group, "--state"],
                                   timeout=ctx.timeout(60)).stdout
        row = [line.split() for line in out.splitlines() if line.startswith(group)]
        state = row[0][-2] if row else f"unparsed: {out[-200:]}"
        ptype = "consumer"
        ctx.client.tools.run(tool, base + ["--delete", "--group", group], timeout=ctx.timeout(60))
        after = set(ctx.client.tools.run(tool, base + ["--list"], timeout=ctx.timeout(60)).stdout.split())
    ctx.expect_eq("listed", group in listed, True)
    ctx.expect_eq("state", state.upper(), "EMPTY")
    ctx.expect_eq("protocol_type", ptype, "consumer")
    ctx.expect_eq("listed_after_delete", group in after, False)
