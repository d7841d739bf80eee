"""The README's three-node cluster: ``config/cluster/node{1,2,3}.properties`` on 127.0.0.1-3,
started with ``kcompat serve --cluster-id ... --config ...`` exactly as documented (only the
data directories moved into the test's temporary directory)."""

from __future__ import annotations

import threading
import time

from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.broker.cluster_id import new_cluster_id
from kcompat.testing.ports import machine_lock
from tests.support.broker_process import ROOT, BrokerProcess

BOOTSTRAP = "127.0.0.1:9092,127.0.0.2:9092,127.0.0.3:9092"


class DocumentedNode(BrokerProcess):
    def __init__(self, i: int, data_dir, cluster_id: str) -> None:
        super().__init__(data_dir, host=f"127.0.0.{i}", port=9092)
        self.i = i
        self.cluster_id = cluster_id

    def args(self) -> list[str]:
        import sys
        return [sys.executable, "-m", "kcompat", "serve", f"--cluster-id={self.cluster_id}",
                "--config", str(ROOT / "config" / "cluster" / f"node{self.i}.properties"),
                "--override", f"log.dirs={self.data_dir}"]


def test_the_documented_three_node_cluster_starts_and_shows_three_brokers(tmp_path):
    with machine_lock("port-9092"):     # the documented ports; the container tests publish 127.0.0.1:9092
        run_documented_cluster(tmp_path)


def run_documented_cluster(tmp_path) -> None:
    cid = new_cluster_id()
    nodes = [DocumentedNode(i, tmp_path / f"node{i}", cid) for i in (1, 2, 3)]
    threads = [threading.Thread(target=n.start) for n in nodes]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(n.bootstrap for n in nodes), [n.log_text()[-800:] for n in nodes]
        for i in (1, 2, 3):
            md = AdminClient({"bootstrap.servers": f"127.0.0.{i}:9092"}).list_topics(timeout=10)
            assert {b.id: (b.host, b.port) for b in md.brokers.values()} == \
                {j: (f"127.0.0.{j}", 9092) for j in (1, 2, 3)}
            assert md.cluster_id == cid
        # the documented configs replicate new topics three ways (default.replication.factor=3)
        admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
        admin.create_topics([NewTopic("documented")])["documented"].result(15)
        deadline = time.monotonic() + 15
        while True:
            p = admin.list_topics("documented", timeout=10).topics["documented"].partitions.get(0)
            if p is not None and sorted(p.isrs) == [1, 2, 3] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3]
    finally:
        for n in nodes:
            if n.proc is not None:
                n.stop()
