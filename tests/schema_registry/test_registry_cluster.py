"""The registry on a 3-node cluster: writes through any node go to the one writer (the leader of
``_schemas``-0) and are read back at once from the node that took them; ids stay unique and
increasing after the writer is killed with SIGKILL and another node takes over; every surviving
node answers the same."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from tests.schema_registry.test_registry_rest import Registry, register
from tests.support.cluster import Cluster, with_http_listeners


def schema(i: int) -> dict:
    return {"type": "enum", "name": f"E{i}", "symbols": ["A"]}


def schemas_leader(bootstrap: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("_schemas", timeout=10)
    return md.topics["_schemas"].partitions[0].leader


def replicas(bootstrap: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("_schemas", timeout=10)
    return len(md.topics["_schemas"].partitions[0].replicas)


def view(sr: Registry) -> dict:
    return {s: sr.ok("GET", f"/subjects/{s}/versions/latest")["id"] for s in sr.ok("GET", "/subjects")}


def test_one_writer_survives_its_kill(tmp_path):
    cluster = Cluster(tmp_path, 3)
    ports = with_http_listeners(cluster)
    with cluster:
        regs = {i + 1: Registry(f"http://127.0.0.1:{p}") for i, p in enumerate(ports)}
        ids: list[int] = []

        def write_through(node_id: int, i: int) -> None:
            status, out, _ = register(regs[node_id], f"c{i}", schema(i))
            assert status == 200, out
            ids.append(out["id"])
            # read-your-write on the node that took the request
            assert regs[node_id].ok("GET", f"/subjects/c{i}/versions/latest")["id"] == out["id"]

        for i in range(6):
            write_through(i % 3 + 1, i)
        assert replicas(cluster.bootstrap) == 3
        writer = schemas_leader(cluster.bootstrap)
        assert writer in regs
        # the config goes through the writer too and every node reads it
        regs[writer % 3 + 1].ok("PUT", "/config", {"compatibility": "NONE"})
        cluster.node(writer).kill9()
        survivors = [n for n in regs if n != writer]
        for n in survivors:   # reads go on without the writer
            assert regs[n].ok("GET", "/config") == {"compatibilityLevel": "NONE"}
        for i in range(6, 12):
            write_through(survivors[i % 2], i)
        assert ids == sorted(ids) and len(set(ids)) == len(ids) == 12
        assert schemas_leader(cluster.bootstrap) in survivors
        views = [view(regs[n]) for n in survivors]
        assert views[0] == views[1] == {f"c{i}": ids[i] for i in range(12)}
        # the restarted node rebuilds the same view from the topic
        cluster.node(writer).start()
        assert view(regs[writer]) == views[0]
        assert regs[writer].ok("GET", "/config") == {"compatibilityLevel": "NONE"}
