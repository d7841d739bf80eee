"""Per-request context handed to every API handler."""

from __future__ import annotations

from kcompat.security.principal import ANONYMOUS


class _NoResponse:
    """Returned by a handler when Kafka sends no response (Produce with acks=0)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE = _NoResponse()


class RequestContext:
    """What a handler knows about the request besides its body.

    ``broker`` is the :class:`kcompat.broker.broker.Broker`; ``api_version`` the request version;
    ``header`` the decoded RequestHeader (correlation id, client id); ``listener_name`` the
    listener the connection arrived on (its advertised address goes into Metadata responses).
    """

    __slots__ = ("broker", "connection", "header", "api_version", "listener_name")

    def __init__(self, broker, connection, header, api_version: int, listener_name: str) -> None:
        self.broker = broker
        self.connection = connection
        self.header = header
        self.api_version = api_version
        self.listener_name = listener_name

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def peer(self) -> str:
        return self.connection.peer if self.connection is not None else "?"

    @property
    def principal(self):
        """The :class:`kcompat.security.principal.KafkaPrincipal` the connection authenticated
        as (``User:ANONYMOUS`` without authentication)."""
        return getattr(self.connection, "principal", ANONYMOUS)
