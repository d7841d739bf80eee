"""The HTTP listener of a node (``http.listeners``, e.g. ``HTTP://127.0.0.1:8090``): an aiohttp
application served in the broker's own event loop (no thread), stopped with the broker.

Routes are contributed by the modules of this package, each with ``routes(app, services)``
(``services``: the :class:`~kcompat.broker.http.services.HttpServices` of the node, what they read of it):
:mod:`.metrics` (``GET /metrics``), :mod:`.console` (``GET /`` and the JSON API under
``/api/v1``), :mod:`.rest_v3` and :mod:`.rest_v2_consumers` (the Confluent REST Proxy subset),
:mod:`.schema_registry` (the Confluent Schema Registry API at ``/subjects``, ``/schemas``, ...). A
listener that cannot bind fails the start, as a Kafka listener does. aiohttp is imported only when
a listener is configured: a broker without one (every test broker, kcompat.testing's fixtures)
does not pay its import (about 130 ms of a ~300 ms start)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from aiohttp import web

    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http")

_LISTENER = re.compile(r"^(HTTP)://(\[[^\]]*\]|[^:/]*):(\d+)$", re.IGNORECASE)
DEFAULT_PORT = 8090
ZERO_CONFIG_LISTENERS = f"HTTP://127.0.0.1:{DEFAULT_PORT}"


def parse_http_listeners(value: list[str]) -> list[tuple[str, int]]:
    """``["HTTP://host:port", ...]`` -> ``[(host, port)]``; ValueError for anything else (only
    plain HTTP: TLS for the HTTP listener is not implemented)."""
    out = []
    for item in value:
        item = item.strip()
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None:
            raise ValueError(f"{item!r} is not HTTP://host:port")
        host = m.group(2).strip("[]")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} out of range in {item!r}")
        out.append((host, port))
    return out


def build_app(services: HttpServices, http_bound: Callable[[], list[tuple[str, int]]]) -> "web.Application":
    """The application with every route of the package; ``http_bound()``: the ``(host, port)``
    addresses the listener is bound to (empty until it is), which the Schema Registry announces."""
    from aiohttp import web

    from kcompat.broker.http import console, metrics
    app = web.Application(client_max_size=1 << 20)
    metrics.routes(app, services)
    console.routes(app, services)
    from kcompat.broker.http import rest_v2_consumers, rest_v3, schema_registry
    rest_v3.routes(app, services)
    rest_v2_consumers.routes(app, services)
    schema_registry.routes(app, services, http_bound)
    return app


class HttpListener:
    """The node's HTTP listeners; ``bound`` lists ``(host, port)`` once started."""

    def __init__(self) -> None:
        self.bound: list[tuple[str, int]] = []
        self._runner: "web.AppRunner | None" = None

    async def start(self, listeners: list[tuple[str, int]], services: HttpServices) -> None:
        """Serve the routes on ``listeners`` (``(host, port)``s; none: nothing is served), reading
        the node through ``services``."""
        if not listeners:
            return
        from aiohttp import web
        self._runner = web.AppRunner(build_app(services, lambda: self.bound), access_log=None, handle_signals=False)
        await self._runner.setup()
        for host, port in listeners:
            site = web.TCPSite(self._runner, host or None, port, reuse_address=True)
            await site.start()
            for sock in (site._server.sockets if site._server is not None else ()):
                bhost, bport = sock.getsockname()[:2]
                self.bound.append((bhost, bport))
                log.info("started HTTP listener on %s:%d (console at /, metrics at /metrics, REST proxy at /v3)",
                         bhost, bport)
                break

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
