"""The node-to-node client against a real broker: pipelined requests matched by correlation id,
flexible and non-flexible versions, and failure when the connection drops."""

from __future__ import annotations

import asyncio

import pytest

from kcompat.broker.node_client import NodeClients, NodeConnection, NodeConnectionError
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.metadata import MetadataRequest


def test_pipelined_requests_on_one_connection(broker):
    host, port = broker.bootstrap.rsplit(":", 1)

    async def run():
        conn = NodeConnection(host, int(port), "node-client-test")
        await conn.connect()
        futs = [conn.send_nowait(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3),
                conn.send_nowait(MetadataRequest(topics=None), 12),
                conn.send_nowait(MetadataRequest(topics=[]), 1)]
        api, md12, md1 = await asyncio.gather(*futs)
        conn.close()
        return api, md12, md1

    api, md12, md1 = asyncio.run(run())
    assert api.error_code == 0 and any(a.api_key == 18 for a in api.api_keys)
    assert md12.cluster_id and md12.brokers[0].port == int(port)
    assert md1.topics == []


def test_send_to_an_unreachable_node_fails_cleanly():
    async def run():
        clients = NodeClients(lambda node: ("127.0.0.1", 1), "t")
        with pytest.raises(NodeConnectionError):
            await clients.send(5, MetadataRequest(topics=[]), 1, timeout_s=2)
        clients.close()

    asyncio.run(run())


def test_a_peer_gone_during_sasl_is_logged_as_terminated_not_as_an_authentication_failure(caplog):
    """A node restarting while another opens a SASL connection to it closes the socket
    mid-handshake: the connection fails with NodeConnectionError and the log says it was
    terminated during authentication (as Kafka's NetworkClient), not that authentication failed."""
    from kcompat.security.sasl_client import ClientSasl

    async def run():
        async def hang_up(reader, writer):
            await reader.read(4)     # the SaslHandshake request arrives; the peer goes away
            writer.close()
        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = NodeConnection("127.0.0.1", port, "node-client-test",
                              sasl=ClientSasl("PLAIN", "admin", "secret", {}))
        try:
            with pytest.raises(NodeConnectionError):
                await conn.connect(timeout_s=5)
        finally:
            server.close()
            await server.wait_closed()

    with caplog.at_level("WARNING", logger="kcompat"):
        asyncio.run(run())
    assert "terminated during SASL authentication" in caplog.text
    assert "SASL authentication failed" not in caplog.text
