"""TLS against plaintext on one kcompat broker: produce throughput and connection set-up cost.

    python3 bench/tls.py [--records N] [--sizes 100,1024] [--connections N] [--tls-version 1.3]
                         [--reference kafka] [--kafka-version 4.3.1]

Starts ``python -m kcompat serve`` with a PLAINTEXT and an SSL listener (PEM key store with an EC
P-256 certificate from a CA the script makes, as tests/security/certs.py does) and, per record size
in ``--sizes`` (100 B and 1 KiB), produces ``--records`` (200,000) records with one confluent-kafka
producer (acks=1, linger.ms 5, no compression) to a fresh one-partition topic, first over PLAINTEXT,
then over SSL (``ssl.endpoint.identification.algorithm=https``, the CA as ``ssl.ca.location``).
Time runs from the first ``produce()`` to the end of ``flush()``; MB = 10^6 bytes of record values.
Broker and client CPU seconds per phase come from ``/proc`` (the broker process; this process,
librdkafka's threads included).

Each target first gets an unmeasured warm-up (100,000 records of 1 KiB over each listener, 50
connections each), so the JVM's JIT does not count against Kafka.

Then the handshake cost: ``--connections`` (300) sequential connections per listener, each
connecting, (TLS: handshaking), sending one ApiVersions v3 and reading its answer, then closing;
connections per second and the broker's CPU per connection.

With ``--reference kafka`` the same runs follow against Apache Kafka (``--kafka-version``, default
4.3.1, jars from the conformance suite's Maven cache; a single KRaft node, 1 GiB heap) with an SSL
listener on the same PEM key store, so the TLS/plaintext ratios of both show side by side.

It prints a table and, last, a one-line JSON summary; it asserts nothing and exits 0. Run it on an
idle machine: broker and client share the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import confluent_kafka as ck  # noqa: E402

from bench.proc_stats import proc_cpu_seconds  # noqa: E402
from kcompat.testing.ports import free_ports  # noqa: E402
from kcompat.testing.process import BrokerProcess  # noqa: E402
from tests.security.certs import TestCA  # noqa: E402


def produce(bootstrap: str, extra: dict, count: int, size: int, broker_pid: int) -> dict:
    """Produce ``count`` records of ``size`` bytes; seconds, msg/s, MB/s and CPU seconds."""
    topic = "bench-tls-" + uuid.uuid4().hex[:8]
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                            "queue.buffering.max.messages": 1_000_000, **extra})
    producer.list_topics(topic, timeout=30)      # connected, topic auto-created, before the clock starts
    value = os.urandom(size)
    errors = []
    b0, c0, t0 = proc_cpu_seconds(broker_pid), time.process_time(), time.monotonic()
    for i in range(count):
        try:
            producer.produce(topic, value, on_delivery=lambda err, msg: err and errors.append(err))
        except BufferError:
            producer.poll(0.005)
            producer.produce(topic, value)
        if not i & 0xFFFF:
            producer.poll(0)
    left = producer.flush(120)
    t1, b1, c1 = time.monotonic(), proc_cpu_seconds(broker_pid), time.process_time()
    secs = t1 - t0
    return {"records": count, "size": size, "seconds": round(secs, 3), "msg_s": round(count / secs),
            "mb_s": round(count * size / secs / 1e6, 1), "broker_cpu_s": round(b1 - b0, 2),
            "client_cpu_s": round(c1 - c0, 2), "errors": len(errors) + left}


def _api_versions() -> bytes:
    body = struct.pack(">hhih", 18, 3, 1, 5) + b"bench" + b"\x00" + b"\x06bench\x021\x00"
    return struct.pack(">i", len(body)) + body


def connections(port: int, n: int, ctx: ssl.SSLContext | None, broker_pid: int) -> dict:
    """``n`` sequential connect (+ handshake) + ApiVersions round trips."""
    frame = _api_versions()
    b0, t0 = proc_cpu_seconds(broker_pid), time.monotonic()
    for _ in range(n):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        s = ctx.wrap_socket(raw, server_hostname="127.0.0.1") if ctx is not None else raw
        s.sendall(frame)
        size = struct.unpack(">i", _read(s, 4))[0]
        _read(s, size)
        s.close()
    secs, b1 = time.monotonic() - t0, proc_cpu_seconds(broker_pid)
    return {"connections": n, "seconds": round(secs, 3), "conn_s": round(n / secs),
            "broker_cpu_ms_per_conn": round((b1 - b0) * 1000 / n, 3)}


def _read(s, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def run_target(label: str, plain: int, tls: int, pid: int, ca: TestCA, args) -> dict:
    """The produce and connection runs against one broker (``pid``) with listeners ``plain``/``tls``."""
    ssl_conf = {"security.protocol": "SSL", "ssl.ca.location": str(ca.ca_path),
                "ssl.endpoint.identification.algorithm": "https"}
    client = ssl.create_default_context(cafile=str(ca.ca_path))
    # warm-up, not measured: the JVM's JIT (Kafka) and both listeners' code paths
    for bootstrap, extra in ((f"127.0.0.1:{plain}", {}), (f"127.0.0.1:{tls}", ssl_conf)):
        produce(bootstrap, extra, min(args.records, 100_000), 1024, pid)
    connections(plain, 50, None, pid)
    connections(tls, 50, client, pid)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for name, bootstrap, extra in (("PLAINTEXT", f"127.0.0.1:{plain}", {}), ("SSL", f"127.0.0.1:{tls}", ssl_conf)):
            r = produce(bootstrap, extra, args.records, size, pid)
            rows.append({"listener": name, **r})
            print(f"{label}: produce {size:>5} B over {name:<9}: {r['msg_s']:>8} msg/s {r['mb_s']:>7} MB/s "
                  f"({r['seconds']} s; broker CPU {r['broker_cpu_s']} s, client CPU {r['client_cpu_s']} s"
                  f"{', ' + str(r['errors']) + ' errors' if r['errors'] else ''})", flush=True)
    conns = []
    for name, port, ctx in (("PLAINTEXT", plain, None), ("SSL", tls, client)):
        c = connections(port, args.connections, ctx, pid)
        conns.append({"listener": name, **c})
        print(f"{label}: connections over {name:<9}: {c['conn_s']:>6}/s, broker CPU {c['broker_cpu_ms_per_conn']} ms "
              f"per connection ({c['connections']} in {c['seconds']} s)", flush=True)
    by = {(r["listener"], r["size"]): r for r in rows}
    for size in sorted({r["size"] for r in rows}):
        ratio = by[("SSL", size)]["mb_s"] / max(by[("PLAINTEXT", size)]["mb_s"], 1e-9)
        print(f"{label}: TLS/plaintext produce throughput at {size} B: {ratio:.2f}", flush=True)
    return {"produce": rows, "connections": conns}


def _kafka(root: Path, ca: TestCA, version: str, tls_version: str):
    """A single-node Apache Kafka with PLAINTEXT and SSL listeners on the CA's PEM key store."""
    from conformance import maven, procs
    from conformance.reference import ReferenceKafka

    class KafkaWithTls(ReferenceKafka):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            self.ssl_port = procs.free_port(self.host)

        def server_properties(self) -> dict[str, str]:
            props = super().server_properties()
            h = self.host
            props["listeners"] += f",SSL://{h}:{self.ssl_port}"
            props["advertised.listeners"] += f",SSL://{h}:{self.ssl_port}"
            props["listener.security.protocol.map"] += ",SSL:SSL"
            props.update(ca.broker_ssl_props(ca.issue("kafka")))
            props["ssl.enabled.protocols"] = f"TLSv{tls_version}"
            return props
    return KafkaWithTls(maven.resolve_kafka(version), version, root / "kafka")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--connections", type=int, default=300)
    ap.add_argument("--tls-version", choices=["1.2", "1.3"], default="1.3",
                    help="the broker's ssl.enabled.protocols (TLSv1.2 or TLSv1.3 only)")
    ap.add_argument("--reference", choices=["kafka"], help="also run against Apache Kafka")
    ap.add_argument("--kafka-version", default="4.3.1")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kcompat-bench-tls-") as tmp:
        root = Path(tmp)
        ca = TestCA(root / "ca")
        plain, tls = free_ports(2)
        broker = BrokerProcess(root / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
            **ca.broker_ssl_props(), "ssl.enabled.protocols": f"TLSv{args.tls_version}",
            "num.partitions": "1"}, port=plain, cwd=ROOT).start()
        pid = broker.proc.pid
        try:
            summary = {"kcompat": run_target("kcompat", plain, tls, pid, ca, args)}
        finally:
            broker.stop()
        if args.reference == "kafka":
            kafka = _kafka(root, ca, args.kafka_version, args.tls_version)
            kafka.start()
            try:
                summary["kafka"] = run_target(f"Kafka {args.kafka_version}", kafka.port, kafka.ssl_port,
                                              kafka.proc.pid, ca, args)
            finally:
                kafka.stop()
        print(json.dumps({"bench": "tls", "tls_version": args.tls_version, "cpus": os.cpu_count(), **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
