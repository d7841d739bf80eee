"""Kafka Connect in distributed mode (``--group ecosystem``): FileStream source and sink.

Workers are ``org.apache.kafka.connect.cli.ConnectDistributed`` of Kafka 3.9.1 and of 4.3.1 (the
application jars with ``connect-file``), one Connect cluster per case (its group, config, offset
and status topics named after the case), configured through the REST API:

1. worker 1 starts; a FileStreamSource connector tails ``in.txt`` into a topic and a
   FileStreamSink connector writes the topic to ``out.txt``; 100 lines go through;
2. worker 1 is restarted (SIGTERM, start again): the connectors resume from their committed
   offsets and 100 more lines go through, none lost and none repeated (a clean stop commits);
3. worker 2 joins, worker 1 is killed with SIGKILL; worker 2 takes over every connector and task
   (``scheduled.rebalance.max.delay.ms=0``, ``session.timeout.ms=6000`` for the workers and the sink
   task's consumer); 100 more lines must come
   through, none lost (the sink may repeat some: at-least-once after a kill). The time from the kill
   to the last of them in ``out.txt`` is the **takeover time** in ``details.timings``.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from conformance import procs
from conformance.ecosystem import App, apps_lib, delete_group_when_empty, register, wait_for
from conformance.model import CaseFailure

WORKER = "org.apache.kafka.connect.cli.ConnectDistributed"
BATCH = 100


def rest(url: str, method: str = "GET", body: dict | None = None, timeout: float = 10.0):
    """A Connect REST call; the decoded JSON answer (None for an empty one)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read()
    return json.loads(text) if text else None


class Worker:
    """One distributed worker of the case's Connect cluster on its own REST port."""

    def __init__(self, ctx, lib, name: str, props: dict[str, str]) -> None:
        self.port = procs.free_port("127.0.0.1")
        self.url = f"http://127.0.0.1:{self.port}"
        conf = dict(props, listeners=self.url, **{"rest.advertised.host.name": "127.0.0.1",
                                                  "rest.advertised.port": str(self.port)})
        path = ctx.workdir / f"{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.app = App(lib, ctx.workdir, name, WORKER, [path], heap="768m")

    def start(self) -> "Worker":
        self.app.start()
        return self

    def serving(self) -> bool:
        try:
            return isinstance(rest(self.url + "/connectors", timeout=2), list)
        except (OSError, ValueError, urllib.error.HTTPError):
            return False


def all_running(url: str, names: list[str]) -> bool:
    """Every connector and its task RUNNING, as the worker at ``url`` reports."""
    for name in names:
        try:
            st = rest(f"{url}/connectors/{name}/status", timeout=5)
        except (OSError, ValueError, urllib.error.HTTPError):
            return False
        if st["connector"]["state"] != "RUNNING" or not st["tasks"] or any(
                t["state"] != "RUNNING" for t in st["tasks"]):
            return False
    return True


def connect_case(ctx, version: str) -> None:
    lib = apps_lib(version)
    topic = ctx.topic(1)
    group = f"{ctx.prefix}-connect"
    source_file, sink_file = ctx.workdir / "in.txt", ctx.workdir / "out.txt"
    source_file.write_text("")
    props = {
        "bootstrap.servers": ctx.bootstrap, "group.id": group,
        "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status", "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "offset.flush.interval.ms": "1000", "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "0", "consumer.session.timeout.ms": "6000",
        "consumer.heartbeat.interval.ms": "1000",
    }
    ctx.on_cleanup(lambda: delete_group_when_empty(ctx, group))
    ctx.on_cleanup(lambda: delete_group_when_empty(ctx, f"connect-{ctx.prefix}-sink"))  # the sink task's
    ctx.on_cleanup(lambda: ctx.admin.delete_topics(ctx.admin.topics_with_prefix(group)))
    w1 = Worker(ctx, lib, "worker-1", props).start()
    ctx.on_cleanup(w1.app.stop)
    wait_for(ctx, "worker 1's REST API", w1.serving, 120, [w1.app])
    connectors = {
        f"{ctx.prefix}-source": {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                                 "tasks.max": "1", "file": str(source_file), "topic": topic},
        f"{ctx.prefix}-sink": {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                               "tasks.max": "1", "file": str(sink_file), "topics": topic},
    }
    for name, config in connectors.items():
        rest(f"{w1.url}/connectors/{name}/config", "PUT", config, timeout=60)
    names = list(connectors)
    wait_for(ctx, "both connectors and their tasks RUNNING", lambda: all_running(w1.url, names), 120, [w1.app])

    written: list[str] = []

    def append(n: int) -> None:
        lines = [f"line-{len(written) + i}" for i in range(n)]
        with open(source_file, "a") as f:
            f.write("".join(f"{ln}\n" for ln in lines))
        written.extend(lines)

    def sunk() -> list[str]:
        try:
            return sink_file.read_text().splitlines()
        except OSError:
            return []

    def all_sunk() -> bool:
        return set(written) <= set(sunk())

    append(BATCH)
    wait_for(ctx, f"the first {BATCH} lines in the sink file", all_sunk, 120, [w1.app])

    w1.app.stop()
    w1 = Worker(ctx, lib, "worker-1-restarted", props).start()
    ctx.on_cleanup(w1.app.stop)
    wait_for(ctx, "the restarted worker's connectors RUNNING",
             lambda: w1.serving() and all_running(w1.url, names), 120, [w1.app])
    append(BATCH)
    wait_for(ctx, f"{BATCH} more lines after the restart", all_sunk, 120, [w1.app])
    after_restart = sunk()
    if after_restart != written:
        lost = [ln for ln in written if ln not in set(after_restart)]
        raise CaseFailure(f"after a clean restart the sink file has {len(after_restart)} lines for "
                          f"{len(written)} written ({len(lost)} lost, e.g. {lost[:5]}; the rest repeated)")
    ctx.observe(clean_restart_lines_exact=True)

    w2 = Worker(ctx, lib, "worker-2", props).start()
    ctx.on_cleanup(w2.app.stop)
    wait_for(ctx, "worker 2 to join and both connectors RUNNING",
             lambda: w2.serving() and all_running(w2.url, names), 120, [w1.app, w2.app])
    w1.app.kill()
    killed = time.monotonic()
    append(BATCH)
    wait_for(ctx, f"worker 2 to take over and sink {BATCH} more lines", all_sunk, 180, [w2.app])
    takeover = time.monotonic() - killed
    final = sunk()
    missing = [ln for ln in written if ln not in set(final)]
    if missing:
        raise CaseFailure(f"{len(missing)} lines never reached the sink file, e.g. {missing[:5]}")
    survivor = f"127.0.0.1:{w2.port}"

    def task_workers() -> list[str]:
        return sorted({t["worker_id"] for n in names for t in rest(f"{w2.url}/connectors/{n}/status")["tasks"]})

    try:  # the status topic says where each task runs; worker 2 reads it asynchronously
        wait_for(ctx, "worker 2's status to show every task on worker 2", lambda: task_workers() == [survivor],
                 60, [w2.app])
    except CaseFailure:
        raise CaseFailure(f"tasks on {task_workers()}, not only on worker 2 ({survivor})") from None
    ctx.observe(tasks_all_on_surviving_worker=True)
    ctx.observe(lines_written=len(written), lines_lost=0)
    ctx.detail(timings={"takeover_s": round(takeover, 1)}, duplicates_after_kill=len(final) - len(set(final)))
    w2.app.stop()


register("connect.distributed-filestream", area="connect", func=connect_case, doc=__doc__,
         requires=[19, 32, 11, 14], timeout=480.0,
         title="Kafka Connect {version} distributed: FileStream source and sink, restart, takeover")
