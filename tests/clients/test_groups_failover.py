"""A group member killed with SIGKILL (a consumer in its own process, so it sends no LeaveGroup):
the broker notices only when its session times out, then its partitions move to the members left
and consumption goes on from the offsets it committed — confluent-kafka and kafka-python against a
real kcompat process.

Members use session.timeout.ms=6000 (group.min.session.timeout.ms, the shortest the broker accepts)
and heartbeat.interval.ms=1000. The partitions must move no later than session timeout + heartbeat
interval (the survivors learn of the rebalance from their next heartbeat) + a margin for a loaded
machine after the kill, and not within half the session timeout (the broker waits for the session to
expire: a closed connection does not end a membership, as in Kafka; about 6-7 s is typical).
"""

from __future__ import annotations

import pytest

from tests.clients.common import topic_name
from tests.clients.test_groups_common import (
    KINDS, Members, assert_exactly_once, client_config, create_topic, describe_members, end_offsets, produce,
    unique, wait_balanced, wait_committed, wait_read,
)

PARTITIONS = 6
SESSION_TIMEOUT_S = 6.0
HEARTBEAT_INTERVAL_S = 1.0
MARGIN_S = 5.0
SETTINGS = {"session.timeout.ms": int(SESSION_TIMEOUT_S * 1000), "heartbeat.interval.ms": int(HEARTBEAT_INTERVAL_S * 1000)}


@pytest.mark.parametrize("kind", KINDS)
def test_killed_member_partitions_move_within_session_timeout(broker, request, kind):
    topic = topic_name(request)
    group = unique("kill")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    config = client_config(kind, SETTINGS)
    with Members() as ms:
        victim = ms.proc(kind, "victim", broker.bootstrap, group, topic, config)
        survivors = [ms.new(kind, f"s{i}", broker.bootstrap, group, topic, config) for i in range(2)]
        everyone = [victim] + survivors
        wait_balanced(everyone, PARTITIONS, timeout=40)
        sent1 = produce(broker.bootstrap, topic, 600, "before", partitions=PARTITIONS)
        wait_read(sent1, everyone)
        wait_committed(everyone, end_offsets(sent1))
        orphaned = victim.owned_now()
        assert len(orphaned) == 2

        killed_at = victim.kill_now()
        wait_balanced(survivors, PARTITIONS, timeout=SESSION_TIMEOUT_S + HEARTBEAT_INTERVAL_S + MARGIN_S + 10)
        took_over = [e.t for m in survivors for e in m.events_now()
                     if e.kind == "assign" and e.t > killed_at and set(e.partitions) & orphaned]
        assert took_over, describe_members(everyone)
        elapsed = max(took_over) - killed_at
        assert elapsed >= SESSION_TIMEOUT_S / 2, (
            f"partitions moved {elapsed:.1f}s after the kill: before the session timed out (a dead "
            f"consumer's connection closing must not end its membership)")
        assert elapsed <= SESSION_TIMEOUT_S + HEARTBEAT_INTERVAL_S + MARGIN_S, (
            f"partitions moved {elapsed:.1f}s after the kill, session.timeout.ms is {SESSION_TIMEOUT_S}s"
            f"{describe_members(everyone)}")

        # consumption goes on, on every partition, from the offsets the dead member committed
        sent2 = produce(broker.bootstrap, topic, 600, "after", partitions=PARTITIONS)
        wait_read(sent2, survivors)
        wait_committed(survivors, end_offsets(sent1 + sent2))
        ms.stop(*survivors)
    assert_exactly_once(sent1 + sent2, everyone)
    assert not any(r.partition in orphaned and r.value.startswith(b"before")
                   for m in survivors for r in m.reads_now()), "records the dead member committed were read again"
    print(f"{kind}: partitions of the killed member moved {elapsed:.2f}s after SIGKILL "
          f"(session.timeout.ms={int(SESSION_TIMEOUT_S * 1000)})")
