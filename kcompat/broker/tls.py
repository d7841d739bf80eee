"""TLS on the broker's sockets: the accept side of SSL/SASL_SSL listeners and the ``ssl`` arguments
of the broker's own connections to other nodes. Contexts come from
:mod:`kcompat.security.ssl_context`.

A TLS listener accepts plain TCP with :class:`TlsAcceptor` as the protocol, which runs the
server-side handshake (``loop.start_tls``) and only then hands the TLS transport to the
:class:`~kcompat.broker.connection.KafkaConnection`. Doing the handshake here rather than with
``create_server(ssl=...)`` lets a failed handshake (a plaintext client on a TLS port, a client
without the certificate ``ssl.client.auth=required`` asks for, an untrusted certificate) be
logged with its reason: asyncio and uvloop drop those silently. The broker keeps serving.

On an SSL listener the connection's principal (``connection.principal``) is Kafka's
``DefaultKafkaPrincipalBuilder`` one: ``User:<mapped subject DN>`` of the client certificate
(``ssl.principal.mapping.rules``), ``User:ANONYMOUS`` without one; a DN no rule maps fails the
authentication (the connection is closed, as Kafka does). On SASL_SSL the SASL exchange decides.
The accept logs one DEBUG line with the peer, listener, TLS version, cipher, DN and principal.

Client contexts (:func:`inter_broker_ssl`, :func:`controller_ssl`) and listener contexts are
remembered per broker config, so :func:`reload_listener_contexts`, run after every dynamic broker
config change, can rotate key and trust stores (KIP-226) for new connections on both sides.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import weakref

from kcompat.security.principal import ANONYMOUS, user
from kcompat.security.ssl_principal import NoMatchingRule, SslPrincipalMapper, subject_alt_names, subject_dn

log = logging.getLogger("kcompat.broker.tls")

HANDSHAKE_TIMEOUT_S = 60.0   # asyncio's default; Kafka leaves a silent connection to connections.max.idle.ms


class TlsAcceptor(asyncio.Protocol):
    """The protocol of one accepted TCP connection on a TLS listener, until its handshake is done.

    ``app``: the KafkaConnection to hand the TLS transport to; ``ctx``: the listener's server
    context; ``mapper``: the principal mapper on SSL listeners, ``None`` on SASL_SSL (the principal
    is SASL's)."""

    def __init__(self, app: asyncio.Protocol, ctx: ssl.SSLContext, listener_name: str,
                 mapper: SslPrincipalMapper | None) -> None:
        self.app = app
        self.ctx = ctx
        self.listener_name = listener_name
        self.mapper = mapper
        self.peer = "?"
        self._transport = None
        self._coro = None

    def connection_made(self, transport) -> None:
        # start_tls is stepped here, synchronously, rather than in a task: uvloop resumes reading
        # right after connection_made returns, so the ClientHello could reach this protocol (and be
        # lost) before a task ran; once start_tls has begun, bytes go to its SSLProtocol, which
        # keeps them until its handshake starts.
        transport.pause_reading()
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._transport = transport
        self._coro = asyncio.get_running_loop().start_tls(
            transport, self.app, self.ctx, server_side=True, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        self._step()

    def _step(self, _fut=None) -> None:
        """Drive start_tls as a Task would: resume it whenever the future it waits on is done."""
        try:
            waiting = self._coro.send(None)
        except StopIteration as done:
            self._coro = None
            self._handshake_done(done.value)
            return
        except Exception as e:   # SSLError, a reset or timeout: the peer's doing, never the broker's
            self._coro = None
            reason = getattr(e, "reason", None) or str(e) or type(e).__name__
            log.warning("closing connection from %s on TLS listener %s: TLS handshake failed: %s",
                        self.peer, self.listener_name, reason)
            self._transport.close()
            return
        if waiting is None:
            asyncio.get_running_loop().call_soon(self._step)
        else:
            waiting.add_done_callback(self._step)

    def data_received(self, data) -> None:  # pragma: no cover - start_tls took the transport over
        pass

    def connection_lost(self, exc) -> None:  # pragma: no cover - start_tls took the transport over
        pass

    def _handshake_done(self, tls) -> None:
        peer_s = self.peer
        sslobj = tls.get_extra_info("ssl_object")
        der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
        dn = None
        principal = ANONYMOUS
        failure = None
        if der:
            try:
                dn = subject_dn(der)
                if self.mapper is not None:
                    principal = user(self.mapper.get_name(dn))
            except (NoMatchingRule, ValueError) as e:
                failure = e
        # the connection is made (and counted) before any request can arrive: data is delivered
        # only after this callback returns
        self.app.connection_made(tls)
        if failure is not None:   # Kafka: the principal builder fails the authentication
            self.app.close(f"failed authentication on TLS listener {self.listener_name}: {failure}")
            return
        if self.mapper is not None:
            self.app.principal = principal
        if log.isEnabledFor(logging.DEBUG):
            cipher = sslobj.cipher() if sslobj is not None else None
            log.debug("TLS connection from %s on listener %s: %s %s, client certificate %s, principal %s",
                      peer_s, self.listener_name, sslobj.version() if sslobj is not None else "?",
                      cipher[0] if cipher else "?", dn if dn is not None else "none",
                      principal if self.mapper is not None else "(from SASL)")


def tls_protocol_factory(make_connection, config, listener_name: str):
    """The ``create_server`` protocol factory for ``listener_name``: ``make_connection()`` itself
    on a plaintext listener, else one wrapping it in a :class:`TlsAcceptor` with the listener's
    current context (:func:`reload_listener_contexts` may replace it). Raises ConfigError."""
    from kcompat.security.ssl_context import listener_config, server_context

    ctx = server_context(config, listener_name)
    if ctx is None:
        return make_connection
    is_ssl = config.security_protocol(listener_name) == "SSL"
    rules = listener_config(config, listener_name, "ssl.principal.mapping.rules")
    mapper = SslPrincipalMapper(rules) if is_ssl else None
    state = _ListenerTls(ctx, _fingerprint(config, listener_name), _identity(config, listener_name))
    _LISTENERS.setdefault(config, {})[listener_name] = state
    return lambda: TlsAcceptor(make_connection(), state.ctx, listener_name, mapper)


class _ListenerTls:
    """A TLS listener's server context and the inputs it was built from."""

    def __init__(self, ctx: ssl.SSLContext, fingerprint: tuple, identity) -> None:
        self.ctx = ctx
        self.fingerprint = fingerprint
        self.identity = identity    # (subject DN, SANs) of the key store's certificate, or None


_LISTENERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # config -> {listener: _ListenerTls}


def _fingerprint(config, listener_name: str) -> tuple:
    """The effective ``ssl.*`` values of a listener and the modification times of the store files
    they name: a different fingerprint means the context must be rebuilt."""
    from kcompat.config.ssl_defs import SSL_CONFIGS
    from kcompat.security.ssl_context import listener_config

    values = []
    for key in SSL_CONFIGS:
        value = listener_config(config, listener_name, key.name)
        values.append((key.name, tuple(value) if isinstance(value, list) else value))
        if key.name in ("ssl.keystore.location", "ssl.truststore.location") and value:
            try:
                st = os.stat(value)
                values.append((key.name + "#mtime", st.st_mtime_ns, st.st_size))
            except OSError:
                values.append((key.name + "#mtime", None, None))
    return tuple(values)


def _identity(config, listener_name: str):
    """(subject DN, subject alternative names) of the listener's own certificate, or None."""
    from kcompat.security.ssl_context import keystore_leaf_der

    der = keystore_leaf_der(config, listener_name)
    return None if der is None else (subject_dn(der), subject_alt_names(der))


def _compatible_identity(config, listener_name: str, old):
    """The new key store's identity, checked against ``old`` as Kafka's SslFactory does on a
    dynamic update (``CertificateEntries.ensureCompatible``): the subject DN may change only with
    ``ssl.allow.dn.changes``, and the new SANs must include the old ones unless
    ``ssl.allow.san.changes``. Raises ConfigError with Kafka's message."""
    from kcompat.config import ConfigError
    from kcompat.security.ssl_context import listener_config

    new = _identity(config, listener_name)
    if old is None or new is None:
        return new
    if not listener_config(config, listener_name, "ssl.allow.dn.changes") and old[0].lower() != new[0].lower():
        raise ConfigError("ssl.allow.dn.changes", f"Keystore DistinguishedName does not match:  existing={{DN={old[0]}}}, "
                                                  f"new={{DN={new[0]}}} (ssl.allow.dn.changes is false)")
    if not listener_config(config, listener_name, "ssl.allow.san.changes") and not old[1] <= new[1]:
        raise ConfigError("ssl.allow.san.changes", f"Keystore SubjectAltNames do not match:  existing={{SAN="
                                                   f"{sorted(old[1])}}}, new={{SAN={sorted(new[1])}}} "
                                                   "(ssl.allow.san.changes is false)")
    return new


def reload_listener_contexts(config) -> list[str]:
    """After a dynamic broker config change (KIP-226: ``listener.name.<l>.ssl.keystore.location``
    and the other ``ssl.*`` keys, or a store file rewritten in place and its config set again):
    rebuild the server context of each TLS listener whose ``ssl.*`` values or store files changed,
    and load the new stores into the client contexts the broker connects to that listener with.
    New connections use them; open ones keep theirs. A configuration that does not load, or a
    certificate whose subject DN or SANs changed without ``ssl.allow.dn.changes`` /
    ``ssl.allow.san.changes`` (Kafka's rule), is logged and the current stores kept. Returns the listeners reloaded (``"<name> (client)"`` for client
    contexts)."""
    from kcompat.config import ConfigError
    from kcompat.security.ssl_context import reload_client_context, server_context

    reloaded = []
    for name, state in _LISTENERS.get(config, {}).items():
        fingerprint = _fingerprint(config, name)
        if fingerprint == state.fingerprint:
            continue
        try:
            ctx = server_context(config, name)
            identity = _compatible_identity(config, name, state.identity)
        except ConfigError as e:
            log.error("TLS listener %s keeps its current key and trust stores: the new configuration does not "
                      "load: %s", name, e)
            continue
        state.ctx, state.fingerprint, state.identity = ctx, fingerprint, identity
        reloaded.append(name)
        log.info("TLS listener %s reloaded its key and trust stores for new connections", name)
    for name, clients in _CLIENTS.get(config, {}).items():
        fingerprint = _fingerprint(config, name)
        contexts = [c for c in (ref() for ref in clients[1]) if c is not None]
        clients[1] = [weakref.ref(c) for c in contexts]
        if fingerprint == clients[0] or not contexts:
            continue
        try:
            identity = _compatible_identity(config, name, clients[2])
            for ctx in contexts:
                reload_client_context(ctx, config, name)
        except ConfigError as e:
            log.error("connections to other nodes' %s listeners keep the current key and trust stores: the new "
                      "configuration does not load: %s", name, e)
            continue
        clients[0], clients[2] = fingerprint, identity
        reloaded.append(f"{name} (client)")
        log.info("connections to other nodes' %s listeners use the reloaded key and trust stores from now on", name)
    return reloaded


def _client(config, listener_name: str) -> ssl.SSLContext | None:
    """A client context of ``listener_name``, remembered so :func:`reload_listener_contexts` can
    give it new stores in place (connections opened later present the new certificate)."""
    from kcompat.security.ssl_context import client_context

    ctx = client_context(config, listener_name)
    if ctx is not None:
        clients = _CLIENTS.setdefault(config, {}).setdefault(
            listener_name, [_fingerprint(config, listener_name), [], _identity(config, listener_name)])
        clients[1].append(weakref.ref(ctx))
    return ctx


# config -> {listener: [fingerprint, weak references to client contexts, key store identity]}
_CLIENTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def inter_broker_ssl(config) -> ssl.SSLContext | None:
    """The client context of ``inter.broker.listener.name`` (replica fetchers, coordinator
    forwarding, the share persister): ``None`` when that listener is plaintext."""
    return _client(config, config.inter_broker_listener_name)


def controller_ssl(config) -> ssl.SSLContext | None:
    """The client context of the first of ``controller.listener.names`` (Raft between voters,
    broker registration and heartbeats, forwarded requests), as Kafka's controller channel uses;
    ``None`` when it is plaintext or there is no controller listener."""
    names = config.controller_listener_names
    return _client(config, names[0]) if names else None
