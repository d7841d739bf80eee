"""Per-request context handed to every API handler."""

from __future__ import annotations

import logging

from kcompat.broker.api_services import ApiServices
from kcompat.security.acl import AclOperation, ResourceType
from kcompat.security.authorizer import StandardAuthorizer, all_operations
from kcompat.security.principal import ANONYMOUS

audit = logging.getLogger("kcompat.authorizer")   # Kafka's kafka.authorizer.logger


class _NoResponse:
    """Returned by a handler when Kafka sends no response (Produce with acks=0)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE = _NoResponse()


class RequestContext:
    """What a handler knows about the request besides its body.

    ``services`` is what the handler may use (:class:`kcompat.broker.api_services.ApiServices`:
    the metadata image, config, ReplicaManager, coordinators, ...), never the broker itself;
    ``connection`` the :class:`kcompat.broker.connection.KafkaConnection`; ``api_version`` the request version;
    ``header`` the decoded RequestHeader (correlation id, client id); ``listener_name`` the
    listener the connection arrived on (its advertised address goes into Metadata responses);
    ``request_bytes`` the request's size on the wire (size prefix included), what Produce counts
    against ``producer_byte_rate``.
    """

    __slots__ = ("services", "connection", "header", "api_version", "listener_name", "request_bytes")

    def __init__(self, services: ApiServices, connection, header, api_version: int, listener_name: str,
                 request_bytes: int = 0) -> None:
        self.services = services
        self.connection = connection
        self.header = header
        self.api_version = api_version
        self.listener_name = listener_name
        self.request_bytes = request_bytes

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def on_controller_listener(self) -> bool:
        """True for a request that came in on a controller listener (``controller.listener.names``):
        the quorum's own, those brokers forward, and ``--bootstrap-controller`` tools' (KIP-919)."""
        return self.listener_name in self.services.config.controller_listener_names

    @property
    def peer(self) -> str:
        return self.connection.peer if self.connection is not None else "?"

    @property
    def principal(self):
        """The :class:`kcompat.security.principal.KafkaPrincipal` the connection authenticated
        as (``User:ANONYMOUS`` without authentication)."""
        return getattr(self.connection, "principal", ANONYMOUS)

    # -- authorization (issue 19) ---------------------------------------------------------------

    @property
    def authorizer(self) -> StandardAuthorizer | None:
        """The broker's authorizer (``authorizer.class.name``), None when none is configured or
        the request came in on a controller listener: requests there are the quorum's own and
        those a broker forwards after authorizing them itself (kcompat forwards without
        Kafka's Envelope, so the controller does not see the client's principal); the
        controller listener's own CLUSTER_ACTION check is :mod:`kcompat.broker.controller_gate`."""
        auth = self.services.authorizer
        if auth is None or self.on_controller_listener:
            return None
        return auth

    @property
    def client_host(self) -> str:
        """The client's IP address, as ACL hosts name it (``127.0.0.1``, ``::1``)."""
        peer = self.peer
        host = (peer.rpartition(":")[0] if ":" in peer else peer).strip("[]")
        if host.startswith("::ffff:") and "." in host:   # an IPv4 client of a dual-stack listener,
            host = host[7:]                               # as Java's InetAddress names it
        return host

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether this request's principal may do ``operation`` on the resource; True when no
        authorizer is configured."""
        auth = self.authorizer
        if auth is None or auth.authorize(self.principal, self.client_host, operation, resource_type, name):
            return True
        if audit.isEnabledFor(logging.DEBUG):
            audit.debug("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s for api key %s",
                        self.principal, AclOperation(operation).name, self.client_host,
                        ResourceType(resource_type).name, name, getattr(self.header, "request_api_key", "?"))
        return False

    def authorize_cluster(self, operation: AclOperation) -> bool:
        """``operation`` on the CLUSTER resource (``kafka-cluster``)."""
        return self.authorize(operation, ResourceType.CLUSTER, "kafka-cluster")

    def authorize_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on some resource of ``resource_type``."""
        auth = self.authorizer
        return auth is None or auth.authorize_by_resource_type(self.principal, self.client_host, operation,
                                                               resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The ``*_authorized_operations`` bitfield for the resource (all supported operations
        without an authorizer)."""
        auth = self.authorizer
        if auth is None:
            return all_operations(resource_type)
        return auth.authorized_operations(self.principal, self.client_host, resource_type, name)
