"""Client operations over the security listeners (the ``security`` group), for confluent-kafka,
kafka-python, kcat and the Java clients (Kafka's VerifiableProducer, ConsoleConsumer and
TopicCommand with a client properties file).

A connection is described by :class:`Secured`: which listener (``SSL`` or ``SASL_PLAINTEXT``), the
SASL mechanism, user and password, and the CA. Each client turns it into its own settings
(:meth:`Secured.confluent`, :meth:`Secured.kafka_python`, :meth:`Secured.kcat`,
:meth:`Secured.java`). Each operation takes the case's context (``ctx.case.client`` says which
client; the Java tools need the jars and the case's directory). The operations
return plain values (offsets, record values, topic names) or the name of the error the client
reported, normalised to Kafka's error name where the client gives one (``TOPIC_AUTHORIZATION_FAILED``),
so that kcompat's and Kafka's results compare.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass

from conformance import procs
from conformance.clients.base import Unsupported
from conformance.model import Prerequisite
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, KCAT


@dataclass(frozen=True)
class Secured:
    """How to reach and authenticate to a security listener (see the module docstring)."""

    bootstrap: str
    protocol: str  # "SSL" or "SASL_PLAINTEXT"
    ca_path: str
    mechanism: str | None = None
    user: str | None = None
    password: str | None = None

    @classmethod
    def ssl(cls, sec: dict) -> "Secured":
        return cls(sec["ssl_bootstrap"], "SSL", sec["ca_path"])

    @classmethod
    def sasl(cls, sec: dict, mechanism: str, password: str | None = None) -> "Secured":
        return cls(sec["sasl_bootstrap"], "SASL_PLAINTEXT", sec["ca_path"], mechanism, sec["user"],
                   sec["password"] if password is None else password)

    def confluent(self) -> dict:
        conf = {"bootstrap.servers": self.bootstrap, "security.protocol": self.protocol}
        if self.protocol == "SSL":
            conf["ssl.ca.location"] = self.ca_path
        else:
            conf.update({"sasl.mechanism": self.mechanism, "sasl.username": self.user,
                         "sasl.password": self.password})
        return conf

    def kafka_python(self) -> dict:
        kw = {"bootstrap_servers": self.bootstrap, "security_protocol": self.protocol}
        if self.protocol == "SSL":
            kw["ssl_cafile"] = self.ca_path
        else:
            kw.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                       "sasl_plain_password": self.password})
        return kw

    def java(self) -> dict[str, str]:
        """Java client properties (``--producer.config``, ``--consumer.config``, ``--command-config``)."""
        if self.protocol == "SSL":
            return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_path}
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if self.mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        return {"security.protocol": self.protocol, "sasl.mechanism": self.mechanism,
                "sasl.jaas.config": f'{module} required username="{self.user}" password="{self.password}";'}

    def kcat(self) -> list[str]:
        args = ["-b", self.bootstrap]
        for key, value in self.confluent().items():
            if key != "bootstrap.servers":
                args += ["-X", f"{key.replace('sasl.mechanism', 'sasl.mechanisms')}={value}"]
        return args


JAVA_ERRORS = {"TopicAuthorizationException": "TOPIC_AUTHORIZATION_FAILED",
               "GroupAuthorizationException": "GROUP_AUTHORIZATION_FAILED",
               "SaslAuthenticationException": "SASL_AUTHENTICATION_FAILED"}
KCAT_ERRORS = {"Topic authorization failed": "TOPIC_AUTHORIZATION_FAILED",
               "Group authorization failed": "GROUP_AUTHORIZATION_FAILED",
               "SASL authentication error": "_AUTHENTICATION"}  # librdkafka's name for the broker's 58


class ToolError(RuntimeError):
    """kcat or a Kafka tool failed; ``kafka_error`` is the error its output names (the first
    pattern of ``errors``, :data:`KCAT_ERRORS` or :data:`JAVA_ERRORS`, found in it), else None."""

    def __init__(self, what: str, res, errors: dict[str, str]) -> None:
        super().__init__(f"{what} failed: {res.summary()}")
        text = res.stdout + res.stderr
        self.kafka_error = next((name for pattern, name in errors.items() if pattern in text), None)


def error_name(exc: BaseException) -> str:
    """Kafka's error name for a client exception where the client says it, else its class name."""
    if getattr(exc, "kafka_error", None):
        return exc.kafka_error
    value = getattr(type(exc), "message", None)  # kafka-python: the class's Kafka error name
    if isinstance(value, str) and value.isupper():
        return value
    arg = exc.args[0] if exc.args else None
    if hasattr(arg, "name") and callable(arg.name):  # confluent-kafka: KafkaException(KafkaError)
        return arg.name()
    return type(exc).__name__


# -- produce and consume ---------------------------------------------------------------------------------

def produce(ctx, conn: Secured, topic: str, values: list[bytes]) -> list[int]:
    """Produce ``values`` (acks=all) to partition 0; their offsets. Raises on any error."""
    client = ctx.case.client
    if client == CONFLUENT:
        from confluent_kafka import KafkaException, Producer

        p = Producer({**conn.confluent(), "acks": "all", "message.timeout.ms": 20000})
        out: dict[int, int] = {}
        errors = []
        for i, v in enumerate(values):
            p.produce(topic, v, partition=0,
                      on_delivery=lambda err, msg, i=i: errors.append(err) if err else out.__setitem__(i, msg.offset()))
        p.flush(30)
        if errors:
            raise KafkaException(errors[0])
        return [out[i] for i in range(len(values))]
    if client == KAFKA_PYTHON:
        from kafka import KafkaProducer

        p = KafkaProducer(acks="all", request_timeout_ms=20000, max_block_ms=20000, **conn.kafka_python())
        try:
            futures = [p.send(topic, v, partition=0) for v in values]
            return [f.get(30).offset for f in futures]
        finally:
            p.close(5)
    if client == KCAT:
        res = procs.run(_kcat() + conn.kcat() + ["-P", "-t", topic, "-p", "0", "-X", "acks=all"],
                        input="\n".join(v.decode() for v in values) + "\n", timeout=60)
        if not res.ok:
            raise ToolError("kcat -P", res, KCAT_ERRORS)
        return []  # kcat does not print offsets
    if client == JAVA:
        return _java_produce(ctx, conn, topic, values)
    raise Unsupported(client)


def consume(ctx, conn: Secured, topic: str, group: str, count: int, timeout_s: float = 30.0) -> list[bytes]:
    """Consume ``count`` values from the beginning of ``topic`` in ``group`` (kcat: without a group)."""
    client = ctx.case.client
    if client == CONFLUENT:
        from confluent_kafka import Consumer, KafkaException

        c = Consumer({**conn.confluent(), "group.id": group, "auto.offset.reset": "earliest"})
        got: list[bytes] = []
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + timeout_s
            while len(got) < count and time.monotonic() < deadline:
                msg = c.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    raise KafkaException(msg.error())
                got.append(msg.value())
        finally:
            c.close()
        return got
    if client == KAFKA_PYTHON:
        from kafka import KafkaConsumer

        c = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **conn.kafka_python())
        got = []
        try:
            deadline = time.monotonic() + timeout_s
            while len(got) < count and time.monotonic() < deadline:
                for records in c.poll(500).values():
                    got += [r.value for r in records]
        finally:
            c.close()
        return got
    if client == KCAT:
        res = procs.run(_kcat() + conn.kcat() + ["-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(count),
                                                 "-e", "-q"], timeout=timeout_s + 30)
        if not res.ok:
            raise ToolError("kcat -C", res, KCAT_ERRORS)
        return [line.encode() for line in res.stdout.splitlines()]
    if client == JAVA:
        res = _java(ctx).run("org.apache.kafka.tools.consumer.ConsoleConsumer", [
            "--bootstrap-server", conn.bootstrap, "--topic", topic, "--group", group, "--from-beginning",
            "--max-messages", count, "--timeout-ms", int(timeout_s * 1000),
            "--consumer.config", _java_config(ctx, conn)], check=False, timeout=timeout_s + 60)
        got = [line.encode() for line in res.stdout.splitlines()  # Kafka 4 prints a deprecation notice there
               if line and not line.startswith("Processed") and "is deprecated" not in line]
        if len(got) < count:
            raise ToolError("ConsoleConsumer", res, JAVA_ERRORS)
        return got
    raise Unsupported(client)


# -- errors --------------------------------------------------------------------------------------------------

def produce_error(ctx, conn: Secured, topic: str) -> str:
    """Produce one record; the error name the client reports (``"none"`` if it was written)."""
    try:
        produce(ctx, conn, topic, [b"0"])
        return "none"
    except Exception as e:
        return error_name(e)


def group_error(ctx, conn: Secured, topic: str, group: str) -> str:
    """Consume ``topic`` in ``group``; the error name the client reports (``"none"`` if none came)."""
    try:
        consume(ctx, conn, topic, group, 1, timeout_s=15)
        return "none"
    except Exception as e:
        return error_name(e)


def auth_error(ctx, conn: Secured) -> str:
    """Connect with ``conn``'s credentials; the error the client reports for the failed login.

    confluent-kafka: the first error its ``error_cb`` gets (``_AUTHENTICATION`` when it read the
    broker's SaslAuthenticate error). kafka-python: it retries bootstrapping until its
    ``bootstrap_timeout_ms`` and then raises KafkaTimeoutError; the connection failure it logs
    says why, so that is the error reported. kcat, java: the error their output names."""
    client = ctx.case.client
    if client == CONFLUENT:
        from confluent_kafka import Producer

        errors = []
        p = Producer({**conn.confluent(), "error_cb": errors.append})
        deadline = time.monotonic() + 15
        while not errors and time.monotonic() < deadline:
            p.poll(0.2)
        return errors[0].name() if errors else "none"
    if client == KAFKA_PYTHON:
        import logging

        from kafka import KafkaAdminClient

        class Failures(logging.Handler):
            def __init__(self) -> None:
                super().__init__()
                self.errors: list[str] = []

            def emit(self, record: logging.LogRecord) -> None:
                for arg in record.args if isinstance(record.args, tuple) else ():
                    if isinstance(arg, Exception):
                        self.errors.append(error_name(arg))

        handler, logger = Failures(), logging.getLogger("kafka")
        logger.addHandler(handler)
        try:
            KafkaAdminClient(bootstrap_timeout_ms=5000, **conn.kafka_python()).close()
            return "none"
        except Exception as e:
            auth = [name for name in handler.errors if "AUTH" in name]  # logged after connection errors
            return (auth or handler.errors or [error_name(e)])[0]
        finally:
            logger.removeHandler(handler)
    try:
        list_topics(ctx, conn, timeout_s=3)
        return "none"
    except Exception as e:
        return error_name(e)


def list_topics(ctx, conn: Secured, timeout_s: float = 15.0) -> set[str]:
    """The topic names a Metadata request for all topics returns."""
    client = ctx.case.client
    if client == CONFLUENT:
        from confluent_kafka.admin import AdminClient

        return set(AdminClient(conn.confluent()).list_topics(timeout=timeout_s).topics)
    if client == KAFKA_PYTHON:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(request_timeout_ms=int(timeout_s * 1000), **conn.kafka_python())
        try:
            return set(admin.list_topics())
        finally:
            admin.close()
    if client == KCAT:
        res = procs.run(_kcat() + conn.kcat() + ["-L", "-J", "-m", str(int(timeout_s))], timeout=timeout_s + 30)
        if not res.ok:
            raise ToolError("kcat -L", res, KCAT_ERRORS)
        return {t["topic"] for t in json.loads(res.stdout)["topics"]}
    if client == JAVA:
        res = _java(ctx).run("org.apache.kafka.tools.TopicCommand", [
            "--bootstrap-server", conn.bootstrap, "--list", "--command-config", _java_config(ctx, conn)],
            check=False, timeout=timeout_s + 60)
        if not res.ok:
            raise ToolError("TopicCommand --list", res, JAVA_ERRORS)
        return {line.strip() for line in res.stdout.splitlines() if line.strip()}
    raise Unsupported(client)


def _java(ctx):
    from conformance.clients.java import JavaTools

    if not ctx.target.java_lib:
        raise Prerequisite(f"Java tools unavailable: {ctx.target.java_error or 'Kafka jars not resolved'}")
    return JavaTools(ctx.target.java_lib, ctx.workdir)


def _java_config(ctx, conn: Secured, extra: dict[str, str] | None = None) -> str:
    path = ctx.workdir / f"client-{len(list(ctx.workdir.glob('client-*.properties')))}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {**conn.java(), **(extra or {})}.items()))
    return str(path)


def _java_produce(ctx, conn: Secured, topic: str, values: list[bytes]) -> list[int]:
    """VerifiableProducer (values "0".."n-1", which the scenarios use) with ``conn``'s properties."""
    if values != [str(i).encode() for i in range(len(values))]:
        raise Unsupported("VerifiableProducer writes the values 0..n-1")
    from conformance.clients.java import json_events

    res = _java(ctx).run("org.apache.kafka.tools.VerifiableProducer", [
        "--bootstrap-server", conn.bootstrap, "--topic", topic, "--max-messages", len(values), "--acks", "-1",
        "--producer.config", _java_config(ctx, conn, {"max.block.ms": "20000", "delivery.timeout.ms": "30000",
                                                       "request.timeout.ms": "15000"})],
        check=False, timeout=90)
    events = json_events(res.stdout.splitlines())
    offsets = {int(e["value"]): e["offset"] for e in events if e.get("name") == "producer_send_success"}
    if len(offsets) != len(values):
        raise ToolError("VerifiableProducer", res, JAVA_ERRORS)
    return [offsets[i] for i in range(len(values))]


def _kcat() -> list[str]:
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    if exe is None:
        raise Prerequisite("kcat is not installed (apt-get install -y kcat)")
    return [exe]
