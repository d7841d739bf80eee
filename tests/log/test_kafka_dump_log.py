"""kcompat's data directory read by Apache Kafka 4.3.1's own offline tool, ``kafka-dump-log.sh``
(``org.apache.kafka.tools.DumpLogSegments``).

kcompat keeps Kafka's on-disk layout (README "Data uses Kafka's layout"), so the tool Kafka users
debug a data directory with must read everything kcompat writes: the segments of a compressed,
idempotent, keyed topic with headers and of a transactional one (records, control markers), the
offset and time indexes of a topic rolled into many segments (``--verify-index-only`` compares
every index entry with the log, ``--index-sanity-check`` checks their structure), the producer
state snapshots, and the three internal logs through their decoders: ``__cluster_metadata``
(``--cluster-metadata-decoder``), ``__consumer_offsets`` (``--offsets-decoder``) and
``__transaction_state`` (``--transaction-log-decoder``). The broker is stopped cleanly first, as
the tool expects files no one writes to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.clients import tool_server
from conformance.reference import java_command
from tests.support.broker_process import BrokerProcess

RECORDS = 2000
SEGMENTED = 3000


def _write(bootstrap: str) -> None:
    """The topics, records, a committed group offset and two transactions the tool then reads."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("segmented", 1, 1, config={"internal.segment.bytes": "16384",
                                                                        "index.interval.bytes": "1024"})])
    futures["segmented"].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce("plain", key=f"k{i % 10}", value=b"x" * 100, headers=[("h", b"v")])
    assert p.flush(30) == 0
    small = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 20})
    for i in range(SEGMENTED):
        small.produce("segmented", value=b"%06d" % i + b"y" * 94)
        small.poll(0)
    assert small.flush(30) == 0
    tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx1"})
    tp.init_transactions(30)
    tp.begin_transaction()
    for i in range(10):
        tp.produce("txn", value=b"t%d" % i)
    tp.commit_transaction(30)
    tp.begin_transaction()
    tp.produce("txn", value=b"aborted")
    assert tp.flush(30) == 0   # sent, so the abort writes markers (librdkafka drops unsent records)
    tp.abort_transaction(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g1", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["plain"])
    seen = 0
    while seen < RECORDS:
        msgs = c.consume(500, 10)
        assert msgs, f"consumed {seen} of {RECORDS}"
        seen += sum(1 for m in msgs if m.error() is None)
    c.commit(asynchronous=False)
    c.close()


def _dump(lib: Path, files: list[Path], *options: str) -> str:
    """The tool's stdout for ``files``; it must exit 0 and print no exception."""
    assert files
    r = tool_server.run_command(java_command(lib, "org.apache.kafka.tools.DumpLogSegments",
                                             ["--files", ",".join(map(str, sorted(files))), *options]), timeout=180)
    problems = [line for line in (r.stdout + r.stderr).splitlines()
                if "Exception" in line or "Error" in line or "Mismatch" in line]
    assert r.returncode == 0 and not problems, (r.returncode, problems[:5], r.stderr[-2000:])
    return r.stdout


@pytest.mark.timeout(1200)   # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafka_dump_log_reads_every_file_kcompat_writes(tmp_path):
    lib = maven.resolve_kafka("4.3.1")
    data = tmp_path / "data"
    with BrokerProcess(data) as b:
        _write(b.bootstrap)
    assert (data / ".kafka_cleanshutdown").exists()

    out = _dump(lib, [*data.glob("plain-0/*.log"), *data.glob("txn-0/*.log")], "--deep-iteration", "--print-data-log")
    plain, txn = out.split("txn-0/", 1)
    batches = re.findall(r"^baseOffset: .*$", plain, re.M)
    assert batches and all("isvalid: true" in x and "compresscodec: lz4" in x and "producerId: 0" in x for x in batches)
    records = re.findall(r"^\| offset: (\d+) .* headerKeys: \[h\] key: (k\d) payload: x+$", plain, re.M)
    assert [(int(o), k) for o, k in records] == [(i, f"k{i % 10}") for i in range(RECORDS)]
    payloads = re.findall(r"^\| offset: (\d+) .*?(?:payload: (\S+)|endTxnMarker: (\w+))", txn, re.M)
    assert [(int(o), p or m) for o, p, m in payloads] == \
        [(i, f"t{i}") for i in range(10)] + [(10, "COMMIT"), (11, "aborted"), (12, "ABORT")]

    segments = sorted(data.glob("segmented-0/*.log"))
    assert len(segments) > 5
    indexes = [*data.glob("segmented-0/*.index"), *data.glob("segmented-0/*.timeindex")]
    assert any(f.stat().st_size for f in indexes)
    sane = _dump(lib, indexes, "--index-sanity-check")
    assert sane.count("passed sanity check") + sane.count("is empty") == len(indexes)
    _dump(lib, indexes, "--verify-index-only")   # no "Mismatches in" line for any entry
    entries = re.findall(r"^offset: (\d+) position: (\d+)$", _dump(lib, sorted(data.glob("segmented-0/*.index"))), re.M)
    assert len(entries) > 10

    snapshots = _dump(lib, [*data.glob("plain-0/*.snapshot")])
    assert re.search(r"producerId: 0 producerEpoch: 0 .* firstSequence: 0 lastSequence: 1999 lastOffset: 1999", snapshots)

    metadata = _dump(lib, [*data.glob("__cluster_metadata-0/*.log")], "--cluster-metadata-decoder")
    assert '"type":"TOPIC_RECORD","version":0,"data":{"name":"plain"' in metadata
    assert '"name":"metadata.version","featureLevel":' in metadata

    offsets = _dump(lib, [*data.glob("__consumer_offsets-*/*.log")], "--offsets-decoder")
    assert re.search(r'key: \{"type":"1","data":\{"group":"g1","topic":"plain","partition":0\}\} '
                     r'payload: \{"version":"\d+","data":\{"offset":2000,', offsets)

    txn_state = _dump(lib, [*data.glob("__transaction_state-*/*.log")], "--transaction-log-decoder")
    statuses = re.findall(r'"transactionalId":"tx1".*?"transactionStatus":(\d)', txn_state)
    assert "4" in statuses and "5" in statuses   # CompleteCommit, CompleteAbort
