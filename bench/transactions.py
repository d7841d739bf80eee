"""Transaction throughput of a real kcompat broker, driven by confluent-kafka (librdkafka).

    python3 bench/transactions.py [--records N] [--quick]

Starts ``python -m kcompat serve`` on a free port with a temporary ``log.dirs`` and measures, each
on its own single-partition topic:

1. transactions per second for transactions of 100 records of 1 KiB from one transactional
   producer (begin, produce 100, commit — commit waits for the markers);
2. the throughput (records/s, MB/s) of an idempotent producer (acks=all) on ``--records``
   (200,000) records of 1 KiB;
3. the same records through a transactional producer in transactions of 1,000 records;

Steps 2 and 3 alternate ``--rounds`` (3) times and the medians are compared: on a small VM the
speed of writing to the page cache varies a lot from minute to minute, and a single pair of runs
can show anything from -20% to +20%. Prints the cost of transactions relative to the idempotent
producer (the target is at most 20% with 1,000-record transactions). Nothing is asserted; the last
line is a one-line JSON summary.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.broker_process import BrokerProcess  # noqa: E402

VALUE = b"x" * 1024
MB = 1_000_000
TARGET_COST = 0.20
COMMON = {"linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
          "queue.buffering.max.kbytes": 1_048_576}


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep it alive until the result arrives
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def txn_rate(bootstrap: str, transactions: int, per_txn: int) -> float:
    topic = f"txn-rate-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:6]}", **COMMON})
    p.init_transactions(30)
    t0 = time.perf_counter()
    for _ in range(transactions):
        p.begin_transaction()
        for _ in range(per_txn):
            p.produce(topic, VALUE)
        p.commit_transaction(30)
    return transactions / (time.perf_counter() - t0)


def throughput(bootstrap: str, records: int, per_txn: int | None) -> float:
    topic = f"txn-thr-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic)
    conf = {"bootstrap.servers": bootstrap, **COMMON}
    if per_txn is None:
        conf.update({"enable.idempotence": True, "acks": "all"})
    else:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:6]}"
    p = Producer(conf)
    if per_txn is not None:
        p.init_transactions(30)
    t0 = time.perf_counter()
    if per_txn is None:
        for i in range(records):
            p.produce(topic, VALUE)
            if i % 50_000 == 0:
                p.poll(0)
        assert p.flush(120) == 0
    else:
        for start in range(0, records, per_txn):
            p.begin_transaction()
            for _ in range(min(per_txn, records - start)):
                p.produce(topic, VALUE)
            p.commit_transaction(60)
    return records / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--transactions", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="10x fewer records and transactions")
    args = ap.parse_args()
    if args.quick:
        args.records //= 10
        args.transactions //= 10
    tmp = Path(tempfile.mkdtemp(prefix="kcompat-bench-txn-"))
    try:
        with BrokerProcess(tmp / "data") as broker:
            rate = txn_rate(broker.bootstrap, args.transactions, 100)
            idems, txns = [], []
            for _ in range(args.rounds):
                idems.append(throughput(broker.bootstrap, args.records, None))
                txns.append(throughput(broker.bootstrap, args.records, 1000))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    idem, txn = statistics.median(idems), statistics.median(txns)
    print("idempotent runs (records/s):", [round(x) for x in idems])
    print("transactional runs (records/s):", [round(x) for x in txns])
    cost = 1 - txn / idem
    print(f"transactions of 100 x 1 KiB:        {rate:10.1f} txn/s")
    print(f"idempotent producer (acks=all):     {idem:10.0f} records/s  {idem * 1024 / MB:7.1f} MB/s")
    print(f"transactional, 1,000 per txn:       {txn:10.0f} records/s  {txn * 1024 / MB:7.1f} MB/s")
    print(f"cost of transactions:               {cost * 100:9.1f} %   "
          f"({'PASS' if cost <= TARGET_COST else 'FAIL'}: at most {TARGET_COST * 100:.0f}%)")
    print(json.dumps({"txn_per_s_100x1KiB": round(rate, 1), "idempotent_records_per_s": round(idem),
                      "transactional_records_per_s_1000": round(txn), "cost": round(cost, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
