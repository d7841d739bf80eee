"""kcompat against Apache Kafka 4.3.1, side by side over the wire: the scenarios of
:mod:`tests.broker.parity` run one after another against one single-node Kafka 4.3.1 and then
against one zero-config kcompat (one broker pair for all of them, started once per test run), and
each test checks one scenario's answers: Kafka's are the expected ones, and kcompat's the same.

The scenarios, in the order they run (the first needs a broker where no internal topic exists):

- ``metadata_internal_topics``: a JoinGroup before ``__consumer_offsets`` exists, Metadata of
  missing internal topics, their auto-creation; CreatePartitions of a missing topic;
- ``internal_topics``: the three internal topics flagged internal once their coordinators made them;
- ``describe_producers``: DescribeProducers' per-topic errors and texts;
- ``describe_configs_errors``: DescribeConfigs' BROKER / BROKER_LOGGER / TOPIC name checks;
- ``client_quotas``: AlterClientQuotas and DescribeClientQuotas details;
- ``assignment_epochs``: KIP-1251 per-partition epochs of OffsetCommit and TxnOffsetCommit;
- ``api_versions``: ApiVersions v3 with client software names Kafka refuses;
- ``share_group_heartbeat``: ShareGroupHeartbeat's request checks, ShareGroupDescribe of a missing
  group;
- ``list_groups``: ListGroups' type and state filters over groups of every type (KIP-1043).
"""

from __future__ import annotations

import pytest

from tests.broker.parity import (
    api_versions, assignment_epochs, client_quotas, describe_configs_errors, describe_producers, internal_topics,
    list_groups, metadata_internal_topics, segment_bytes, share_group_heartbeat,
)
from tests.support.side_by_side import against_both

SCENARIOS = (metadata_internal_topics, internal_topics, describe_producers, describe_configs_errors,
             client_quotas, assignment_epochs, api_versions, share_group_heartbeat, list_groups, segment_bytes)


def _all(bootstrap: str) -> dict:
    """Every scenario's answers; a scenario that raises is answered by its exception's text, so
    that only its own test fails (the later scenarios still run)."""
    out = {}
    for m in SCENARIOS:
        try:
            out[m.__name__] = m.scenario(bootstrap)
        except Exception as e:   # noqa: BLE001 - reported by the scenario's test
            out[m.__name__] = f"{m.__name__.rsplit('.', 1)[-1]} raised {type(e).__name__}: {e}"
    return out


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> tuple[dict, dict]:
    """(kcompat's answers, Kafka 4.3.1's answers) by scenario module name."""
    return against_both(tmp_path_factory.mktemp("parity"), _all)


@pytest.mark.timeout(1200)   # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_kcompat_answers_as_kafka_4_3_1(answers, scenario):
    ours, theirs = answers
    scenario.check(ours[scenario.__name__], theirs[scenario.__name__])
