"""The web console of a node: ``GET /`` is a single page (``static/index.html`` with its CSS and
plain JavaScript, no build step and nothing fetched from elsewhere) that shows the cluster as this
node sees it - brokers, topics and partitions, consumer groups and their lag, transactions,
throughput and health - refreshed from the JSON API of :mod:`.api` every 2 seconds (``?refresh=MS``
changes that, 500 ms at least).

Routes: ``GET /`` (the page), ``GET /static/{name}`` (its assets, served from the package:
``kcompat/broker/http/static/``, shipped as package data), ``GET /favicon.ico``, and the
``/api/v1/...`` endpoints of :mod:`.api`. The console's sampler (:class:`.history.History`) runs
while the listener serves: it starts and stops with the listener's application (aiohttp's
``on_startup`` / ``on_cleanup``, run by :meth:`HttpListener.start` / :meth:`HttpListener.stop`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from kcompat.broker.http import api
from kcompat.broker.http.history import History

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

STATIC_DIR = Path(__file__).resolve().with_name("static")
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
HISTORY = web.AppKey("console_history", History)


def _asset(name: str) -> web.Response:
    """A file of ``static/`` by its plain name (no directories: nothing else is reachable)."""
    path = STATIC_DIR / name
    ctype = CONTENT_TYPES.get(path.suffix)
    if "/" in name or "\\" in name or name.startswith(".") or ctype is None or not path.is_file():
        raise web.HTTPNotFound(text=f"no console asset {name!r}")
    return web.Response(body=path.read_bytes(), headers={"Content-Type": ctype, "Cache-Control": "no-cache"})


def routes(app: web.Application, services: HttpServices) -> None:
    history = History(services)
    app[HISTORY] = history
    app.on_startup.append(history.on_startup)
    app.on_cleanup.append(history.on_cleanup)

    async def index(_request: web.Request) -> web.Response:
        return _asset("index.html")

    async def static(request: web.Request) -> web.Response:
        return _asset(request.match_info["name"])

    async def favicon(_request: web.Request) -> web.Response:
        return _asset("favicon.svg")

    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/favicon.ico", favicon)
    api.add_routes(app, services, history)
