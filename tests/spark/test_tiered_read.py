"""Spark's batch Kafka source over a tiered topic (KIP-405): with most of the topic only in
remote storage, ``spark.read.format("kafka")`` from earliest to latest returns every record, in
order, with its value."""

from __future__ import annotations

import pytest

from tests.spark.support import batch, create_topic, produce_values, unique
from tests.support.broker_process import BrokerProcess, wait_for
from tests.tiered.helpers import TIERED_BROKER, TIERED_TOPIC, local_segments

RECORDS = 6000


@pytest.fixture(scope="module")
def tiered_broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-tiered")
    with BrokerProcess(root / "data", {**TIERED_BROKER, "rsm.config.dir": str(root / "remote")}) as b:
        b.data_dir_path = root / "data"
        yield b


def test_batch_read_of_a_tiered_topic_returns_every_record(spark, tiered_broker):
    bootstrap = tiered_broker.bootstrap
    topic = create_topic(bootstrap, unique("tiered"), config=TIERED_TOPIC)
    values = [b"%06d" % i * 170 for i in range(RECORDS)]         # ~6 MB
    produce_values(bootstrap, topic, 0, values)
    local = tiered_broker.data_dir_path / f"{topic}-0"
    wait_for(lambda: (segs := local_segments(local)) and segs[0][0] > RECORDS // 2, timeout=90)  # half is remote only
    rows = batch(spark, bootstrap, subscribe=topic).selectExpr("offset", "value").orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(RECORDS))
    assert [bytes(r.value) for r in rows] == values
