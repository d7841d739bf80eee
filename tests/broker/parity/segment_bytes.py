"""Segment sizes side by side with Apache Kafka 4.3.1 (``LogConfig``): ``segment.bytes`` below
1 MiB is INVALID_CONFIG on CreateTopics and IncrementalAlterConfigs (the minimum since Kafka 4.1,
which librdkafka 2.12's test 0129 still sets to 20000), 1 MiB is accepted, and the internal
``internal.segment.bytes`` that tests use for small segments takes any INT, is refused when not a
number, and is described only when set."""

from __future__ import annotations

from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CT
from kcompat.protocol.messages.delete_topics import DeleteTopicsRequest
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DC
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IAC
from kcompat.testing import wire

TOPIC_RESOURCE, SET = 2, 0
CREATES = [("sb-small", {"segment.bytes": "20000"}), ("sb-mib", {"segment.bytes": "1048576"}),
           ("sb-internal", {"internal.segment.bytes": "20000"}), ("sb-negative", {"internal.segment.bytes": "-5"}),
           ("sb-nan", {"internal.segment.bytes": "abc"})]
ALTERS = [{"segment.bytes": "1048575"}, {"internal.segment.bytes": "4096"}]


def _described(bootstrap: str, topic: str) -> list[tuple]:
    req = DC(resources=[DC.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=topic,
                                                   configuration_keys=None)],
             include_synonyms=False, include_documentation=False)
    (r,) = wire.call(bootstrap, req, 4).results
    return [(c.name, c.value, c.config_source) for c in r.configs if "segment.bytes" in c.name]


def scenario(bootstrap: str) -> list[tuple]:
    out = []
    for name, configs in CREATES:
        req = CT(topics=[CT.CreatableTopic(name=name, num_partitions=1, replication_factor=1, configs=[
            CT.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])], timeout_ms=30_000)
        (t,) = wire.call(bootstrap, req, 7).topics
        out.append(("create", name, t.error_code, t.error_message))
    out.append(("describe default", _described(bootstrap, "sb-mib")))
    out.append(("describe internal", _described(bootstrap, "sb-internal")))
    for configs in ALTERS:
        req = IAC(resources=[IAC.AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name="sb-mib", configs=[
            IAC.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in configs.items()])],
            validate_only=False)
        (r,) = wire.call(bootstrap, req, 1).responses
        out.append(("alter", configs, r.error_code, r.error_message))
    out.append(("describe altered", _described(bootstrap, "sb-mib")))
    wire.call(bootstrap, DeleteTopicsRequest(topic_names=[n for n, _ in CREATES], timeout_ms=30_000), 5)
    return out


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs[0] == ("create", "sb-small", 40, "Invalid value 20000 for configuration segment.bytes: "
                                                   "Value must be at least 1048576")
    assert [code for _c, _n, code, _m in theirs[1:5]] == [0, 0, 0, 40]
    assert theirs[6] == ("describe internal", [("internal.segment.bytes", "20000", 1),
                                               ("segment.bytes", "1073741824", 5)])
    assert ours == theirs
