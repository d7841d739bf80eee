"""Kafka Streams with exactly-once (``--group ecosystem``): a word count killed and taken over, and
the same word count on the streams rebalance protocol (KIP-1071, :func:`streams_protocol_case`).

``java/WordCount.java`` is the classic word count (lines split into words, re-keyed through a
repartition topic, counted in a state store backed by a changelog topic, counts written to an output
topic) with ``processing.guarantee=exactly_once_v2``, run with the kafka-streams jar of Kafka 3.9.1
and of 4.3.1. One case per release:

1. two instances A and B of one application share the work (2 input partitions: 4 tasks) while the
   suite produces lines continuously;
2. the instance reading input partitions (every transaction of it writes to the repartition
   topic) is killed with SIGKILL while it processes, so a transaction of its is open (observed with
   Kafka's ``kafka-transactions.sh describe``: Ongoing, or already aborting); the suite then writes
   marker lines whose words land on every input and every repartition partition, and the
   **takeover time** is the time from the kill until every marker word's count is in the output
   (read_committed): the other instance has taken the killed one's tasks over, after its session
   timed out and its open transaction was aborted (Streams' EOS ``transaction.timeout.ms`` of 10 s;
   until then the open transaction holds back the last stable offset);
3. the killed instance is restarted on its state directory and rejoins; then input stops and the
   final count of every word in the output must equal the number of times it was produced —
   nothing lost, nothing counted twice.

The instances run with ``session.timeout.ms=6000`` (Kafka's ``group.min.session.timeout.ms``) so the
takeover does not wait for the 45 s default, and ``commit.interval.ms=1000`` (a transaction a second,
open nearly all the time as lines arrive every 10 ms). The takeover time is in ``details.timings`` and the
report's timing table.
"""

from __future__ import annotations

import random
import re
import struct
import threading
import time

from conformance import maven
from conformance.clients.java import JavaTools
from conformance.ecosystem import App, apps_lib, delete_group_when_empty, register, wait_for
from conformance.model import CaseFailure, Prerequisite

PARTITIONS = 2
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "november", "oscar", "papa")
STREAMS_PROPS = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1500", "commit.interval.ms": "1000",
                 "num.stream.threads": "1", "replication.factor": "1"}


def repartition_of(word: str, partitions: int = PARTITIONS) -> int:
    """The partition Kafka's producer picks for key ``word`` (murmur2, as Streams' repartitioning)."""
    from kafka.partitioner.default import murmur2

    return (murmur2(word.encode()) & 0x7FFFFFFF) % partitions


def marker_words(tag: str) -> list[str]:
    """One fresh word per repartition partition."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < PARTITIONS:
        w = f"marker{tag}n{i}"
        found.setdefault(repartition_of(w), w)
        i += 1
    return [found[q] for q in range(PARTITIONS)]


class Instance:
    """One WordCount JVM; ``states`` are (monotonic time, state, the input partitions of its active
    tasks) from its stdout, ``tasks`` the ids of its active tasks when it last became RUNNING.
    ``props`` are its Streams settings (default :data:`STREAMS_PROPS`)."""

    def __init__(self, ctx, lib, name: str, app_id: str, source: str, sink: str, state_dir: str,
                 props: dict[str, str] | None = None) -> None:
        self.states: list[tuple[float, str, list[str]]] = []
        self.tasks: list[str] = []
        self.state_dir = state_dir
        props = STREAMS_PROPS if props is None else props
        self.app = App(lib, ctx.workdir, name, "WordCount.java",
                       [ctx.bootstrap, app_id, source, sink, ctx.workdir / state_dir],
                       stdin="".join(f"{k}={v}\n" for k, v in props.items()) + "\n", on_line=self._line)

    def _line(self, line: str) -> None:
        if line.startswith("STATE "):
            _, state, tasks = (line + " ").split(" ", 2)
            self.states.append((time.monotonic(), state, [t for t in tasks.strip().split(",") if t]))
        elif line.startswith("TASKS"):
            self.tasks = [t for t in line[5:].strip().split(",") if t]

    def start(self) -> "Instance":
        self.app.start()
        return self

    def state(self) -> tuple[str, list[str]]:
        return (self.states[-1][1], self.states[-1][2]) if self.states else ("NONE", [])


class Input:
    """Lines produced continuously (confluent-kafka, idempotent, acks=all) by a thread; ``counts``
    holds the words of every line that was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, seed: int) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 60000})
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        self.lines = 0
        self._lock = threading.Lock()  # delivery callbacks run in whichever thread polls
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _delivered(self, words):
        def cb(err, _msg):
            with self._lock:
                if err is not None:
                    self.errors.append(str(err))
                    return
                self.lines += 1
                for w in words:
                    self.counts[w] = self.counts.get(w, 0) + 1
        return cb

    def send(self, line: str, partition: int | None = None) -> None:
        kw = {} if partition is None else {"partition": partition}
        self.producer.produce(self.topic, line.encode(), on_delivery=self._delivered(line.split()), **kw)
        self.producer.poll(0)

    def _run(self, per_second: int) -> None:
        while not self._stop.is_set():  # one line at a time: the input never pauses
            self.send(" ".join(self._rng.choice(WORDS) for _ in range(5)))
            self._stop.wait(1.0 / per_second)

    def start(self, per_second: int = 100) -> None:
        self._thread = threading.Thread(target=self._run, args=(per_second,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        left = self.producer.flush(60)
        if left or self.errors:
            raise CaseFailure(f"producing input failed: {self.errors[:3] or f'{left} undelivered'}")


class Output:
    """The latest committed count of every word in the output topic (a read_committed consumer
    assigned to every partition, in a thread)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.counts: dict[str, int] = {}
        self.records = 0
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            word = msg.key().decode()
            self.counts[word] = struct.unpack(">q", msg.value())[0]
            self.records += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def transaction_state(ctx, app: App) -> dict:
    """The transactional id of a killed instance's producer (from its log) and its state as Kafka's
    ``kafka-transactions.sh describe`` shows it (``Ongoing`` right after a kill inside a transaction,
    then ``PrepareAbort``/``CompleteAbort`` once the coordinator aborts it on timeout)."""
    found = re.search(r"transactionalId=([^,\]\s]+)", "\n".join(app.log_lines()))
    if found is None:
        return {"transactional_id": None}
    tid = found.group(1)
    res = ctx.client.tools.run("org.apache.kafka.tools.TransactionsCommand",
                               ["--bootstrap-server", ctx.bootstrap, "describe", "--transactional-id", tid],
                               check=False, timeout=ctx.timeout(60))
    rows = [ln.split() for ln in res.stdout.splitlines() if ln.strip()]
    state = (dict(zip(rows[0], rows[1])).get("TransactionState") if len(rows) >= 2 and rows[0]
             else res.summary(3))
    return {"transactional_id": tid, "state": state}


def streams_case(ctx, version: str) -> None:
    lib = apps_lib(version)
    source, sink = ctx.topic(PARTITIONS), ctx.topic(PARTITIONS)
    app_id = f"{ctx.prefix}-app"  # the consumer group; the internal topics' names start with it
    ctx.on_cleanup(lambda: delete_group_when_empty(ctx, app_id))
    ctx.on_cleanup(lambda: ctx.admin.delete_topics(ctx.admin.topics_with_prefix(app_id)))
    a = Instance(ctx, lib, "streams-a", app_id, source, sink, "state-a")
    b = Instance(ctx, lib, "streams-b", app_id, source, sink, "state-b")
    ctx.on_cleanup(lambda: (a.app.stop(), b.app.stop()))
    feed = Input(ctx.bootstrap, source, seed=len(ctx.prefix))
    out = Output(ctx.bootstrap, sink)
    ctx.on_cleanup(out.close)

    a.start()
    wait_for(ctx, "instance A to run", lambda: a.state()[0] == "RUNNING", 90, [a.app])
    feed.start()
    b.start()
    wait_for(ctx, "A and B to share the tasks (both RUNNING, one reading the input)",
             lambda: all(i.state()[0] == "RUNNING" for i in (a, b)) and (a.state()[1] or b.state()[1]), 120,
             [a.app, b.app])
    # the victim reads input partitions: its every transaction writes to the repartition topic
    victim, survivor = (a, b) if a.state()[1] else (b, a)
    victim_partitions = victim.state()[1]
    seen = out.records
    wait_for(ctx, "new counts in the output", lambda: out.records > seen, 60, [a.app, b.app])
    time.sleep(1.5)  # the victim processes a line every ~20 ms, in a transaction committed every second

    victim.app.kill()
    killed = time.monotonic()
    markers = marker_words("a")
    for p in range(PARTITIONS):
        for w in markers:
            feed.send(w, partition=p)
    described: dict = {}  # described beside the takeover, not delaying its measurement
    describe = threading.Thread(target=lambda: described.update(transaction_state(ctx, victim.app)), daemon=True)
    describe.start()
    wait_for(ctx, f"the surviving instance to take over {victim_partitions} (the marker words counted)",
             lambda: all(out.counts.get(w) == PARTITIONS for w in markers), 120, [survivor.app])
    takeover = time.monotonic() - killed
    describe.join(ctx.timeout(60))
    ctx.observe(killed_inside_transaction=described.get("state") in ("Ongoing", "PrepareAbort", "CompleteAbort"))
    ctx.detail(killed_transaction=described, input_partitions_of_killed_instance=victim_partitions,
               timings={"takeover_s": round(takeover, 1)})

    restarted = Instance(ctx, lib, f"{victim.app.name}-restarted", app_id, source, sink, victim.state_dir).start()
    ctx.on_cleanup(restarted.app.stop)
    wait_for(ctx, "the restarted instance to rejoin (RUNNING)",
             lambda: restarted.state()[0] == "RUNNING" and survivor.state()[0] == "RUNNING", 120,
             [restarted.app, survivor.app])
    a, b = restarted, survivor
    time.sleep(2.0)
    feed.stop()
    expected = dict(feed.counts)
    try:
        wait_for(ctx, "the final counts", lambda: out.counts == expected, 90, [a.app, b.app])
    except CaseFailure:
        diff = {w: (out.counts.get(w), n) for w, n in sorted(expected.items()) if out.counts.get(w) != n}
        extra = sorted(set(out.counts) - set(expected))
        raise CaseFailure(f"final counts differ from the input: (counted, produced) {diff}"
                          + (f"; words never produced: {extra}" if extra else "")) from None
    ctx.observe(final_counts_exact=True, words=len(expected))
    ctx.detail(input_lines=feed.lines, restarted_state=a.state()[0])
    for inst in (a, b):
        inst.app.stop()


register("streams.eos-wordcount", area="streams", func=streams_case, doc=__doc__,
         requires=[21, 24, 26, 28], timeout=420.0,
         title="Kafka Streams {version} word count, exactly_once_v2: kill -9, takeover, restart")


# -- the streams rebalance protocol (KIP-1071) ---------------------------------------------------------

STREAMS_PROTOCOL_PROPS = {"group.protocol": "streams", "commit.interval.ms": "500", "num.stream.threads": "1",
                          "replication.factor": "1"}
ALL_TASKS = [f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)]


def set_group_configs(ctx, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET of GROUP configs (KIP-848/KIP-1071 dynamic group configs)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for f in ctx.admin.admin.incremental_alter_configs([res]).values():
        f.result()


STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"   # kafka-streams-groups.sh


def streams_groups_tool(ctx) -> JavaTools:
    """Kafka 4.3.1's tools (``kafka-streams-groups.sh`` is new in Kafka 4.1)."""
    try:
        lib = maven.resolve_kafka("4.3.1", log=lambda _msg: None)
    except maven.ResolveError as e:
        raise Prerequisite(f"Kafka 4.3.1 jars unavailable: {e}") from None
    workdir = ctx.workdir / "tools-4.3.1"
    workdir.mkdir(exist_ok=True)
    return JavaTools(str(lib), workdir)


def described_members(tools, ctx, group: str) -> list[tuple[str, list[str]]]:
    """``kafka-streams-groups.sh --describe --members``: (process id, active task ids) per member,
    from rows like ``<group> <member> <process> <client id> ACTIVE: 0:[0,1]; 1:[0];``."""
    res = tools.run(STREAMS_GROUP_COMMAND, ["--bootstrap-server", ctx.bootstrap, "--describe", "--group", group,
                                            "--members"], timeout=ctx.timeout(120), heap="256m")
    members = []
    for line in res.stdout.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 4 or cols[0] != group:
            continue
        active = line.split("ACTIVE:", 1)[1] if "ACTIVE:" in line else ""
        ids = [f"{sub}_{p}" for sub, parts in re.findall(r"(\w+):\[([\d,]*)\]", active.split("STANDBY:")[0])
               for p in parts.split(",") if p]
        members.append((cols[2], sorted(ids)))
    return sorted(members)


def streams_protocol_case(ctx) -> None:
    """Kafka Streams 4.3.1 with ``group.protocol=streams`` (KIP-1071): the same exactly_once_v2 word
    count, its group coordinated by the broker (StreamsGroupHeartbeat: the broker creates the
    repartition and changelog topics, assigns the four tasks with its sticky assignor).

    1. instance A starts alone and runs every task; lines are produced continuously;
    2. instance B joins: the two share the tasks (A gives tasks up only once it has revoked them);
    3. Kafka 4.3.1's ``kafka-streams-groups.sh`` lists the group and describes both members with
       all four tasks between them;
    4. B is stopped cleanly (it leaves the group): A takes every task over (the **takeover time**);
    5. input stops: the final count of every word equals the number of times it was produced.

    The group's ``streams.initial.rebalance.delay.ms`` is set to 0 (a GROUP config) so the first
    assignment does not wait Kafka's default 3 s for more members."""
    lib = apps_lib("4.3.1")
    source, sink = ctx.topic(PARTITIONS), ctx.topic(PARTITIONS)
    app_id = f"{ctx.prefix}-sp"
    ctx.on_cleanup(lambda: delete_group_when_empty(ctx, app_id))
    ctx.on_cleanup(lambda: ctx.admin.delete_topics(ctx.admin.topics_with_prefix(app_id)))
    set_group_configs(ctx, app_id, {"streams.initial.rebalance.delay.ms": "0"})
    a = Instance(ctx, lib, "streams-sp-a", app_id, source, sink, "state-sp-a", STREAMS_PROTOCOL_PROPS)
    b = Instance(ctx, lib, "streams-sp-b", app_id, source, sink, "state-sp-b", STREAMS_PROTOCOL_PROPS)
    ctx.on_cleanup(lambda: (a.app.stop(), b.app.stop()))
    feed = Input(ctx.bootstrap, source, seed=len(ctx.prefix))
    out = Output(ctx.bootstrap, sink)
    ctx.on_cleanup(out.close)

    started = time.monotonic()
    a.start()
    wait_for(ctx, "instance A to run every task", lambda: a.state()[0] == "RUNNING" and a.tasks == ALL_TASKS, 90,
             [a.app])
    first_run = time.monotonic() - started
    feed.start()
    b.start()
    wait_for(ctx, "A and B to share the tasks",
             lambda: all(i.state()[0] == "RUNNING" and i.tasks for i in (a, b))
             and sorted(a.tasks + b.tasks) == ALL_TASKS, 90, [a.app, b.app])
    ctx.observe(tasks_shared=True)
    ctx.detail(tasks_a=list(a.tasks), tasks_b=list(b.tasks))
    tools = streams_groups_tool(ctx)
    listed = tools.run(STREAMS_GROUP_COMMAND, ["--bootstrap-server", ctx.bootstrap, "--list"],
                       timeout=ctx.timeout(120), heap="256m").stdout.split()
    members = described_members(tools, ctx, app_id)
    ctx.check(app_id in listed, f"kafka-streams-groups.sh --list does not list {app_id}: {listed}")
    ctx.check(len(members) == 2 and sorted(t for _, ts in members for t in ts) == ALL_TASKS,
              f"kafka-streams-groups.sh --describe --members shows {members}, not two members with every task")
    ctx.observe(tool_lists_group=True, tool_describes_two_members_with_every_task=True)
    seen = out.records
    wait_for(ctx, "new counts in the output", lambda: out.records > seen, 60, [a.app, b.app])

    stopped = time.monotonic()
    b.app.stop()   # a clean close: B leaves the group (member epoch -1)
    wait_for(ctx, "A to take every task over", lambda: a.state()[0] == "RUNNING" and a.tasks == ALL_TASKS, 60,
             [a.app])
    takeover = time.monotonic() - stopped
    ctx.observe(takeover_by_remaining_instance=True)
    time.sleep(1.0)
    feed.stop()
    expected = dict(feed.counts)
    try:
        wait_for(ctx, "the final counts", lambda: out.counts == expected, 60, [a.app])
    except CaseFailure:
        diff = {w: (out.counts.get(w), n) for w, n in sorted(expected.items()) if out.counts.get(w) != n}
        raise CaseFailure(f"final counts differ from the input: (counted, produced) {diff}") from None
    ctx.observe(final_counts_exact=True, words=len(expected))
    ctx.detail(input_lines=feed.lines, timings={"first_run_s": round(first_run, 1), "takeover_s": round(takeover, 1)})
    a.app.stop()


def _register_streams_protocol() -> None:
    from conformance.registry import JAVA, scenario

    scenario("streams.protocol-wordcount.kafka-4.3.1", area="streams", clients=[JAVA], group="ecosystem",
             requires=[88, 89], timeout=240.0,
             title="Kafka Streams 4.3.1 word count, group.protocol=streams (KIP-1071): share, leave, take over"
             )(streams_protocol_case)


_register_streams_protocol()
