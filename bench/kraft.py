"""KRaft controller quorum benchmark: controller failover time and metadata operations per second.

(a) **Failover**: a 3-node kcompat cluster (every node broker + controller voter, Kafka's default
quorum timeouts unless ``--fast``); each trial kill -9s the active controller and measures the
time until a surviving node reports a new leader with DescribeQuorum, then restarts the killed
node and waits until every voter is back at the high watermark. Prints median and max over
``--trials`` (20).

(b) **Topic creations per second**: CreateTopics of ``--topics`` (200) topics with 10 partitions
each, one topic per request, sent one after another by confluent-kafka's AdminClient to a node
that is *not* the active controller (so each is forwarded), then the same to the controller
itself. Every creation is a Raft commit of 11 records (TopicRecord + 10 PartitionRecords)
replicated to a majority.

Run: ``python3 bench/kraft.py [--trials 20] [--topics 200] [--fast]``. The last line is a one-line
JSON summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.cluster import FAST, Cluster, wait_until  # noqa: E402

KAFKA_TIMEOUTS = {"controller.quorum.election.timeout.ms": "1000", "controller.quorum.fetch.timeout.ms": "2000",
                  "broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000"}


def failover(cluster: Cluster, trials: int) -> list[float]:
    times = []
    for trial in range(trials):
        old = wait_until(cluster.leader_id, 30, "a leader")
        t0 = time.monotonic()
        cluster.node(old).kill9()
        wait_until(lambda: (lambda lid: lid if lid not in (None, old) else None)(cluster.leader_id()), 30,
                   "a new leader", interval=0.01)
        times.append(time.monotonic() - t0)
        print(f"trial {trial + 1}: node {old} killed, new controller after {times[-1] * 1000:.0f} ms", flush=True)
        cluster.start([cluster.node(old)])
        wait_until(lambda: (lambda q: q if q and len(q.current_voters) == 3 and
                            all(v.log_end_offset >= q.high_watermark for v in q.current_voters) else None)(
            cluster.quorum()), 30, "all voters caught up")
    return times


def creations(cluster: Cluster, count: int, via_controller: bool, tag: str) -> float:
    leader = wait_until(cluster.leader_id, 30, "a leader")
    idx = leader - 1 if via_controller else next(i for i in range(3) if i + 1 != leader)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.client_ports[idx]}"})
    t0 = time.monotonic()
    for i in range(count):
        name = f"bench-{tag}-{i}"
        admin.create_topics([NewTopic(name, 10, 1)], operation_timeout=30)[name].result(30)
    return count / (time.monotonic() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--fast", action="store_true", help="the test suite's shorter quorum timeouts")
    args = ap.parse_args()
    summary: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp), overrides=FAST if args.fast else KAFKA_TIMEOUTS)
        with cluster:
            times = failover(cluster, args.trials)
            summary["failover_ms"] = {"median": round(statistics.median(times) * 1000),
                                      "max": round(max(times) * 1000), "trials": len(times)}
            print(f"controller failover: median {summary['failover_ms']['median']} ms, "
                  f"max {summary['failover_ms']['max']} ms over {len(times)} trials")
            forwarded = creations(cluster, args.topics, False, "fwd")
            direct = creations(cluster, args.topics, True, "ctl")
            summary["topic_creations_per_s"] = {"forwarded": round(forwarded, 1), "on_controller": round(direct, 1),
                                                "partitions_per_topic": 10}
            print(f"topic creations (10 partitions each): {forwarded:.1f}/s forwarded, {direct:.1f}/s sent to "
                  f"the active controller")
    summary["quorum_timeouts"] = "test (fast)" if args.fast else "Kafka defaults"
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
