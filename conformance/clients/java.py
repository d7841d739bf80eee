"""Driver for the Java kafka-clients, through Apache Kafka's own tools (run with ``java -cp``).

Tools used (Kafka 3.9 class names):

- produce: ``org.apache.kafka.tools.VerifiableProducer`` (values ``"0".."n-1"``, repeating keys; one
  JSON event per acknowledged record with its offset), or ``kafka.tools.ConsoleProducer`` when
  records carry headers;
- fetch: ``org.apache.kafka.tools.consumer.ConsoleConsumer`` with ``--partition/--offset`` (assign);
- offsets: ``org.apache.kafka.tools.GetOffsetShell`` (AdminClient listOffsets);
- admin: ``org.apache.kafka.tools.TopicCommand``, ``kafka.admin.ConfigCommand``,
  ``org.apache.kafka.tools.DeleteRecordsCommand``,
  ``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand``;
- groups: ``org.apache.kafka.tools.VerifiableConsumer`` (JSON events: assignments, records,
  commits);
- loss/duplicate checks, exactly-once copying and performance: see the scenario modules.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import zipfile
from pathlib import Path

from conformance import procs
from conformance.clients import tool_server
from conformance.clients.base import Consumed, Driver, GroupRun, Rec, Unsupported
from conformance.clients.members import Member
from conformance.model import CaseFailure, Prerequisite
from conformance.reference import java_command

TOOLS_LOG4J = """log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

ACKS = {"0": "0", "1": "1", "all": "-1"}
ASSIGNORS = {"range": "org.apache.kafka.clients.consumer.RangeAssignor",
             "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
             "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}
_CONSOLE_LINE = re.compile(r"^(CreateTime|LogAppendTime|NO_TIMESTAMP):?(-?\d*)\tPartition:(\d+)\tOffset:(\d+)\t"
                           r"(.*?)\t(.*?)\t(.*)$")


# Tools Kafka 4.0 moved from the Scala core (kafka_2.13-*.jar) to the Java tools module under
# new class names; the old names are what Kafka 3.x ships. JavaTools runs whichever the jars have.
MOVED_IN_KAFKA_4 = {"kafka.tools.ConsoleProducer": "org.apache.kafka.tools.ConsoleProducer",
                    "kafka.admin.BrokerApiVersionsCommand": "org.apache.kafka.tools.BrokerApiVersionsCommand"}


@functools.lru_cache(maxsize=None)
def _has_class(lib: Path, name: str) -> bool:
    """Whether a Kafka jar in ``lib`` holds the class ``name``."""
    entry = name.replace(".", "/") + ".class"
    for jar in sorted(lib.glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as z:
            try:
                z.getinfo(entry)
                return True
            except KeyError:
                continue
    return False


class JavaTools:
    """Runs Kafka's tools from the resolved jar directory (a tool's Kafka 3.x class name runs its
    Kafka 4 class when the jars are 4.x: :data:`MOVED_IN_KAFKA_4`)."""

    def __init__(self, lib: str, workdir: Path) -> None:
        self.lib = Path(lib)
        self.workdir = Path(workdir)
        self.log4j = self.workdir / "tools-log4j.properties"
        self.log4j.write_text(TOOLS_LOG4J)

    def command(self, main: str, args: list[str], *, heap: str = "512m", quick: bool = True) -> list[str]:
        if main in MOVED_IN_KAFKA_4 and not _has_class(self.lib, main):
            main = MOVED_IN_KAFKA_4[main]
        return java_command(self.lib, main, [str(a) for a in args], heap=heap, log4j=self.log4j, quick=quick)

    def run(self, main: str, args: list[str], *, timeout: float = 60.0, input: str | None = None,
            check: bool = True, heap: str = "512m", quick: bool = True) -> procs.Completed:
        cmd = self.command(main, args, heap=heap, quick=quick)
        res = tool_server.run(cmd, timeout) if input is None and quick else None
        if res is None:   # input to give, a measured run, or no ToolServer free: a JVM of its own
            res = procs.run(cmd, timeout=timeout, input=input)
        if check and not res.ok:
            raise CaseFailure(f"{main.rsplit('.', 1)[-1]} failed: {res.summary()}")
        return res

    def background(self, main: str, args: list[str], *, on_line=None, name: str = "tool", heap: str = "512m",
                   stdin_data: str | None = None) -> procs.Background:
        return procs.Background(self.command(main, args, heap=heap), on_line=on_line,
                                stderr_path=self.workdir / f"{name}.stderr", stdin_data=stdin_data)

    def properties(self, name: str, props: dict[str, str]) -> Path:
        p = self.workdir / f"{name}.properties"
        p.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return p


def json_events(lines: list[str]) -> list[dict]:
    out = []
    for line in lines:
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


class JavaDriver(Driver):
    name = "java"
    caps = frozenset({"produce", "fetch", "headers", "list_offset", "list_offset.max", "admin", "configs",
                      "delete_records", "group", "group.static", "group.cooperative", "idempotence"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        if not ctx.target.java_lib:
            raise Prerequisite(f"Java tools unavailable: {ctx.target.java_error or 'Kafka jars not resolved'}")
        self.tools = JavaTools(ctx.target.java_lib, ctx.workdir)
        self._n = 0

    def version(self) -> str:
        return f"kafka-clients {self.ctx.target.kafka_version}"

    def _file(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    # -- data plane --------------------------------------------------------------------------------------------

    def produce(self, topic, records, *, acks="all", codec="none", idempotent=False, bootstrap=None,
                linger_ms=5, **extra):
        bootstrap = bootstrap or self.bootstrap
        props = {"compression.type": codec, "enable.idempotence": str(bool(idempotent)).lower(),
                 "linger.ms": str(linger_ms), "delivery.timeout.ms": "60000", "request.timeout.ms": "15000"}
        if idempotent:  # VerifiableProducer defaults to retries=0, which idempotence refuses
            props["retries"] = "2147483647"
        props.update({k: str(v) for k, v in extra.items()})
        pattern = verifiable_pattern(records)
        if pattern is None:
            return self._console_produce(topic, records, acks, props, bootstrap)
        n, keys = pattern
        cfg = self.tools.properties(self._file("producer"), props)
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--max-messages", n, "--acks", ACKS[acks],
                "--producer.config", cfg]
        if keys:
            args += ["--repeating-keys", keys]
        res = self.tools.run("org.apache.kafka.tools.VerifiableProducer", args, timeout=self.ctx.timeout(90))
        events = json_events(res.stdout.splitlines())
        errors = [e for e in events if e.get("name") == "producer_send_error"]
        if errors:
            raise CaseFailure(f"VerifiableProducer: {len(errors)} sends failed, first: {errors[0].get('exception')}: "
                              f"{errors[0].get('message')}")
        offsets: dict[int, int | None] = {}
        for e in events:
            if e.get("name") == "producer_send_success":
                offsets[int(e["value"])] = None if acks == "0" or e["offset"] < 0 else e["offset"]
        if len(offsets) != n:
            raise CaseFailure(f"VerifiableProducer acknowledged {len(offsets)} of {n} records")
        return [offsets[i] for i in range(n)]

    def _console_produce(self, topic, records, acks, props, bootstrap):
        if any(r.timestamp_ms is not None or r.partition not in (None, 0) for r in records):
            raise Unsupported("ConsoleProducer cannot set timestamps or partitions")
        with_headers = any(r.headers for r in records)
        if with_headers and not all(r.headers for r in records):
            raise Unsupported("ConsoleProducer parses headers on every line or on none")
        lines = []
        for r in records:
            parts = []
            if with_headers:
                parts.append(",".join(f"{k}:{v.decode()}" for k, v in r.headers))
            parts.append((r.key or b"").decode())
            parts.append((r.value or b"").decode())
            lines.append("\t".join(parts))
        cfg = self.tools.properties(self._file("producer"), props)
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--request-required-acks", ACKS[acks],
                "--producer.config", cfg, "--property", "parse.key=true"]
        if with_headers:
            args += ["--property", "parse.headers=true"]
        self.tools.run("kafka.tools.ConsoleProducer", args, input="\n".join(lines) + "\n",
                       timeout=self.ctx.timeout(90))
        return [None] * len(records)

    def fetch(self, topic, partition, offset, count, *, timeout_s=20.0, isolation="read_uncommitted"):
        args = ["--bootstrap-server", self.bootstrap, "--topic", topic, "--partition", partition,
                "--offset", offset, "--max-messages", count, "--timeout-ms", int(timeout_s * 1000),
                "--isolation-level", isolation]
        for prop in ("print.key", "print.offset", "print.partition", "print.timestamp", "print.headers"):
            args += ["--property", f"{prop}=true"]
        res = self.tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer", args, check=False,
                             timeout=timeout_s + self.ctx.timeout(30))
        out = []
        for line in res.stdout.splitlines():
            m = _CONSOLE_LINE.match(line)
            if not m:
                continue
            ts_kind, ts, part, off, headers, key, value = m.groups()
            hdrs = [] if headers == "NO_HEADERS" else [
                (h.split(":", 1)[0], h.split(":", 1)[1].encode()) for h in headers.split(",") if ":" in h]
            out.append(Consumed(topic, int(part), int(off), None if key == "null" else key.encode(),
                                None if value == "null" else value.encode(), hdrs, int(ts) if ts else None,
                                {"CreateTime": "create", "LogAppendTime": "log_append"}.get(ts_kind)))
        if len(out) < count and "TimeoutException" not in res.stderr and res.returncode not in (0, None):
            raise CaseFailure(f"ConsoleConsumer failed: {res.summary()}")
        return out

    def list_offset(self, topic, partition, spec):
        time_arg = {"earliest": "-2", "latest": "-1", "max": "-3"}.get(spec, str(spec))
        res = self.tools.run("org.apache.kafka.tools.GetOffsetShell",
                             ["--bootstrap-server", self.bootstrap, "--topic-partitions", f"{topic}:{partition}",
                              "--time", time_arg], timeout=self.ctx.timeout(60))
        for line in res.stdout.splitlines():
            parts = line.strip().rsplit(":", 2)
            if len(parts) == 3 and parts[0] == topic and parts[1] == str(partition):
                return int(parts[2]) if parts[2] else None
        return None  # GetOffsetShell prints nothing when no offset matches

    # -- admin ----------------------------------------------------------------------------------------------

    def _topic_cmd(self, *args, check=True):
        return self.tools.run("org.apache.kafka.tools.TopicCommand", ["--bootstrap-server", self.bootstrap, *args],
                              timeout=self.ctx.timeout(60), check=check)

    def create_topic(self, name, partitions, configs=None):
        args = ["--create", "--topic", name, "--partitions", partitions, "--replication-factor", 1]
        for k, v in (configs or {}).items():
            args += ["--config", f"{k}={v}"]
        self._topic_cmd(*args)

    def delete_topic(self, name):
        self._topic_cmd("--delete", "--topic", name)

    def list_topics(self):
        return {line.strip() for line in self._topic_cmd("--list").stdout.splitlines() if line.strip()}

    def describe_topic(self, name):
        out = {}
        for line in self._topic_cmd("--describe", "--topic", name).stdout.splitlines():
            m = re.search(r"Partition:\s*(\d+)\s+Leader:\s*(-?\d+|none)\s+Replicas:\s*([\d,]*)\s+Isr:\s*([\d,]*)", line)
            if m:
                out[int(m.group(1))] = {"leader": -1 if m.group(2) == "none" else int(m.group(2)),
                                        "replicas": [int(x) for x in m.group(3).split(",") if x],
                                        "isr": [int(x) for x in m.group(4).split(",") if x]}
        return out

    def create_partitions(self, name, total):
        self._topic_cmd("--alter", "--topic", name, "--partitions", total)

    def _config_cmd(self, *args):
        return self.tools.run("kafka.admin.ConfigCommand", ["--bootstrap-server", self.bootstrap, "--entity-type",
                                                            "topics", *args], timeout=self.ctx.timeout(60))

    def describe_configs(self, name):
        res = self._config_cmd("--entity-name", name, "--describe", "--all")
        out = {}
        for line in res.stdout.splitlines():
            m = re.match(r"^\s+([a-z0-9.\-]+)=(.*?) sensitive=(true|false) synonyms=\{(.*)\}\s*$", line)
            if m:
                # the first synonym is the entry's own source; none at all: the topic-level default
                src = m.group(4).split(":", 1)[0] if m.group(4) else "DEFAULT"
                value = m.group(2)
                out[m.group(1)] = {"value": None if value == "null" else value,
                                   "source": src.replace("_CONFIG", "")}
        return out

    def alter_configs(self, name, set_, delete=()):
        args = ["--entity-name", name, "--alter"]
        if set_:
            args += ["--add-config", ",".join(f"{k}={v}" for k, v in set_.items())]
        if delete:
            args += ["--delete-config", ",".join(delete)]
        self._config_cmd(*args)

    def delete_records(self, name, partition, before):
        spec = self.ctx.workdir / f"{self._file('delete-records')}.json"
        spec.write_text(json.dumps({"partitions": [{"topic": name, "partition": partition, "offset": before}],
                                    "version": 1}))
        res = self.tools.run("org.apache.kafka.tools.DeleteRecordsCommand",
                             ["--bootstrap-server", self.bootstrap, "--offset-json-file", spec],
                             timeout=self.ctx.timeout(60))
        m = re.search(r"low_watermark:\s*(\d+)", res.stdout)
        if not m:
            raise CaseFailure(f"DeleteRecordsCommand: {procs.tail(res.stdout + res.stderr, 5)}")
        return int(m.group(1))

    # -- groups --------------------------------------------------------------------------------------------------

    def verifiable_consumer_args(self, topic, group, *, assignor="range", instance_id=None,
                                 session_timeout_ms=10000, max_messages=-1, extra=None):
        cfg = self.tools.properties(self._file("consumer"), {"heartbeat.interval.ms": "500", **(extra or {})})
        args = ["--bootstrap-server", self.bootstrap, "--topic", topic, "--group-id", group, "--max-messages",
                max_messages, "--session-timeout", session_timeout_ms, "--assignment-strategy", ASSIGNORS[assignor],
                "--reset-policy", "earliest", "--verbose", "--consumer.config", cfg]
        if instance_id:
            args += ["--group-instance-id", instance_id]
        return args

    def group_consume(self, topic, group, count, *, timeout_s=30.0, commit=True, **options):
        args = self.verifiable_consumer_args(topic, group, max_messages=count)
        res = self.tools.run("org.apache.kafka.tools.VerifiableConsumer", args, timeout=timeout_s + 30, check=False)
        run = GroupRun()
        for e in json_events(res.stdout.splitlines()):
            _apply_event(e, run=run, topic_default=topic)
        if res.timed_out or (res.returncode not in (0, None) and len(run.records) < count):
            run.errors.append(res.summary())
        return run

    def committed(self, group, topic, partitions):
        res = self.tools.run("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                             ["--bootstrap-server", self.bootstrap, "--describe", "--group", group],
                             timeout=self.ctx.timeout(60), check=False)
        out = {p: None for p in partitions}
        for line in res.stdout.splitlines():
            cols = line.split()
            if len(cols) >= 4 and cols[1] == topic and cols[2].isdigit():
                out[int(cols[2])] = int(cols[3]) if cols[3].lstrip("-").isdigit() else None
        if not res.ok and all(v is None for v in out.values()):
            raise CaseFailure(f"ConsumerGroupCommand --describe failed: {res.summary()}")
        return out

    def start_member(self, topic, group, **options) -> "JavaMember":
        return JavaMember(self, topic, group, **options)


def verifiable_pattern(records: list[Rec]) -> tuple[int, int] | None:
    """(n, repeating keys) if ``records`` are exactly what VerifiableProducer sends, else None."""
    if not records or any(r.headers or r.timestamp_ms is not None or r.partition not in (None, 0) for r in records):
        return None
    keys = 0
    if records[0].key is not None:
        distinct = {r.key for r in records}
        keys = len(distinct)
    for i, r in enumerate(records):
        if r.value != str(i).encode():
            return None
        if keys and r.key != str(i % keys).encode():
            return None
        if not keys and r.key is not None:
            return None
    return len(records), keys


def _tps(items) -> list[tuple[str, int]]:
    return sorted((p["topic"], int(p["partition"])) for p in items or [])


def _apply_event(e: dict, *, run: GroupRun | None = None, member: "Member | None" = None,
                 topic_default: str = "") -> None:
    name = e.get("name")
    if name == "partitions_assigned":
        if run is not None:
            run.assignments.append(_tps(e.get("partitions")))
        if member is not None:
            member._assigned(_tps(e.get("partitions")))
    elif name == "partitions_revoked":
        if run is not None:
            run.revocations.append(_tps(e.get("partitions")))
        if member is not None:
            member._revoked(_tps(e.get("partitions")))
    elif name == "record_data":
        rec = Consumed(e.get("topic", topic_default), int(e["partition"]), int(e["offset"]),
                       None if e.get("key") is None else str(e["key"]).encode(),
                       None if e.get("value") is None else str(e["value"]).encode())
        if run is not None:
            run.records.append(rec)
        if member is not None:
            member._consumed([rec])
    elif name == "offsets_committed":
        if not e.get("success", True):
            msg = f"commit failed: {e.get('error')}"
            if run is not None:
                run.errors.append(msg)
            if member is not None:
                member.events.append((0.0, msg, []))
        elif run is not None:
            for o in e.get("offsets") or []:
                run.committed[(o["topic"], int(o["partition"]))] = int(o["offset"])


class JavaMember(Member):
    """A VerifiableConsumer process; its JSON events drive the bookkeeping."""

    def __init__(self, driver: JavaDriver, topic: str, group: str, *, assignor: str = "range",
                 instance_id: str | None = None, session_timeout_ms: int = 10000, commit: bool = True) -> None:
        super().__init__()
        if assignor not in ASSIGNORS:
            raise Unsupported(assignor)
        args = driver.verifiable_consumer_args(topic, group, assignor=assignor, instance_id=instance_id,
                                               session_timeout_ms=session_timeout_ms)
        self.topic = topic
        self._proc = driver.tools.background("org.apache.kafka.tools.VerifiableConsumer", args,
                                             on_line=self._line, name=driver._file("member"))
        self._stopped = threading.Event()

    def _line(self, line: str) -> None:
        for e in json_events([line]):
            _apply_event(e, member=self, topic_default=self.topic)

    def stop(self, leave: bool = True) -> None:
        """SIGTERM runs the tool's shutdown hook (consumer.close(): LeaveGroup for dynamic members)."""
        self._proc.stop(grace=20)
        self._stopped.set()

    def crash(self) -> None:
        self._proc.proc.kill()
        self._proc.stop()
