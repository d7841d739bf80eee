"""SASL handshake cost on one broker: connections per second and broker CPU per connection.

    python3 bench/sasl.py [--connections N] [--reference kafka] [--kafka-version 4.3.1]

Starts ``python -m kcompat serve`` with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners (PLAIN
users from the JAAS config, a SCRAM-SHA-512 credential of 4096 iterations created with
AlterUserScramCredentials, an EC P-256 certificate from a CA the script makes), then opens
``--connections`` (300) sequential connections per case, each connecting (SASL_SSL: the TLS
handshake), sending ApiVersions v3, then for SASL SaslHandshake v1 and SaslAuthenticate v2 (one
round for PLAIN, two for SCRAM, scramp's client computing the proof), then one Metadata v1
request as the authenticated user, and closing. Cases: PLAINTEXT, SASL_PLAINTEXT with PLAIN,
SASL_PLAINTEXT with SCRAM-SHA-512, SASL_SSL with SCRAM-SHA-512.

Connections per second include the client's share (the SCRAM client's PBKDF2 of 4096 rounds, about
what a real client spends); broker CPU per connection comes from ``/proc`` and is the broker's
cost alone. With ``--reference kafka`` the same cases run against Apache Kafka (``--kafka-version``,
a single KRaft node from the conformance suite's Maven cache) configured alike, after an unmeasured
warm-up of 100 connections per case for both targets.

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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import scramp  # noqa: E402
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion  # noqa: E402,E501

from bench.proc_stats import proc_cpu_seconds  # noqa: E402
from kcompat.protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from kcompat.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kcompat.protocol.messages.sasl_authenticate import SaslAuthenticateRequest  # noqa: E402
from kcompat.protocol.messages.sasl_handshake import SaslHandshakeRequest  # noqa: E402
from kcompat.testing import wire  # noqa: E402
from kcompat.testing.ports import free_ports  # noqa: E402
from kcompat.testing.process import BrokerProcess  # noqa: E402
from tests.security.certs import TestCA  # noqa: E402

USER, PASSWORD = "bench", "bench-secret"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _call(sock, request, version: int, correlation: int):
    wire.send_request(sock, request, version, correlation_id=correlation)
    return wire.read_response(sock, type(request).API_KEY, version)[1]


def _session(port: int, mechanism: str | None, ctx: ssl.SSLContext | None) -> None:
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1") if ctx is not None else raw
    try:
        _call(sock, ApiVersionsRequest(client_software_name="bench", client_software_version="1"), 3, 1)
        if mechanism is not None:
            assert _call(sock, SaslHandshakeRequest(mechanism=mechanism), 1, 2).error_code == 0
            if mechanism == "PLAIN":
                r = _call(sock, SaslAuthenticateRequest(auth_bytes=f"\0{USER}\0{PASSWORD}".encode()), 2, 3)
            else:
                c = scramp.ScramClient([mechanism], USER, PASSWORD)
                r = _call(sock, SaslAuthenticateRequest(auth_bytes=c.get_client_first().encode()), 2, 3)
                c.set_server_first(bytes(r.auth_bytes).decode())
                r = _call(sock, SaslAuthenticateRequest(auth_bytes=c.get_client_final().encode()), 2, 4)
                c.set_server_final(bytes(r.auth_bytes).decode())
            assert r.error_code == 0, r.error_message
        _call(sock, MetadataRequest(topics=[]), 1, 5)
    finally:
        sock.close()


def connections(port: int, n: int, mechanism, ctx, broker_pid: int) -> dict:
    b0, t0 = proc_cpu_seconds(broker_pid), time.monotonic()
    for _ in range(n):
        _session(port, mechanism, ctx)
    secs, b1 = time.monotonic() - t0, proc_cpu_seconds(broker_pid)
    return {"connections": n, "seconds": round(secs, 3), "conn_s": round(n / secs),
            "broker_cpu_ms_per_conn": round((b1 - b0) * 1000 / n, 3)}


def run_target(label: str, ports: dict, pid: int, ca: TestCA, n: int) -> list[dict]:
    """Every case against one broker (``pid``) whose listeners are ``ports`` (name -> port)."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())]).values():
        f.result(60)
    tls = ssl.create_default_context(cafile=str(ca.ca_path))
    cases = [("PLAINTEXT", "PLAINTEXT", None, None), ("SASL_PLAINTEXT PLAIN", "SASL_PLAINTEXT", "PLAIN", None),
             ("SASL_PLAINTEXT SCRAM-SHA-512", "SASL_PLAINTEXT", "SCRAM-SHA-512", None),
             ("SASL_SSL SCRAM-SHA-512", "SASL_SSL", "SCRAM-SHA-512", tls)]
    for _name, listener, mech, ctx in cases:   # warm-up, not measured (the JVM's JIT for Kafka)
        connections(ports[listener], 100, mech, ctx, pid)
    rows = []
    for name, listener, mech, ctx in cases:
        r = connections(ports[listener], n, mech, ctx, pid)
        rows.append({"case": name, **r})
        print(f"{label}: {name:<29} {r['conn_s']:>6} connections/s, broker CPU {r['broker_cpu_ms_per_conn']:>7} ms "
              f"per connection ({r['connections']} in {r['seconds']} s)", flush=True)
    return rows


def _props(ports: dict, ca: TestCA, cert) -> dict[str, str]:
    return {"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            **ca.broker_ssl_props(cert)}


def _kafka(root: Path, ca: TestCA, version: str):
    """A single-node Apache Kafka with the same SASL listeners."""
    from conformance import maven, procs
    from conformance.reference import ReferenceKafka

    class KafkaWithSasl(ReferenceKafka):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            self.sasl_port, self.sasl_ssl_port = procs.free_port(self.host), procs.free_port(self.host)

        def server_properties(self) -> dict[str, str]:
            props = super().server_properties()
            h = self.host
            extra = f",SASL_PLAINTEXT://{h}:{self.sasl_port},SASL_SSL://{h}:{self.sasl_ssl_port}"
            props["listeners"] += extra
            props["advertised.listeners"] += extra
            props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
            props.update(_props({}, ca, ca.issue("kafka")))
            return props
    return KafkaWithSasl(maven.resolve_kafka(version), version, root / "kafka")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=300)
    ap.add_argument("--reference", choices=["kafka"], help="also run against Apache Kafka")
    ap.add_argument("--kafka-version", default="4.3.1")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kcompat-bench-sasl-") as tmp:
        root = Path(tmp)
        ca = TestCA(root / "ca")
        plain, sasl, sasl_ssl = free_ports(3)
        ports = {"PLAINTEXT": plain, "SASL_PLAINTEXT": sasl, "SASL_SSL": sasl_ssl}
        broker = BrokerProcess(root / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                         f"SASL_SSL://127.0.0.1:{sasl_ssl}",
            **_props(ports, ca, None), "num.partitions": "1"}, port=plain, cwd=ROOT).start()
        try:
            summary = {"kcompat": run_target("kcompat", ports, broker.proc.pid, ca, args.connections)}
        finally:
            broker.stop()
        if args.reference == "kafka":
            kafka = _kafka(root, ca, args.kafka_version)
            kafka.start()
            try:
                kports = {"PLAINTEXT": kafka.port, "SASL_PLAINTEXT": kafka.sasl_port, "SASL_SSL": kafka.sasl_ssl_port}
                summary["kafka"] = run_target(f"Kafka {args.kafka_version}", kports, kafka.proc.pid, ca,
                                              args.connections)
            finally:
                kafka.stop()
        print(json.dumps({"bench": "sasl", "cpus": os.cpu_count(), **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
