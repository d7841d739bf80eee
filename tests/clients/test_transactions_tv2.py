"""Transaction version 2 (KIP-890 part 2) with real clients against a real kcompat process whose
cluster finalized ``transaction.version=2`` with Kafka 4.3.1's ``kafka-features.sh upgrade`` (as a
Kafka 4.3.1 node formatted at 3.8-IV0 allows): Kafka 4.3.1's Java transactional producer
(``tests/clients/java/TxnDriver.java``, compiled once) commits and aborts with EndTxn
v5 and Produce v12+ and never sends AddPartitionsToTxn or AddOffsetsToTxn (the broker's
``kafka_network_requestmetrics_requests_total{request,version}`` counts what arrived), its epoch
is bumped by every transaction (DescribeTransactions, DescribeProducers), read_committed sees
exactly the committed records, a zombie with the old epoch is fenced, a consume-transform-produce
loop commits its offsets with TxnOffsetCommit v5, confluent-kafka and kafka-python transactions
still work with the versions they send, and a restart reads the TV2 transaction state back from
``__transaction_state``."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from conformance import maven
from conformance.clients.java import JavaTools
from conformance.clients.tool_server import source_command
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.describe_producers import DescribeProducersRequest as DPQ
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsRequest as DTQ
from kcompat.testing import wire
from tests.clients.test_kafka43_versions_clients import grew, requests_by_version
from tests.group.test_failover_cluster import coordinator
from tests.support.cluster import Cluster, wait_until
from tests.support.read_back import read_to_end
from tests.support.wire_helpers import broker_with_metrics

DRIVER = Path(__file__).parent / "java" / "TxnDriver.java"
FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


def finalize_tv2(lib, bootstrap: str, workdir: Path) -> None:
    """``kafka-features.sh upgrade --feature transaction.version=2`` of Kafka 4.3.1; ApiVersions of
    the first node of ``bootstrap`` then lists it finalized."""
    tools = JavaTools(str(lib), workdir)
    out = tools.run(FEATURE_COMMAND, ["--bootstrap-server", bootstrap, "upgrade", "--feature",
                                      "transaction.version=2"], check=False, timeout=120, heap="256m")
    assert (out.returncode, out.stdout.strip()) == (0, "transaction.version was upgraded to 2."), out.stderr[-2000:]
    addr = bootstrap.split(",")[0]
    deadline = time.monotonic() + 30
    while True:
        resp = wire.call(addr, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        if {f.name: f.max_version_level for f in resp.finalized_features}.get("transaction.version") == 2:
            return
        assert time.monotonic() < deadline, resp.finalized_features
        time.sleep(0.2)


@pytest.fixture(scope="module")
def broker(lib, tmp_path_factory):
    with broker_with_metrics(tmp_path_factory.mktemp("tv2") / "data", {"offsets.topic.num.partitions": "1"}) as b:
        finalize_tv2(lib, b.bootstrap, tmp_path_factory.mktemp("tv2-tools"))
        yield b


class Driver:
    """One Java transactional producer; :meth:`do` sends a command line and returns its answer."""

    def __init__(self, lib, bootstrap: str, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        cmd = source_command(lib, DRIVER, [], heap="256m")
        self.proc = subprocess.Popen(cmd + [bootstrap, transactional_id], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("eof")

    def do(self, command: str, timeout: float = 120.0) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer to {command!r}") from None

    def ok(self, command: str) -> str:
        answer = self.do(command)
        assert answer.startswith("ok"), (command, answer)
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.do("quit", timeout=30)
            except (AssertionError, BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def drivers(lib):
    started: list[Driver] = []

    def start(bootstrap: str, transactional_id: str) -> Driver:
        d = Driver(lib, bootstrap, transactional_id)
        started.append(d)
        return d
    yield start
    for d in started:
        d.close()


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def txn_state(bootstrap: str, tid: str, timeout: float = 30.0) -> tuple[str, int, int]:
    """(state, producer id, producer epoch) of ``tid`` by DescribeTransactions, once its coordinator
    answers (it may still be loading after a restart)."""
    deadline = time.monotonic() + timeout
    while True:
        s = wire.call(bootstrap, DTQ(transactional_ids=[tid]), 0).transaction_states[0]
        if s.error_code == 0:
            return s.transaction_state, s.producer_id, s.producer_epoch
        assert time.monotonic() < deadline, s
        time.sleep(0.2)


def settled(bootstrap: str, tid: str) -> tuple[str, int, int]:
    """:func:`txn_state` once the transaction is no longer Prepare* (its markers written)."""
    deadline = time.monotonic() + 30
    while (state := txn_state(bootstrap, tid))[0].startswith("Prepare"):
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    return state


def producers(bootstrap: str, topic: str, partition: int = 0) -> dict[int, int]:
    """{producer id: epoch} of the partition's active producers (DescribeProducers)."""
    resp = wire.call(bootstrap, DPQ(topics=[DPQ.TopicRequest(name=topic, partition_indexes=[partition])]), 0)
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p
    return {a.producer_id: a.producer_epoch for a in p.active_producers}


def committed_values(bootstrap: str, topic: str) -> list[str]:
    return [v.decode() for _p, _o, _k, v in read_to_end(bootstrap, topic, [0], isolation="read_committed")]


def new_topic(broker, name: str) -> str:
    """``name``, auto-created by a first, empty and non-transactional record (offset 0)."""
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(name, value=b"")
    assert p.flush(30) == 0
    return name


def test_java_producer_commits_and_aborts_with_end_txn_v5_and_no_add_partitions(broker, drivers):
    topic, tid = new_topic(broker, _uid("tv2")), _uid("tv2-tid")
    d = drivers(broker.bootstrap, tid)
    d.ok("init")
    state, pid, epoch = txn_state(broker.bootstrap, tid)
    assert state == "Empty"

    before = requests_by_version(broker)
    expected = [""]   # the non-transactional record new_topic wrote
    for i, how in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        values = [f"t{i}-{how}-{j}" for j in range(3)]
        d.ok(f"txn {how} {topic} {','.join(values)}")
        if how == "commit":
            expected += values
        # every transaction bumps the epoch (KIP-890 part 2): the coordinator's and the partition's
        assert settled(broker.bootstrap, tid) == ("CompleteCommit" if how == "commit" else "CompleteAbort",
                                                  pid, epoch + i + 1)
        assert producers(broker.bootstrap, topic)[pid] == epoch + i + 1
    sent = grew(before, requests_by_version(broker))
    assert sent["EndTxn"] == {5}, sent
    assert sent["Produce"] == {13}, sent   # v12 plus topic ids (KIP-516): the broker adds the partitions
    assert "AddPartitionsToTxn" not in sent and "AddOffsetsToTxn" not in sent, sent
    assert committed_values(broker.bootstrap, topic) == expected


def test_a_zombie_with_the_old_epoch_is_fenced(broker, drivers):
    topic, tid = new_topic(broker, _uid("tv2-zombie")), _uid("tv2-zombie-tid")
    old = drivers(broker.bootstrap, tid)
    old.ok("init")
    old.ok(f"txn commit {topic} before")
    old.ok(f"open {topic} zombie")   # a transaction left open
    _, pid, old_epoch = txn_state(broker.bootstrap, tid)
    new = drivers(broker.bootstrap, tid)
    new.ok("init")   # fences the old producer: its open transaction is aborted
    state, new_pid, new_epoch = settled(broker.bootstrap, tid)
    assert (state, new_pid) == ("Empty", pid) and new_epoch > old_epoch
    answer = old.do("end commit")
    assert answer.startswith("error") and "ProducerFenced" in answer, answer
    new.ok(f"txn commit {topic} fresh")
    assert committed_values(broker.bootstrap, topic) == ["", "before", "fresh"]


def test_consume_transform_produce_commits_offsets_with_txn_offset_commit_v5(broker, drivers):
    source, sink = new_topic(broker, _uid("tv2-in")), new_topic(broker, _uid("tv2-out"))
    group, tid = _uid("tv2-g"), _uid("tv2-copier")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce(source, key=b"k%d" % i, value=b"in%d" % i)
    assert p.flush(30) == 0
    d = drivers(broker.bootstrap, tid)
    d.ok("init")
    before = requests_by_version(broker)
    assert d.ok(f"copy {source} {sink} {group} 6") == "ok 6"   # the empty record and the 5 others
    sent = grew(before, requests_by_version(broker))
    assert sent["TxnOffsetCommit"] == {5} and sent["EndTxn"] == {5}, sent
    assert "AddOffsetsToTxn" not in sent and "AddPartitionsToTxn" not in sent, sent
    assert settled(broker.bootstrap, tid)[0] == "CompleteCommit"
    assert committed_values(broker.bootstrap, sink) == ["", "-copied"] + [f"in{i}-copied" for i in range(5)]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        [tp] = c.committed([TopicPartition(source, 0)], timeout=30)
    finally:
        c.close()
    assert tp.offset == 6


def test_confluent_kafka_and_kafka_python_transactions_still_work(broker):
    topic = new_topic(broker, _uid("tv2-old"))
    before = requests_by_version(broker)
    tid = _uid("tv2-rdkafka")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    for i, commit in enumerate([True, False, True]):
        p.begin_transaction()
        p.produce(topic, value=b"ck%d-%s" % (i, b"c" if commit else b"a"))
        p.flush(30)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    rdkafka = grew(before, requests_by_version(broker))
    before = requests_by_version(broker)
    kp_tid = _uid("tv2-kp")
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=kp_tid)
    kp.init_transactions()
    kp.begin_transaction()
    kp.send(topic, value=b"kp-c")
    kp.commit_transaction()
    kp.begin_transaction()
    kp.send(topic, value=b"kp-a")
    kp.flush()
    kp.abort_transaction()
    kp.close()
    kafka_python = grew(before, requests_by_version(broker))
    assert committed_values(broker.bootstrap, topic) == ["", "ck0-c", "ck2-c", "kp-c"]
    # each adds its partitions itself and ends with an EndTxn below v5 (librdkafka 2.16: v1,
    # kafka-python 3.0: v3), so the epoch stays where InitProducerId put it (TV1 semantics)
    for sent, (tid_, outcome) in ((rdkafka, (tid, "CompleteCommit")), (kafka_python, (kp_tid, "CompleteAbort"))):
        assert max(sent["EndTxn"]) < 5 and "AddPartitionsToTxn" in sent, sent
        state, _pid, epoch = settled(broker.bootstrap, tid_)
        assert (state, epoch) == (outcome, 0)


def test_a_restart_reads_the_tv2_transaction_state_back(lib, tmp_path, drivers):
    with broker_with_metrics(tmp_path / "data") as b:
        finalize_tv2(lib, b.bootstrap, tmp_path)
        topic, tid = new_topic(b, _uid("tv2-restart")), _uid("tv2-restart-tid")
        d = drivers(b.bootstrap, tid)
        d.ok("init")
        d.ok(f"txn commit {topic} a,b")
        d.ok(f"txn abort {topic} x")
        before = settled(b.bootstrap, tid)
        assert before[0] == "CompleteAbort"
        b.restart()
        assert txn_state(b.bootstrap, tid) == before   # read back from __transaction_state
        # the same producer goes on with the epoch the last EndTxn gave it
        d.ok(f"txn commit {topic} c")
        assert settled(b.bootstrap, tid) == ("CompleteCommit", before[1], before[2] + 1)
        assert committed_values(b.bootstrap, topic) == ["", "a", "b", "c"]
        # a transaction left open across a restart is completed by its producer afterwards
        d.ok(f"open {topic} d")
        b.restart()
        assert txn_state(b.bootstrap, tid)[0] == "Ongoing"
        d.ok("end commit")
        assert settled(b.bootstrap, tid) == ("CompleteCommit", before[1], before[2] + 2)
        assert committed_values(b.bootstrap, topic) == ["", "a", "b", "c", "d"]


def test_tv2_over_a_cluster_with_the_coordinator_killed(lib, tmp_path, drivers):
    """Three nodes, partitions led by different brokers: the coordinator adds partitions led
    elsewhere when their leaders ask (AddPartitionsToTxn v5 from Produce v13), writes TV2 markers to
    them by WriteTxnMarkers v2, and after a SIGKILL of the coordinator the next one reloads the
    TV2 state (the log value v1) and the same producer goes on with the epoch it was given."""
    overrides = {"offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3"}
    with Cluster(tmp_path, 3, overrides=overrides) as c:
        finalize_tv2(lib, c.bootstrap, tmp_path)
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic("t", 3, 3)])["t"].result(30)
        tid = _uid("tv2-cluster")
        d = drivers(c.bootstrap, tid)
        d.ok("init")
        expected = []
        for i, how in enumerate(["commit", "abort", "commit"]):
            values = [f"a{i}-{j}" for j in range(9)]   # keys spread over the three partitions
            d.ok(f"txn {how} t {','.join(values)}")
            expected += values if how == "commit" else []
        def coordinator_addr() -> str:   # DescribeTransactions goes to the coordinator
            node = wait_until(lambda: coordinator(c, tid, 1), 30, "a transaction coordinator")
            return f"127.0.0.1:{c.client_ports[node - 1]}"

        killed = wait_until(lambda: coordinator(c, tid, 1), 10, "a transaction coordinator")
        leaders = {p.leader for p in admin.list_topics("t", timeout=30).topics["t"].partitions.values()}
        assert leaders - {killed}, leaders   # some partitions are led by other brokers than the coordinator
        state, pid, epoch = settled(coordinator_addr(), tid)
        assert state == "CompleteCommit" and epoch == 3
        c.node(killed).kill9()
        for i, how in enumerate(["commit", "abort", "commit"], start=3):
            values = [f"b{i}-{j}" for j in range(9)]
            d.ok(f"txn {how} t {','.join(values)}")
            expected += values if how == "commit" else []
        assert coordinator(c, tid, 1) not in (None, killed)
        assert settled(coordinator_addr(), tid) == ("CompleteCommit", pid, 6)
        got = read_to_end(c.bootstrap, "t", [0, 1, 2], isolation="read_committed")
        assert sorted(v.decode() for _p, _o, _k, v in got) == sorted(expected)
