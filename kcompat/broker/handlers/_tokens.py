"""What the delegation token handlers (KIP-48, API keys 38-41) share.

Kafka 4's brokers forward CreateDelegationToken, RenewDelegationToken and ExpireDelegationToken
to the active controller inside an Envelope that names the client's principal (the controller
needs it: it becomes the token's owner and requester, and only the owner or a renewer may renew
or expire). kcompat forwards the request itself (:mod:`kcompat.broker.controller_service`), so the
broker puts the client's principal into a tagged field of its own (:data:`PRINCIPAL_TAG`, a
``DefaultPrincipalData``, the structure Kafka's Envelope carries) and forwards at the API's newest
(flexible) version; the controller reads it only from requests on a controller listener, which
only principals with CLUSTER_ACTION reach (:mod:`kcompat.broker.controller_gate`), as Kafka trusts
an Envelope's principal only from such a peer.

:func:`allow_token_requests` is Kafka's ``allowTokenRequests``: no token requests from a
connection that authenticated with a delegation token, nor over PLAINTEXT, nor over SSL without a
client certificate (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); forwarded requests skip the protocol
check (Kafka ``ControllerApis``).
"""

from __future__ import annotations

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.default_principal_data import DefaultPrincipalData
from kcompat.security.delegation_token import TokenSettings
from kcompat.security.principal import ANONYMOUS, KafkaPrincipal

PRINCIPAL_TAG = 0x4B43_0030   # "KC" + 48 (KIP-48): far above any tag Kafka's specs use


def settings(ctx) -> TokenSettings:
    """This node's delegation token settings (``delegation.token.*``)."""
    return TokenSettings.from_config(ctx.services.config)


def requester(ctx, req) -> tuple[KafkaPrincipal, bool]:
    """``(principal, forwarded)``: the client's principal a broker attached to a request it
    forwarded (on a controller listener), else the connection's own."""
    if ctx.on_controller_listener:
        for tag, data in req.unknown_tagged_fields or ():
            if tag == PRINCIPAL_TAG:
                p, _ = DefaultPrincipalData.read(memoryview(data), 0, 0)
                return KafkaPrincipal(p.type, p.name, bool(p.token_authenticated)), True
    return ctx.principal, False


def allow_token_requests(ctx, principal: KafkaPrincipal, forwarded: bool) -> bool:
    """Kafka ``KafkaApis.allowTokenRequests`` / ``ControllerApis.allowTokenRequests``."""
    if principal.token_authenticated:
        return False
    if forwarded:
        return True
    protocol = ctx.services.config.security_protocol(ctx.listener_name)
    return not (protocol == "PLAINTEXT" or (protocol == "SSL" and principal == ANONYMOUS))


def forward(ctx, req, max_version: int, local, error_response):
    """Run ``local()`` on the active controller or forward ``req`` there (at ``max_version``,
    with the client's principal attached); an awaitable of the response."""
    service = ctx.services.controller_service
    if ctx.on_controller_listener:
        return service.handle(ctx, req, local, error_response)
    p = ctx.principal
    out = bytearray()
    DefaultPrincipalData(type=p.principal_type, name=p.name, token_authenticated=p.token_authenticated).write(out, 0)
    others = [(t, d) for t, d in (req.unknown_tagged_fields or ()) if t != PRINCIPAL_TAG]
    req.unknown_tagged_fields = sorted(others + [(PRINCIPAL_TAG, bytes(out))])
    return service.call(req, max_version, local, error_response)


def commit(ctx, records: list) -> None:
    """Queue a controller operation's records (committed before the response is sent)."""
    services = ctx.services
    services.controller.commit(records, services.now_ms())


def handle_token_change(ctx, req, max_version: int, operation, error_response):
    """RenewDelegationToken / ExpireDelegationToken: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED where
    Kafka refuses token requests, else ``operation(image, settings, req, principal, now_ms) ->
    (records, response)`` (:mod:`kcompat.kraft.token_control`) on the active controller."""
    principal, forwarded = requester(ctx, req)
    if not allow_token_requests(ctx, principal, forwarded):
        return error_response(req, ctx.api_version, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    token_settings = settings(ctx)

    def local():
        services = ctx.services
        records, response = operation(services.image, token_settings, req, principal, services.now_ms())
        commit(ctx, records)
        return response
    return forward(ctx, req, max_version, local, error_response)


def expiry_error_response(response_class):
    """The ``error_response`` of RenewDelegationToken / ExpireDelegationToken: the error with
    expiry timestamp -1 (Kafka ``DelegationTokenManager.ERROR_TIMESTAMP``)."""
    def error_response(req, version, code):
        return response_class(error_code=code, expiry_timestamp_ms=-1, throttle_time_ms=0)
    return error_response
