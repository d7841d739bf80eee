"""The Confluent Schema Registry REST API on the HTTP listener (paths as Confluent's registry serves
them at its root: ``/subjects``, ``/schemas``, ``/config``, ``/mode``, ``/compatibility``,
``/contexts``), backed by :class:`~kcompat.broker.http.schema_registry_store.SchemaStore`.

Requests and responses are ``application/vnd.schemaregistry.v1+json`` (also accepted:
``application/vnd.schemaregistry+json``, ``application/json``, ``application/octet-stream``;
another Content-Type -> 415, an Accept none of them matches -> 406). Errors are Confluent's
``{"error_code", "message"}`` (:mod:`kcompat.schema_registry.errors`); a body that is not JSON
(400 / 42201 for a schema that does not parse) or larger than the listener's 1 MiB limit (413) is
refused before anything is written. Writes run on the writer node, forwarded there when this node
is not it (see the store's docstring).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from kcompat.broker.http.schema_registry_store import WRITE_TIMEOUT_S, NotWriter, SchemaStore
from kcompat.schema_registry import errors
from kcompat.schema_registry.errors import RegistryError
from kcompat.schema_registry.schemas import TYPES

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http.schema_registry")

V1 = "application/vnd.schemaregistry.v1+json"
ACCEPTED = (V1, "application/vnd.schemaregistry+json", "application/json")
BODY_TYPES = ACCEPTED + ("application/octet-stream", "")
OFFSET_HEADER = "X-Kcompat-Schemas-Offset"
FORWARDED_HEADER = "X-Kcompat-Forwarded"
NOT_WRITER_HEADER = "X-Kcompat-Not-Writer"
RETRY_S = 0.2

_STORE = web.AppKey("kcompat.schema_registry.store", SchemaStore)
_SESSION = web.AppKey("kcompat.schema_registry.session", aiohttp.ClientSession)


# -- request and response helpers ---------------------------------------------------------------------

def _media_type(request: web.Request) -> str:
    accept = request.headers.get("Accept", "")
    if not accept:
        return V1
    for item in accept.split(","):
        t = item.split(";")[0].strip().lower()
        if t in ACCEPTED:
            return t
        if t in ("*/*", "application/*"):
            return V1
    raise RegistryError(406, 406, "HTTP 406 Not Acceptable")


def _json(request: web.Request, body, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(status=status, body=json.dumps(body, separators=(",", ":")).encode(),
                        content_type=_media_type(request), headers=headers)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def guarded(handler):
    """``handler(request, store)`` once the store has caught up (:meth:`SchemaStore.ready`);
    RegistryError (RestError too) -> its JSON error; other failures -> 500 50001."""
    async def run(request: web.Request) -> web.Response:
        try:
            _media_type(request)
            store = request.app[_STORE]
            await store.ready()
            return await handler(request, store)
        except RegistryError as e:
            try:
                return _json(request, e.body(), e.status)
            except RegistryError:   # the error of an unacceptable Accept header itself
                return web.json_response(e.body(), status=e.status)
        except web.HTTPException:
            raise
        except Exception as e:   # noqa: BLE001 -- answered, logged, the node keeps serving
            log.exception("schema registry %s %s", request.method, request.path)
            return web.json_response(errors.store_error(str(e) or type(e).__name__).body(), status=500)
    return run


async def _body(request: web.Request) -> dict:
    """The JSON object of the request; 415, 413, 400 (not JSON or not an object)."""
    ctype = request.content_type.lower() if request.headers.get("Content-Type") else ""
    if ctype not in BODY_TYPES:
        raise RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise RegistryError(413, 413, "Request body too large") from None
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        raise errors.bad_request("Unexpected character: the body is not JSON") from None
    if not isinstance(body, dict):
        raise errors.bad_request("The body must be a JSON object")
    return body


def _schema_type(body: dict) -> str:
    """``schemaType`` of a register/lookup/compatibility body (AVRO when absent); 42201."""
    schema_type = body.get("schemaType") or "AVRO"
    if not isinstance(schema_type, str) or schema_type.upper() not in TYPES:
        raise errors.RegistryError(422, 42201, f"Invalid schema type {schema_type}")
    return schema_type.upper()


def _schema_request(store: SchemaStore, body: dict, normalize: bool):
    """The :class:`ParsedSchema` of a register/lookup/compatibility body; 42201."""
    return store.state.parse(_schema_type(body), body.get("schema"), body.get("references"), normalize)


def _answer(request: web.Request, store: SchemaStore, sv, identity: bool = True) -> dict:
    """A version (``identity``: with subject, version, id) in the schema format asked
    (``?format=serialized``)."""
    return {**sv.to_json(identity), "schema": store.state.schema_text(sv, request.query.get("format"))}


def _schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise errors.RegistryError(404, 40403, f"Schema {request.match_info['id']} not found") from None


# -- writes: here or forwarded to the writer ----------------------------------------------------------

async def _write(request: web.Request, store: SchemaStore, plan) -> web.Response:
    """Run ``plan(state) -> (records, result)`` on the writer and answer ``result`` once this
    node's state has it."""
    body = await request.read()
    if not store.has_topic():
        plan(store.state)   # an invalid first request must not create the topic
    deadline = time.monotonic() + WRITE_TIMEOUT_S
    while True:
        await store.ensure_topic()
        try:
            result, offset = await store.write_here(plan)
            return _json(request, result, headers={OFFSET_HEADER: str(offset)})
        except NotWriter:
            if request.headers.get(FORWARDED_HEADER):
                refusal = errors.forward_error(f"node {store.services.node_id} is not the writer").body()
                return web.json_response(refusal, status=500, headers={NOT_WRITER_HEADER: "1"})
        forwarded = await _forward(request, store, body)
        if forwarded is not None:
            return forwarded
        if time.monotonic() > deadline:
            raise errors.forward_error(f"no reachable writer for {WRITE_TIMEOUT_S:.0f} s")
        await asyncio.sleep(RETRY_S)


async def _forward(request: web.Request, store: SchemaStore, body: bytes) -> web.Response | None:
    """The writer's answer to the same request, once this node has read what it wrote; None while
    the writer is unknown, unreachable or not the writer any more."""
    leader, _ = store.leader()
    writer = store.state.writer
    if writer is None or writer.node_id != leader or not writer.url:
        return None
    session = request.app.get(_SESSION)
    if session is None:
        session = request.app[_SESSION] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WRITE_TIMEOUT_S))
    headers = {FORWARDED_HEADER: "1", "Content-Type": request.headers.get("Content-Type", V1),
               "Accept": request.headers.get("Accept", V1)}
    try:
        async with session.request(request.method, writer.url + request.path_qs, data=body, headers=headers) as resp:
            data = await resp.read()
            if resp.headers.get(NOT_WRITER_HEADER):
                return None
            offset = int(resp.headers.get(OFFSET_HEADER, "-1"))
            status, ctype = resp.status, resp.content_type
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as e:
        log.info("schema registry: forwarding %s %s to node %d (%s) failed: %s", request.method, request.path,
                 writer.node_id, writer.url, e or type(e).__name__)
        return None
    if offset >= 0:
        await store.wait_for(offset)
    return web.Response(status=status, body=data, content_type=ctype, headers={OFFSET_HEADER: str(offset)})


# -- /schemas ----------------------------------------------------------------------------------------

async def schema_types(request, store):
    """GET /schemas/types: the schema types served."""
    return _json(request, ["JSON", "PROTOBUF", "AVRO"])


async def schemas_list(request, store):
    """GET /schemas[?subjectPrefix=P][&deleted=true][&latestOnly=true]: versions of the subjects."""
    prefix, deleted, latest_only = request.query.get("subjectPrefix", ""), _flag(request, "deleted"), \
        _flag(request, "latestOnly")
    out = []
    for subject in store.state.subjects(deleted, prefix):
        versions = store.state.version_list(subject, deleted)
        for v in (versions[-1:] if latest_only else versions):
            out.append(_answer(request, store, store.state.get_version(subject, v, deleted=True)))
    return _json(request, out)


async def schema_by_id(request, store):
    """GET /schemas/ids/{id}[?format=serialized]: ``{schemaType, references, schema}``; 40403."""
    return _json(request, _answer(request, store, store.state.schema_by_id(_schema_id(request)), identity=False))


async def schema_text_by_id(request, store):
    """GET /schemas/ids/{id}/schema: the schema text itself; 40403."""
    sv = store.state.schema_by_id(_schema_id(request))
    return web.Response(body=sv.schema.encode(), content_type=_media_type(request))


async def subjects_of_id(request, store):
    """GET /schemas/ids/{id}/subjects[?deleted=true]: subjects using the id; 40403."""
    pairs = store.state.subject_versions_of_id(_schema_id(request), _flag(request, "deleted"))
    return _json(request, sorted({s for s, _ in pairs}))


async def versions_of_id(request, store):
    """GET /schemas/ids/{id}/versions[?deleted=true]: ``[{subject, version}]``; 40403."""
    pairs = store.state.subject_versions_of_id(_schema_id(request), _flag(request, "deleted"))
    return _json(request, [{"subject": s, "version": v} for s, v in pairs])


# -- /subjects -------------------------------------------------------------------------------------------

async def subjects(request, store):
    """GET /subjects[?deleted=true][&subjectPrefix=P]: subject names."""
    return _json(request, store.state.subjects(_flag(request, "deleted"), request.query.get("subjectPrefix", "")))


async def subject_versions(request, store):
    """GET /subjects/{subject}/versions[?deleted=true]: version numbers; 40401."""
    return _json(request, store.state.version_list(request.match_info["subject"], _flag(request, "deleted")))


async def register(request, store):
    """POST /subjects/{subject}/versions[?normalize=true]: ``{id}``; 409, 42201, 42205."""
    subject = request.match_info["subject"]
    body = await _body(request)
    normalize = _flag(request, "normalize")
    schema_type = _schema_type(body)
    schema_id, version = body.get("id"), body.get("version")
    if (schema_id is not None and not isinstance(schema_id, int)) or \
            (version is not None and (not isinstance(version, int) or version < 1)):
        raise errors.bad_request("id and version must be integers")
    schema_id = schema_id if schema_id is not None and schema_id >= 0 else None
    return await _write(request, store, lambda st: st.plan_register(subject, st.parse(
        schema_type, body.get("schema"), body.get("references"), normalize), schema_id, version))


async def get_version(request, store):
    """GET /subjects/{subject}/versions/{version}[?deleted=true][&format=serialized]; 40401, 40402, 42202."""
    sv = store.state.get_version(request.match_info["subject"], request.match_info["version"],
                                 _flag(request, "deleted"))
    return _json(request, _answer(request, store, sv))


async def get_version_schema(request, store):
    """GET /subjects/{subject}/versions/{version}/schema: the schema text itself."""
    sv = store.state.get_version(request.match_info["subject"], request.match_info["version"],
                                 _flag(request, "deleted"))
    return web.Response(body=sv.schema.encode(), content_type=_media_type(request))


async def referenced_by(request, store):
    """GET /subjects/{subject}/versions/{version}/referencedby: ids of the schemas referencing it."""
    sv = store.state.get_version(request.match_info["subject"], request.match_info["version"])
    return _json(request, store.state.referenced_by(sv.subject, sv.version))


async def delete_version(request, store):
    """DELETE /subjects/{subject}/versions/{version}[?permanent=true]: the version deleted."""
    subject, spec, permanent = request.match_info["subject"], request.match_info["version"], \
        _flag(request, "permanent")
    return await _write(request, store, lambda st: st.plan_delete_version(subject, spec, permanent))


async def lookup(request, store):
    """POST /subjects/{subject}[?normalize=true][&deleted=true]: the version holding the schema; 40401, 40403."""
    subject = request.match_info["subject"]
    body = await _body(request)
    parsed = _schema_request(store, body, _flag(request, "normalize"))
    return _json(request, _answer(request, store, store.state.lookup(subject, parsed, _flag(request, "deleted"))))


async def delete_subject(request, store):
    """DELETE /subjects/{subject}[?permanent=true]: the versions deleted."""
    subject, permanent = request.match_info["subject"], _flag(request, "permanent")
    return await _write(request, store, lambda st: st.plan_delete_subject(subject, permanent))


# -- /config, /mode, /compatibility ----------------------------------------------------------------

def _subject(request) -> str | None:
    return request.match_info.get("subject")


async def get_config(request, store):
    """GET /config[/{subject}][?defaultToGlobal=true]: ``{compatibilityLevel}``; 40408."""
    subject = _subject(request)
    level = store.state.compatibility(subject, _flag(request, "defaultToGlobal"))
    if level is None:
        if not store.state.versions.get(subject):
            raise errors.subject_not_found(subject)
        raise errors.subject_config_not_found(subject)
    return _json(request, {"compatibilityLevel": level})


async def put_config(request, store):
    """PUT /config[/{subject}] ``{compatibility}``: ``{compatibility}``; 42203."""
    body = await _body(request)
    subject = _subject(request)
    level = body.get("compatibility")
    return await _write(request, store, lambda st: st.plan_set_config(subject, level))


async def delete_config(request, store):
    """DELETE /config[/{subject}]: the level removed; 40408."""
    subject = _subject(request)
    return await _write(request, store, lambda st: st.plan_delete_config(subject))


async def get_mode(request, store):
    """GET /mode[/{subject}][?defaultToGlobal=true]: ``{mode}``; 40409."""
    subject = _subject(request)
    mode = store.state.mode(subject, _flag(request, "defaultToGlobal"))
    if mode is None:
        raise errors.subject_mode_not_found(subject)
    return _json(request, {"mode": mode})


async def put_mode(request, store):
    """PUT /mode[/{subject}][?force=true] ``{mode}``: ``{mode}``; 42204, 42205."""
    body = await _body(request)
    subject, force, mode = _subject(request), _flag(request, "force"), body.get("mode")
    return await _write(request, store, lambda st: st.plan_set_mode(subject, mode, force))


async def delete_mode(request, store):
    """DELETE /mode/{subject}: the mode removed; 40409."""
    subject = _subject(request)
    return await _write(request, store, lambda st: st.plan_delete_mode(subject))


async def compatibility(request, store):
    """POST /compatibility/subjects/{subject}/versions[/{version}][?verbose=true]: ``{is_compatible[, messages]}``."""
    subject, spec = request.match_info["subject"], request.match_info.get("version")
    body = await _body(request)
    parsed = _schema_request(store, body, _flag(request, "normalize"))
    if spec is not None:
        store.state.get_version(subject, spec)   # 40401 / 40402 / 42202
    messages = store.state.check(subject, parsed, spec)
    out: dict = {"is_compatible": not messages}
    if _flag(request, "verbose"):
        out["messages"] = messages
    return _json(request, out)


async def contexts(request, store):
    """GET /contexts: the default context only."""
    return _json(request, ["."])


# -- routes ---------------------------------------------------------------------------------------------

def routes(app: web.Application, services: HttpServices,
           http_bound: Callable[[], list[tuple[str, int]]]) -> None:
    """Add the registry's routes to ``app``; its store reads ``_schemas`` from app start-up.
    ``http_bound()``: the addresses the HTTP listener is bound to (:class:`SchemaStore`)."""
    store = app[_STORE] = SchemaStore(services, http_bound)

    async def start(_app) -> None:
        store.start()

    async def stop(_app) -> None:
        await store.stop()
        session = _app.get(_SESSION)
        if session is not None:
            await session.close()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    table = [
        ("GET", "/schemas/types", schema_types), ("GET", "/schemas", schemas_list),
        ("GET", "/schemas/ids/{id}", schema_by_id), ("GET", "/schemas/ids/{id}/schema", schema_text_by_id),
        ("GET", "/schemas/ids/{id}/subjects", subjects_of_id), ("GET", "/schemas/ids/{id}/versions", versions_of_id),
        ("GET", "/subjects", subjects), ("GET", "/subjects/{subject}/versions", subject_versions),
        ("POST", "/subjects/{subject}/versions", register),
        ("GET", "/subjects/{subject}/versions/{version}", get_version),
        ("GET", "/subjects/{subject}/versions/{version}/schema", get_version_schema),
        ("GET", "/subjects/{subject}/versions/{version}/referencedby", referenced_by),
        ("DELETE", "/subjects/{subject}/versions/{version}", delete_version),
        ("POST", "/subjects/{subject}", lookup), ("DELETE", "/subjects/{subject}", delete_subject),
        ("GET", "/config", get_config), ("PUT", "/config", put_config), ("DELETE", "/config", delete_config),
        ("GET", "/config/{subject}", get_config), ("PUT", "/config/{subject}", put_config),
        ("DELETE", "/config/{subject}", delete_config),
        ("GET", "/mode", get_mode), ("PUT", "/mode", put_mode),
        ("GET", "/mode/{subject}", get_mode), ("PUT", "/mode/{subject}", put_mode),
        ("DELETE", "/mode/{subject}", delete_mode),
        ("POST", "/compatibility/subjects/{subject}/versions/{version}", compatibility),
        ("POST", "/compatibility/subjects/{subject}/versions", compatibility),
        ("GET", "/contexts", contexts),
    ]
    for method, path, handler in table:
        app.router.add_route(method, path, guarded(handler))
    for prefix in ("/subjects", "/schemas", "/config", "/mode", "/compatibility"):   # Confluent's 404 body
        app.router.add_route("*", prefix + "/{tail:.*}", guarded(not_found))


async def not_found(request, store):
    """Any other path under the registry's prefixes: Confluent's 404 body."""
    raise errors.RegistryError(404, 404, "HTTP 404 Not Found")
