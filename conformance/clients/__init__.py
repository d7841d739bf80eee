"""Client drivers, one module per client: :mod:`.kafka_python`, :mod:`.confluent`, :mod:`.java`, :mod:`.kcat`.

``wire`` cases use :mod:`conformance.wire` directly and get no driver (``ctx.client`` is None).
"""

from __future__ import annotations

from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, KCAT, WIRE


def driver_class(name: str):
    if name == KAFKA_PYTHON:
        from conformance.clients.kafka_python import KafkaPythonDriver
        return KafkaPythonDriver
    if name == CONFLUENT:
        from conformance.clients.confluent import ConfluentDriver
        return ConfluentDriver
    if name == JAVA:
        from conformance.clients.java import JavaDriver
        return JavaDriver
    if name == KCAT:
        from conformance.clients.kcat import KcatDriver
        return KcatDriver
    raise KeyError(name)


def make_driver(name: str, ctx):
    """The driver for client ``name`` (None for wire cases). Raises Prerequisite if it is unavailable."""
    if name == WIRE:
        return None
    return driver_class(name)(ctx)


def caps(name: str) -> frozenset[str]:
    """Capabilities of a client (what scenarios may ask of it); wire has none."""
    return frozenset() if name == WIRE else driver_class(name).caps


def with_caps(*needed: str, among=(KAFKA_PYTHON, CONFLUENT, JAVA, KCAT)) -> list[str]:
    """The clients (of ``among``) that have every capability in ``needed``."""
    return [c for c in among if set(needed) <= caps(c)]


def _confluent_version() -> str:
    import confluent_kafka

    v = confluent_kafka.version()  # a plain string in recent releases, (string, int) in older ones
    return v[0] if isinstance(v, tuple) else str(v)


def client_versions(java_version: str | None) -> dict[str, str]:
    """Versions of the installed clients, for the report."""
    out = {}
    try:
        import kafka

        out[KAFKA_PYTHON] = kafka.__version__
    except Exception as e:
        out[KAFKA_PYTHON] = f"unavailable ({e})"
    try:
        import confluent_kafka

        out[CONFLUENT] = f"{_confluent_version()} (librdkafka {confluent_kafka.libversion()[0]})"
    except Exception as e:
        out[CONFLUENT] = f"unavailable ({e})"
    out[JAVA] = f"kafka-clients {java_version} (Apache Kafka tools)" if java_version else "unavailable"
    import re
    import shutil

    from conformance import procs

    exe = shutil.which("kcat")
    if exe:
        res = procs.run([exe, "-V"], timeout=10)
        m = re.search(r"Version (\S+).*?librdkafka (\S+)", res.stdout + res.stderr)
        out[KCAT] = f"{m.group(1)} (librdkafka {m.group(2)})" if m else "installed"
    else:
        out[KCAT] = "not installed"
    out[WIRE] = "the suite's own protocol codec (conformance/wire.py)"
    return out
