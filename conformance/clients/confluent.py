"""Driver for confluent-kafka (Python binding of librdkafka): producer, consumer, group member, admin,
transactions."""

from __future__ import annotations

import threading
import time

from conformance.clients.base import Consumed, Driver, GroupRun
from conformance.clients.members import Member

TS_TYPES = {1: "create", 2: "log_append"}


class ConfluentDriver(Driver):
    name = "confluent-kafka"
    caps = frozenset({"produce", "fetch", "headers", "timestamps", "list_offset", "list_offset.max", "admin",
                      "configs", "delete_records", "group", "group.static", "group.cooperative",
                      "group.commit_metadata", "idempotence", "transactions", "describe_cluster"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._admin = None
        self._consumers: list = []

    def version(self) -> str:
        import confluent_kafka

        from conformance.clients import _confluent_version

        return f"{_confluent_version()} (librdkafka {confluent_kafka.libversion()[0]})"

    def close(self) -> None:
        for c in self._consumers:
            try:
                c.close()
            except Exception:
                pass
        self._consumers.clear()

    # -- factories ------------------------------------------------------------------------------------------

    def producer(self, *, bootstrap: str | None = None, **config):
        from confluent_kafka import Producer

        cfg = {"bootstrap.servers": bootstrap or self.bootstrap, "message.timeout.ms": 30000}
        cfg.update(config)
        return Producer(cfg)

    def consumer(self, **config):
        from confluent_kafka import Consumer

        cfg = {"bootstrap.servers": self.bootstrap, "group.id": f"{self.ctx.prefix}-assign",
               "enable.auto.commit": False, "enable.partition.eof": False, "session.timeout.ms": 10000,
               "heartbeat.interval.ms": 1000}
        cfg.update(config)
        c = Consumer(cfg)
        self._consumers.append(c)
        return c

    @property
    def admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    # -- data plane ----------------------------------------------------------------------------------------------

    def produce(self, topic, records, *, acks="all", codec="none", idempotent=False, bootstrap=None,
                linger_ms=5, **extra):
        cfg = {"acks": acks, "compression.type": codec, "enable.idempotence": idempotent, "linger.ms": linger_ms}
        cfg.update(extra)
        p = self.producer(bootstrap=bootstrap, **cfg)
        results: dict[int, object] = {}

        def cb(i):
            def report(err, msg):
                results[i] = ("error", err) if err is not None else ("ok", msg.offset())
            return report

        for i, r in enumerate(records):
            kw = {}
            if r.partition is not None:
                kw["partition"] = r.partition
            if r.timestamp_ms is not None:
                kw["timestamp"] = r.timestamp_ms
            if r.headers:
                kw["headers"] = list(r.headers)
            while True:
                try:
                    p.produce(topic, value=r.value, key=r.key, on_delivery=cb(i), **kw)
                    break
                except BufferError:
                    p.poll(0.1)
        left = p.flush(30)
        if left:
            raise RuntimeError(f"{left} records still undelivered after flush(30)")
        errors = [v for tag, v in results.values() if tag == "error"]
        if errors or len(results) != len(records):
            raise RuntimeError(f"delivery failed for {len(records) - len(results) + len(errors)} records: "
                               f"{errors[:1]}")
        return [None if acks == "0" or results[i][1] is None or results[i][1] < 0 else results[i][1]
                for i in range(len(records))]

    def fetch(self, topic, partition, offset, count, *, timeout_s=20.0, isolation="read_uncommitted"):
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        c = self.consumer(**{"isolation.level": isolation, "auto.offset.reset": "error", "fetch.wait.max.ms": 200})
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING if offset == "earliest" else offset)])
        out: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=max(1, count - len(out)), timeout=0.3):
                if m.error():
                    raise KafkaException(m.error())
                out.append(_consumed(m))
        return out[:count]

    def list_offset(self, topic, partition, spec):
        from confluent_kafka import TopicPartition

        if spec == "max":
            from confluent_kafka.admin import OffsetSpec

            tp = TopicPartition(topic, partition)
            res = self.admin.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=15)
            off = res[tp].result(20).offset
            return None if off < 0 else off
        c = self.consumer()
        if spec in ("earliest", "latest"):
            low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=15, cached=False)
            return low if spec == "earliest" else high
        (tp,) = c.offsets_for_times([TopicPartition(topic, partition, int(spec))], timeout=15)
        if tp.error:
            raise RuntimeError(str(tp.error))
        return None if tp.offset < 0 else tp.offset

    # -- admin ----------------------------------------------------------------------------------------------------

    def create_topic(self, name, partitions, configs=None):
        from confluent_kafka.admin import NewTopic

        self.admin.create_topics([NewTopic(name, partitions, 1, config=dict(configs or {}))],
                                 operation_timeout=20, request_timeout=20)[name].result(30)

    def delete_topic(self, name):
        self.admin.delete_topics([name], operation_timeout=20, request_timeout=20)[name].result(30)

    def list_topics(self):
        return set(self.admin.list_topics(timeout=15).topics)

    def describe_topic(self, name):
        t = self.admin.list_topics(name, timeout=15).topics[name]
        if t.error is not None:
            from confluent_kafka import KafkaException

            raise KafkaException(t.error)
        return {p.id: {"leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}
                for p in t.partitions.values()}

    def create_partitions(self, name, total):
        from confluent_kafka.admin import NewPartitions

        self.admin.create_partitions([NewPartitions(name, total)], operation_timeout=20,
                                     request_timeout=20)[name].result(30)

    def describe_configs(self, name):
        from confluent_kafka.admin import ConfigResource, ResourceType

        res = ConfigResource(ResourceType.TOPIC, name)
        entries = self.admin.describe_configs([res], request_timeout=15)[res].result(20)
        return {k: {"value": e.value, "source": _source(e.source)} for k, e in entries.items()}

    def alter_configs(self, name, set_, delete=()):
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        self.admin.incremental_alter_configs([res], request_timeout=15)[res].result(20)

    def delete_records(self, name, partition, before):
        from confluent_kafka import TopicPartition

        tp = TopicPartition(name, partition, before)
        res = self.admin.delete_records([tp], request_timeout=15, operation_timeout=15)
        return next(iter(res.values())).result(20).low_watermark

    # -- groups -------------------------------------------------------------------------------------------------------

    def group_consume(self, topic, group, count, *, timeout_s=30.0, commit=True, **options):
        c = self.consumer(**{"group.id": group, "auto.offset.reset": "earliest", **options})
        c.subscribe([topic])
        run = GroupRun()
        deadline = time.monotonic() + timeout_s
        while len(run.records) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=count - len(run.records), timeout=0.3):
                if m.error():
                    run.errors.append(str(m.error()))
                    continue
                run.records.append(_consumed(m))
        run.assignments.append(sorted((tp.topic, tp.partition) for tp in c.assignment()))
        if commit and run.records:
            from confluent_kafka import TopicPartition

            last: dict = {}
            for r in run.records:
                last[(r.topic, r.partition)] = max(last.get((r.topic, r.partition), -1), r.offset)
            c.commit(offsets=[TopicPartition(t, p, o + 1) for (t, p), o in last.items()], asynchronous=False)
            run.committed = {k: o + 1 for k, o in last.items()}
        c.close()
        self._consumers.remove(c)
        return run

    def committed(self, group, topic, partitions):
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
        res = self.admin.list_consumer_group_offsets([req], request_timeout=15)[group].result(20)
        out = {p: None for p in partitions}
        for tp in res.topic_partitions:
            out[tp.partition] = None if tp.offset < 0 else tp.offset
        return out

    def start_member(self, topic, group, **options) -> "ConfluentMember":
        return ConfluentMember(self, topic, group, **options)


def _source(src) -> str:
    from confluent_kafka.admin import ConfigSource

    try:
        name = ConfigSource(src).name
    except ValueError:
        name = getattr(src, "name", str(src))
    return name.upper().replace("_CONFIG", "")


def _consumed(m) -> Consumed:
    ts_type, ts = m.timestamp()
    return Consumed(m.topic(), m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []),
                    ts if ts_type else None, TS_TYPES.get(ts_type))


class ConfluentMember(Member):
    """A confluent-kafka group member polling in a thread; rebalance callbacks record the events."""

    def __init__(self, driver: ConfluentDriver, topic: str, group: str, *, assignor: str = "range",
                 instance_id: str | None = None, session_timeout_ms: int = 10000, commit: bool = True) -> None:
        super().__init__()
        cfg = {"group.id": group, "auto.offset.reset": "earliest", "partition.assignment.strategy": assignor,
               "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": 500,
               "enable.auto.commit": False}
        if instance_id is not None:
            cfg["group.instance.id"] = instance_id
        self.consumer = driver.consumer(**cfg)
        self._driver = driver
        self.consumer.subscribe(
            [topic],
            on_assign=lambda c, parts: self._assigned([(p.topic, p.partition) for p in parts]),
            on_revoke=lambda c, parts: self._revoked([(p.topic, p.partition) for p in parts]),
            on_lost=lambda c, parts: self._lost([(p.topic, p.partition) for p in parts]))
        self._commit = commit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                msgs = self.consumer.consume(num_messages=500, timeout=0.2)
                good = []
                for m in msgs:
                    if m.error():
                        if m.error().fatal():
                            self.errors.append(str(m.error()))
                        continue
                    good.append(_consumed(m))
                if good:
                    self._consumed(good)
                    if self._commit:
                        try:
                            self.consumer.commit(asynchronous=False)
                        except Exception as e:  # e.g. a rebalance in progress: retried on the next batch
                            if "NO_OFFSET" not in str(e):
                                self.events.append((time.monotonic(), f"commit error: {e}", []))
        except Exception as e:
            self.errors.append(f"{type(e).__name__}: {e}")

    def stop(self, leave: bool = True) -> None:
        self._stop.set()
        self._thread.join(15)
        try:
            self.consumer.close()  # static members (group.instance.id) do not send LeaveGroup
        except Exception as e:
            self.errors.append(f"close: {e}")
        if self.consumer in self._driver._consumers:
            self._driver._consumers.remove(self.consumer)
