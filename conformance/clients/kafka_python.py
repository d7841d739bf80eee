"""Driver for kafka-python (pure-Python client): producer, consumer, group consumer, admin, transactions."""

from __future__ import annotations

import threading
import time

from conformance.clients.base import Consumed, Driver, GroupRun, Unsupported
from conformance.clients.members import Member


def subscribe_when_known(consumer, topics: list[str], listener=None, timeout: float = 10.0) -> None:
    """``consumer.subscribe(topics)``, then wait (up to ``timeout`` s, then go on) until the
    consumer's group coordinator has seen metadata with partitions for every topic, so that the
    assignment of its first JoinGroup, if it leads, already covers them.

    Works around a kafka-python 3.0.12 client bug, whatever the broker. A leader whose assignment
    was computed from metadata without the topic rejoins when the metadata arrives (its
    "assignment snapshot" differs from the metadata snapshot); ``need_rejoin()`` turns False as
    soon as that rejoin has computed the new assignment, so when ``poll()``'s timeout expires during
    the SyncGroup round trip the next ``poll()`` never takes the finished join: the member holds no
    partitions and sends no heartbeats until the coordinator drops it after ``session.timeout.ms``
    (45 s), and never rejoins. A single member polling every 5 ms got stuck 14 times in 15;
    kcompat's ``tests/clients/test_groups_sharing.py`` (polls of 200 ms) about once in 20 runs on a
    loaded machine. The snapshot is private state (``_coordinator._metadata_snapshot``): there is no
    public API."""
    if listener is None:
        consumer.subscribe(topics)
    else:
        consumer.subscribe(topics, listener=listener)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snapshot = getattr(getattr(consumer, "_coordinator", None), "_metadata_snapshot", None)
        if snapshot is None or all(snapshot.get(t) for t in topics):
            return
        time.sleep(0.01)


CODEC = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}
ACKS = {"0": 0, "1": 1, "all": "all"}


class KafkaPythonDriver(Driver):
    name = "kafka-python"
    caps = frozenset({"produce", "fetch", "headers", "timestamps", "list_offset", "list_offset.max", "admin",
                      "configs", "delete_records", "group", "group.static", "group.cooperative", "group.commit_metadata",
                      "idempotence", "transactions"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._admin = None
        self._closeables: list = []

    def version(self) -> str:
        import kafka

        return kafka.__version__

    def close(self) -> None:
        for c in reversed(self._closeables):
            try:
                c.close()
            except Exception:
                pass
        self._closeables.clear()
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    # -- factories ---------------------------------------------------------------------------------------

    def producer(self, *, bootstrap: str | None = None, **config):
        from kafka import KafkaProducer

        cfg = {"bootstrap_servers": bootstrap or self.bootstrap, "request_timeout_ms": 15000,
               "max_block_ms": 20000}
        cfg.update(config)
        p = KafkaProducer(**cfg)
        self._closeables.append(p)
        return p

    def consumer(self, **config):
        from kafka import KafkaConsumer

        cfg = {"bootstrap_servers": self.bootstrap, "enable_auto_commit": False, "request_timeout_ms": 20000,
               "check_crcs": True}
        cfg.update(config)
        c = KafkaConsumer(**cfg)
        self._closeables.append(c)
        return c

    @property
    def admin(self):
        if self._admin is None:
            from kafka.admin import KafkaAdminClient

            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=20000)
        return self._admin

    # -- data plane ---------------------------------------------------------------------------------------

    def produce(self, topic, records, *, acks="all", codec="none", idempotent=False, bootstrap=None,
                linger_ms=5, **extra):
        p = self.producer(bootstrap=bootstrap, acks=ACKS[acks], compression_type=CODEC[codec],
                          enable_idempotence=idempotent, linger_ms=linger_ms, **extra)
        futures = [p.send(topic, value=r.value, key=r.key, headers=r.headers or None, partition=r.partition,
                          timestamp_ms=r.timestamp_ms) for r in records]
        p.flush(timeout=30)
        offsets = []
        for f in futures:
            md = f.get(timeout=30)
            offsets.append(None if acks == "0" else md.offset)
        p.close(timeout=10)
        return offsets

    def fetch(self, topic, partition, offset, count, *, timeout_s=20.0, isolation="read_uncommitted"):
        from kafka import TopicPartition

        c = self.consumer(group_id=None, auto_offset_reset="none", isolation_level=isolation,
                          fetch_max_wait_ms=200)
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        if offset == "earliest":
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, offset)
        out: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=300).values():
                out.extend(_consumed(r) for r in recs)
        c.close()
        return out[:count] if count >= 0 else out

    def list_offset(self, topic, partition, spec):
        from kafka import TopicPartition

        tp = TopicPartition(topic, partition)
        if spec == "max":
            from kafka.admin import OffsetSpec

            res = self.admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})
            ot = res[tp]
            return None if ot is None or ot.offset < 0 else ot.offset
        c = self.consumer(group_id=None)
        try:
            if spec == "earliest":
                return c.beginning_offsets([tp], timeout_ms=15000)[tp]
            if spec == "latest":
                return c.end_offsets([tp], timeout_ms=15000)[tp]
            ot = c.offsets_for_times({tp: int(spec)}, timeout_ms=15000)[tp]
            return None if ot is None else ot.offset
        finally:
            c.close()

    # -- admin --------------------------------------------------------------------------------------------

    def create_topic(self, name, partitions, configs=None):
        from kafka.admin import NewTopic

        self.admin.create_topics([NewTopic(name, partitions, 1, topic_configs=dict(configs or {}))],
                                 timeout_ms=20000)

    def delete_topic(self, name):
        self.admin.delete_topics([name], timeout_ms=20000)

    def list_topics(self):
        return set(self.admin.list_topics())

    def describe_topic(self, name):
        (t,) = self.admin.describe_topics([name])
        if t["error_code"]:
            from kafka.errors import for_code

            raise for_code(t["error_code"])(f"describe_topics {name}")
        return {p["partition_index"]: {"leader": p["leader_id"], "replicas": list(p["replica_nodes"]),
                                       "isr": list(p["isr_nodes"])} for p in t["partitions"]}

    def create_partitions(self, name, total):
        from kafka.admin import NewPartitions

        self.admin.create_partitions({name: NewPartitions(total)}, timeout_ms=20000)

    def describe_configs(self, name):
        from kafka.admin import ConfigResource, ConfigResourceType

        res = self.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
        return {k: {"value": v["value"], "source": _source(v["config_source"])}
                for k, v in res["topic"][name].items()}

    def alter_configs(self, name, set_, delete=()):
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

        configs = {k: (AlterConfigOp.SET, v) for k, v in set_.items()}
        configs.update({k: (AlterConfigOp.DELETE, None) for k in delete})
        res = self.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=configs)])
        err = res.get("topic", {}).get(name)
        if err is not None and getattr(err, "errno", 0):
            raise err if isinstance(err, Exception) else RuntimeError(str(err))

    def delete_records(self, name, partition, before):
        from kafka import TopicPartition

        res = self.admin.delete_records({TopicPartition(name, partition): before}, timeout_ms=20000)
        v = res[TopicPartition(name, partition)]
        return v["low_watermark"] if isinstance(v, dict) else getattr(v, "low_watermark", v)

    # -- groups ---------------------------------------------------------------------------------------------

    def group_consume(self, topic, group, count, *, timeout_s=30.0, commit=True, **options):
        c = self.consumer(group_id=group, auto_offset_reset="earliest", session_timeout_ms=10000,
                          heartbeat_interval_ms=1000, **options)
        subscribe_when_known(c, [topic])
        run = GroupRun()
        deadline = time.monotonic() + timeout_s
        while len(run.records) < count and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=300, max_records=count - len(run.records)).values():
                run.records.extend(_consumed(r) for r in recs)
        run.assignments.append(sorted((tp.topic, tp.partition) for tp in c.assignment()))
        if commit and run.records:
            from kafka import OffsetAndMetadata, TopicPartition

            last: dict = {}
            for r in run.records:
                last[(r.topic, r.partition)] = max(last.get((r.topic, r.partition), -1), r.offset)
            c.commit({TopicPartition(t, p): OffsetAndMetadata(o + 1, "", -1) for (t, p), o in last.items()})
            run.committed = {k: o + 1 for k, o in last.items()}
        c.close()
        return run

    def committed(self, group, topic, partitions):
        from kafka import TopicPartition

        res = self.admin.list_group_offsets({group: [TopicPartition(topic, p) for p in partitions]})
        offs = res[group] if group in res else res
        out = {}
        for p in partitions:
            v = offs.get(TopicPartition(topic, p))
            out[p] = None if v is None or v.offset < 0 else v.offset
        return out

    def start_member(self, topic, group, **options) -> "KafkaPythonMember":
        return KafkaPythonMember(self, topic, group, **options)


def _source(s) -> str:
    s = str(getattr(s, "name", s)).upper()
    return s.replace("_CONFIG", "")


def _consumed(r) -> Consumed:
    return Consumed(r.topic, r.partition, r.offset, r.key, r.value,
                    [(k, v) for k, v in (r.headers or [])], r.timestamp,
                    {0: "create", 1: "log_append"}.get(r.timestamp_type))


class KafkaPythonMember(Member):
    """A kafka-python group member polling in a thread."""

    ASSIGNORS = {"range": "RangePartitionAssignor", "roundrobin": "RoundRobinPartitionAssignor",
                 "cooperative-sticky": "CooperativeStickyAssignor"}

    def __init__(self, driver: KafkaPythonDriver, topic: str, group: str, *, assignor: str = "range",
                 instance_id: str | None = None, session_timeout_ms: int = 10000, commit: bool = True) -> None:
        super().__init__()
        from kafka import ConsumerRebalanceListener

        if assignor not in self.ASSIGNORS:
            raise Unsupported(f"kafka-python has no {assignor} assignor")
        assignor_cls = _assignor(self.ASSIGNORS[assignor])
        cfg = dict(group_id=group, auto_offset_reset="earliest", session_timeout_ms=session_timeout_ms,
                   heartbeat_interval_ms=500, partition_assignment_strategy=(assignor_cls,),
                   enable_auto_commit=False, max_poll_interval_ms=60000)
        if instance_id is not None:
            cfg["group_instance_id"] = instance_id
        self.consumer = driver.consumer(**cfg)
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._revoked([(tp.topic, tp.partition) for tp in revoked])

            def on_partitions_assigned(self, assigned):
                member._assigned([(tp.topic, tp.partition) for tp in assigned])

        subscribe_when_known(self.consumer, [topic], listener=Listener())
        self._commit = commit
        self._stop = threading.Event()
        self._leave = True
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self.consumer.poll(timeout_ms=200)
                for recs in batch.values():
                    self._consumed([_consumed(r) for r in recs])
                if batch and self._commit:
                    self.consumer.commit()
        except Exception as e:
            self.errors.append(f"{type(e).__name__}: {e}")

    def stop(self, leave: bool = True) -> None:
        self._stop.set()
        self._thread.join(15)
        try:
            if leave:
                self.consumer.close()
            else:  # a static member going away without LeaveGroup, as after a crash
                self.consumer.close(autocommit=False)
        except Exception as e:
            self.errors.append(f"close: {e}")


def _assignor(name: str):
    import importlib

    for mod in ("kafka.coordinator.assignors.range", "kafka.coordinator.assignors.roundrobin",
                "kafka.coordinator.assignors.cooperative_sticky"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        if hasattr(m, name):
            return getattr(m, name)
    raise Unsupported(f"kafka-python assignor {name} not found")
