"""Reading a topic back to its end, for tests: every record up to the high watermark each partition
had when the read began, however slow the machine.

"Read until nothing came for N seconds" is a race: on a loaded machine the consumer may not even
have fetched its first batch within N seconds, and the read returns nothing. Here the end is known
first (ListOffsets: the high watermark), and the read goes on until librdkafka reports the end of
every partition at or past it (``enable.partition.eof``; a read_committed consumer's end is the last
stable offset, which reaches the high watermark once the last transaction's markers are written).
The timeout only bounds a hung read; reaching it is a failure that says where each partition
stood.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition


def end_offsets(bootstrap: str, topic: str, partitions) -> dict[int, int]:
    """The high watermark of each partition (ListOffsets latest, read_uncommitted)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"end-offsets-{uuid.uuid4().hex[:8]}"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in partitions}
    finally:
        c.close()


def read_to_end(bootstrap: str, topic: str, partitions, *, isolation: str = "read_uncommitted",
                headers: bool = False, timeout: float = 60.0) -> list[tuple]:
    """Every record of ``partitions`` of ``topic`` from the log start to the high watermark at
    the call, as ``(partition, offset, key, value)`` sorted by partition and offset, plus the
    headers (a list, [] for none) if ``headers``. read_committed returns the committed records
    only, once the last stable offset has reached that high watermark. Raises AssertionError if the
    end is not reached within ``timeout`` seconds."""
    partitions = list(partitions)
    ends = end_offsets(bootstrap, topic, partitions)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-back-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out = []
    reached: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while any(reached.get(p, -1) < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic} {isolation}: the end {ends} was not reached within "
                                     f"{timeout}s (end of partition seen at {reached}, {len(out)} records read)")
            for m in c.consume(1000, 0.2):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        reached[m.partition()] = m.offset()
                        continue
                    raise KafkaException(err)
                row = (m.partition(), m.offset(), m.key(), m.value())
                out.append(row + (m.headers() or [],) if headers else row)
    finally:
        c.close()
    return sorted(out, key=lambda r: (r[0], r[1]))
