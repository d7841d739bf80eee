"""Message timestamp bounds side by side with Apache Kafka 4.3.1: the same raw requests
(:func:`tests.broker.test_message_timestamp_bounds.scenario`: DescribeConfigs of a new topic and of
the broker, ``message.timestamp.difference.max.ms`` in CreateTopics / AlterConfigs /
IncrementalAlterConfigs, Produce v9 and v11 of records an hour and more ahead, behind and within
the bound, a topic override of ``message.timestamp.after.max.ms``) get the same answers from
kcompat and from Kafka 4.3.1. The bounds in the rejection messages depend on each broker's clock:
the scenario checks them against the request's time and compares the rest of the text."""

from __future__ import annotations

import pytest

from tests.broker.test_message_timestamp_bounds import scenario
from tests.support.side_by_side import against_both


@pytest.mark.timeout(1200)   # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kcompat_answers_timestamp_bounds_as_kafka_4_3_1(tmp_path):
    ours, theirs = against_both(tmp_path, scenario)
    assert ours == theirs
