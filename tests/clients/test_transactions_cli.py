"""ListTransactions v2's transactional id pattern (KIP-1152) with Kafka 4.3.1's own
``kafka-transactions.sh list --transactional-id-pattern`` (``TransactionsCommand``, which sends v2
through the Java AdminClient) against a real kcompat process, and on the wire: the pattern must
match the whole id (as Kafka's RE2/J ``matches``), null or empty lists every id, and a pattern RE2
refuses is INVALID_REGULAR_EXPRESSION - the answers Apache Kafka 4.3.1 gave to the same requests."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from conformance import maven
from conformance.clients import tool_server
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.list_transactions import ListTransactionsRequest as LTQ
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess

IDS = ("orders-a", "orders-b", "payments-1")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("txn-cli") / "data") as b:
        for tid in IDS:   # an Empty transaction for each id: InitProducerId and nothing else
            Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid}).init_transactions(30)
        yield b


def listed(broker, pattern: str | None, version: int = 2) -> tuple[int, list[str]]:
    resp = wire.call(broker.bootstrap, LTQ(state_filters=[], producer_id_filters=[], duration_filter=-1,
                                           transactional_id_pattern=pattern), version)
    return resp.error_code, sorted(s.transactional_id for s in resp.transaction_states)


def test_a_pattern_must_match_the_whole_transactional_id(broker):
    assert listed(broker, "orders-.*") == (0, ["orders-a", "orders-b"])
    assert listed(broker, "orders") == (0, [])                       # a prefix is not a match
    assert listed(broker, ".*-[b1]") == (0, ["orders-b", "payments-1"])
    assert listed(broker, "(?i)ORDERS-A") == (0, ["orders-a"])
    assert listed(broker, None) == (0, list(IDS))
    assert listed(broker, "") == (0, list(IDS))


def test_a_pattern_re2_refuses_is_invalid_regular_expression(broker):
    assert listed(broker, "[") == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])
    assert listed(broker, "(?<=a)b") == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])   # lookbehind: not RE2


def test_before_v2_there_is_no_pattern(broker):
    assert listed(broker, None, version=1) == (0, list(IDS))


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafka_transactions_list_with_a_transactional_id_pattern(broker):
    lib = maven.resolve_kafka("4.3.1")

    def rows(*args: str) -> list[list[str]]:
        cmd = java_command(lib, "org.apache.kafka.tools.TransactionsCommand",
                           ["--bootstrap-server", broker.bootstrap, "list", *args], heap="256m")
        out = tool_server.run_command(cmd, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        header, *lines = out.stdout.splitlines()
        assert header.split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        return sorted(line.split() for line in lines)

    everything = rows()
    assert [r[0] for r in everything] == list(IDS)
    assert all(r[3] == "Empty" for r in everything)
    assert rows("--transactional-id-pattern", "orders-.*") == [r for r in everything if r[0].startswith("orders-")]
    assert rows("--transactional-id-pattern", "payments") == []
