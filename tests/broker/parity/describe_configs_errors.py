"""DescribeConfigs' per-resource errors side by side with Apache Kafka 4.3.1 (ConfigHelper):
BROKER and BROKER_LOGGER names that are not this broker's id or not an integer ("01" is broker 1,
as Integer.parseInt reads it), an empty BROKER_LOGGER name, a missing topic and an invalid topic
name, with each error code and text; then requests with a resource of an unknown type (0, 1, 64)
beside a topic and a broker: the whole request fails."""

from __future__ import annotations

from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DC
from kcompat.testing import wire

BROKER, BROKER_LOGGER, TOPIC = 4, 8, 2
RESOURCES = [(BROKER, "7"), (BROKER, "x"), (BROKER, ""), (BROKER, "01"), (BROKER, " 1"), (BROKER_LOGGER, "1"),
             (BROKER_LOGGER, "7"), (BROKER_LOGGER, ""), (BROKER_LOGGER, "x"), (TOPIC, "missing"), (TOPIC, "")]


def scenario(bootstrap: str) -> list[tuple]:
    out = []
    for rtype, name in RESOURCES:
        req = DC(resources=[DC.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                       configuration_keys=["no.such.key"])],
                 include_synonyms=False, include_documentation=False)
        r = wire.call(bootstrap, req, 4).results[0]
        out.append((rtype, name, r.error_code, r.error_message))
    for unknown in (0, 1, 64):
        req = DC(resources=[DC.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=None)
                            for rtype, name in ((TOPIC, "missing"), (unknown, "x"), (BROKER, "1"))],
                 include_synonyms=False, include_documentation=False)
        r = wire.call(bootstrap, req, 4)
        out.append(("unknown type", unknown, [(x.resource_type, x.resource_name, x.error_code, x.error_message,
                                               len(x.configs)) for x in r.results]))
    return out


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs[1] == (BROKER, "x", 42, "Broker id must be an integer, but it is: x")
    assert theirs[3][2] == 0 and theirs[9] == (TOPIC, "missing", 3, "")
    assert [code for _, _, code, _, _ in theirs[-1][2]] == [42, 42, 42]
    assert ours == theirs
