"""This node's Kafka listeners (``listeners``): the sockets, and what every client connection on
them shares (:class:`ConnectionServices`), built once by :meth:`kcompat.broker.broker.Broker.start`.

The controller listeners open and serve as soon as the metadata quorum runs; the broker listeners
are bound first (the registration with the controller carries their bound ports) and serve once
the controller has unfenced this broker (Kafka's ``BrokerServer`` enables its request processing
then). SSL and SASL_SSL listeners handshake TLS first (:mod:`kcompat.broker.tls`); each
listener's SASL settings are read at start-up, so a bad JAAS or OAUTHBEARER configuration stops
the start (:meth:`kcompat.security.sasl_server.SaslListeners.check_listener`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kcompat.broker.connection import KafkaConnection
from kcompat.broker.tls import tls_protocol_factory

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.api_services import ApiServices
    from kcompat.broker.quota.connections import ConnectionQuotas
    from kcompat.broker.request_stats import RequestStats
    from kcompat.config.broker import BrokerConfig
    from kcompat.security.sasl_server import SaslListeners

log = logging.getLogger("kcompat.broker")


@dataclass(frozen=True, eq=False, slots=True)
class ConnectionServices:
    """What every :class:`~kcompat.broker.connection.KafkaConnection` of this node uses.

    - ``api_services``: the handlers' :class:`~kcompat.broker.api_services.ApiServices` (each
      request's context; the request quota reads its client quotas; a closed connection's share
      sessions go to its ``share`` service, KIP-932);
    - ``config``: the :class:`~kcompat.config.broker.BrokerConfig` (``socket.request.max.bytes``,
      ``queued.max.requests``, the controller listener names);
    - ``request_stats``: the per-API request metrics and the connection counters
      (:mod:`kcompat.broker.request_stats`);
    - ``connection_quotas``: the connection limits (:mod:`kcompat.broker.quota.connections`);
    - ``connections``: this node's open connections, which each connection joins when it opens
      and leaves when it closes (shutdown and the idle expiry go through them);
    - ``sasl``: the SASL settings of the listeners (:class:`kcompat.security.sasl_server.SaslListeners`).
    """

    api_services: ApiServices
    config: BrokerConfig
    request_stats: RequestStats
    connection_quotas: ConnectionQuotas
    connections: set[KafkaConnection]
    sasl: SaslListeners


class KafkaListeners:
    """The node's Kafka listener sockets; ``bound``: listener name -> the ``(host, port)`` it is
    bound to (the port the OS chose for port 0)."""

    def __init__(self) -> None:
        self.servers: list[asyncio.Server] = []
        self.bound: dict[str, tuple[str, int]] = {}
        self._not_serving: dict[str, tuple[str, int]] = {}   # bound, serving at serve(): name -> (host, port)

    async def open(self, services: ConnectionServices, listeners: list[tuple[str, str, int]],
                   serve: bool = True) -> None:
        """Bind ``listeners`` (``(name, host, port)``), serving at once with ``serve`` and from
        :meth:`serve` otherwise; their connections use ``services``."""
        loop = asyncio.get_running_loop()
        for name, host, port in listeners:
            # SSL/SASL_SSL listeners handshake first (kcompat.broker.tls); plaintext ones serve directly
            factory = tls_protocol_factory(lambda n=name: KafkaConnection(services, n), services.config, name)
            services.sasl.check_listener(name)   # a bad JAAS/OAUTHBEARER config stops the start
            server = await loop.create_server(factory, host or None, port,
                                              reuse_address=True, backlog=1024, start_serving=serve)
            self.servers.append(server)
            sock = server.sockets[0]
            bhost, bport = sock.getsockname()[:2]
            self.bound[name] = (bhost, bport)
            if name in services.config.controller_listener_names:
                log.info("started controller listener %s on %s:%d", name, host or bhost, bport)
            elif serve:
                log.info("started listener %s:%d", host or bhost, bport)
            else:
                self._not_serving[name] = (host or bhost, bport)

    async def serve(self) -> None:
        """Serve the listeners bound without serving, and log ``started listener <host>:<port>``."""
        for server in self.servers:
            if not server.is_serving():
                await server.start_serving()
        for name in self._not_serving:
            log.info("started listener %s:%d", *self._not_serving[name])

    def close(self) -> None:
        """Stop accepting connections (those open stay, until the broker closes them)."""
        for server in self.servers:
            server.close()
