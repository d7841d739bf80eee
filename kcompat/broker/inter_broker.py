"""Clients of the other brokers on the inter-broker listener (``inter.broker.listener.name``),
with the TLS context and SASL login that listener needs: what the transaction coordinator (to
send WriteTxnMarkers), the share persister and the share-group admin use."""

from __future__ import annotations

from kcompat.broker.node_client import NodeClients
from kcompat.broker.tls import inter_broker_ssl
from kcompat.security.sasl_client import inter_broker_sasl


def inter_broker_clients(config, image, client_id: str) -> NodeClients:
    """A :class:`NodeClients` reaching every registered broker of the metadata ``image`` at its
    inter-broker listener endpoint (``config``: the BrokerConfig, for the listener's name, TLS and
    SASL), as ``client_id``."""
    listener = config.inter_broker_listener_name

    def endpoint_of(node_id: int):
        b = image.brokers.get(node_id)
        ep = b.endpoints.get(listener) if b is not None else None
        return (ep.host, ep.port) if ep is not None else None

    return NodeClients(endpoint_of, client_id, ssl_context=inter_broker_ssl(config), sasl=inter_broker_sasl(config))
