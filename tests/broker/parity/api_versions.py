"""ApiVersions v3 side by side with Apache Kafka 4.3.1: client software names and versions that do
not match Kafka's pattern (``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``) are INVALID_REQUEST
with no API keys listed (ApiVersionsRequest.getErrorResponse lists ApiVersions' own range only
with UNSUPPORTED_VERSION, KIP-511)."""

from __future__ import annotations

from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.testing import wire

CLIENTS = [("good-name", "1.0"), ("bad name!", "1.0"), ("", "1"), ("a", ""), ("a_b", "1.2.3-SNAPSHOT")]


def scenario(bootstrap: str) -> list[tuple]:
    out = []
    for name, version in CLIENTS:
        r = wire.call(bootstrap, ApiVersionsRequest(client_software_name=name, client_software_version=version), 3)
        out.append((name, version, r.error_code, len(r.api_keys) > 0))
    return out


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs == [("good-name", "1.0", 0, True)] + [(n, v, 42, False) for n, v in CLIENTS[1:]]
    assert ours == theirs
