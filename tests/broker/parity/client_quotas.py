"""Client quota APIs side by side with Apache Kafka 4.3.1: AlterClientQuotas with an entity that
names a type twice (Kafka reads the entity into a map: the last name counts) and the usual
refusals, then DescribeClientQuotas of what was stored, whose error message on success is the
empty string."""

from __future__ import annotations

from kcompat.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as AQ
from kcompat.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest as DQ
from kcompat.testing import wire
from tests.broker.parity import until

CASES = [
    ([("user", "alice"), ("user", "bob")], "producer_byte_rate", 1024.0),
    ([("user", "carol")], "bogus_key", 1.0),
    ([("user", "carol")], "producer_byte_rate", -5.0),
    ([("client-id", "c"), ("ip", "1.2.3.4")], "producer_byte_rate", 1.0),
]


def scenario(bootstrap: str) -> dict:
    altered = []
    for entity, key, value in CASES:
        req = AQ(entries=[AQ.EntryData(entity=[AQ.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                                       ops=[AQ.OpData(key=key, value=value, remove=False)])], validate_only=False)
        [e] = wire.call(bootstrap, req, 1).entries
        altered.append((e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity]))
    # Kafka's broker answers DescribeClientQuotas from its metadata image, which has the controller's
    # quota records a moment after AlterClientQuotas was answered (kcompat's at once)
    described = until(lambda: wire.call(bootstrap, DQ(components=[DQ.ComponentData(
        entity_type="user", match_type=2, match=None)], strict=False), 1), "described quotas",
        ok=lambda answer: answer.entries, timeout_s=30)
    return {"altered": altered, "described": (
        described.error_code, described.error_message,
        sorted(([(x.entity_type, x.entity_name) for x in e.entity], [(v.key, v.value) for v in e.values])
               for e in described.entries))}


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs["described"] == (0, "", [([("user", "bob")], [("producer_byte_rate", 1024.0)])])
    assert ours == theirs
