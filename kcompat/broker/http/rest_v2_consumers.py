"""Confluent REST Proxy API v2 consumer instances on the HTTP listener ("Consumers", REST Proxy API
v2 in Confluent's API reference; ``ConsumersResource`` of confluentinc/kafka-rest). The consumers
themselves are in :mod:`.rest_consumer`.

Content types: requests ``application/vnd.kafka.v2+json`` (the embedded-format variants
``application/vnd.kafka.{binary,json}.v2+json``, ``application/json`` and no Content-Type on an
empty body are accepted as well); responses ``application/vnd.kafka.v2+json``, records
``application/vnd.kafka.binary.v2+json`` or ``application/vnd.kafka.json.v2+json``.

``{group}`` is the consumer group, ``{instance}`` the instance name; ``.../`` below is
``/consumers/{group}/instances/{instance}``:

- ``POST /consumers/{group}`` ``{"name": "c1", "format": "binary"|"json", "auto.offset.reset":
  "earliest"|"latest"|"none", "auto.commit.enable": "true"|"false",
  "consumer.request.timeout.ms": 1000}`` (all optional; ``id`` is the old name of ``name``; the
  default name is ``rest-consumer-<uuid>``) -> 200 ``{"instance_id": "c1", "base_uri":
  "http://host:port/consumers/{group}/instances/c1"}``; 409 40902 if the name is taken in the
  group, 422 42204 for a format or setting the proxy does not support;
- ``DELETE .../`` -> 204 (commits when auto commit is on, leaves the group);
- ``POST .../subscription`` ``{"topics": ["t1", "t2"]}`` or ``{"topic_pattern": "t.*"}`` -> 204;
  ``GET .../subscription`` -> ``{"topics": [...]}``; ``DELETE .../subscription`` -> 204;
- ``POST .../assignments`` ``{"partitions": [{"topic": "t", "partition": 0}]}`` -> 204;
  ``GET .../assignments`` -> ``{"partitions": [...]}``;
- ``GET .../records?timeout=<ms>&max_bytes=<bytes>`` -> ``[{"topic", "key", "value", "partition",
  "offset"}]`` (key/value base64 for ``binary``, JSON for ``json``; headers are not part of v2
  records); ``timeout`` defaults to the instance's ``consumer.request.timeout.ms`` (1000) and is
  capped at 30000, the answer comes as soon as records are there; 406 40601 when the Accept
  header names the other embedded format;
- ``POST .../offsets`` ``{"offsets": [{"topic", "partition", "offset", "metadata"}]}`` commits
  offset + 1 of each (the last record consumed), an empty body commits every consumed position
  -> 200 ``[]``; ``GET .../offsets`` ``{"partitions": [...]}`` -> ``{"offsets": [{"topic",
  "partition", "offset", "metadata"}]}`` (committed ones only; without a body, those of the current
  assignment, which the REST Proxy answers 40402);
- ``POST .../positions`` ``{"offsets": [{"topic", "partition", "offset"}], "timestamps": [{"topic",
  "partition", "timestamp"}]}``, ``POST .../positions/beginning`` and ``.../positions/end``
  ``{"partitions": [...]}`` -> 204 (409 40903 for a partition not assigned to the instance).

Errors: 404 40403 "Consumer instance not found.", 409 40903 "Illegal state: ..." (assign while
subscribed and the other way round, seek on an unassigned partition), 422 (error_code 422) for a
request body of the wrong shape, 400 for malformed JSON, Kafka errors as
:func:`rest_common.kafka_error` maps them.
"""

from __future__ import annotations

import re
import uuid
from urllib.parse import quote
from typing import TYPE_CHECKING

from aiohttp import web

from kcompat.broker.http.kafka_client import EARLIEST, LATEST
from kcompat.broker.http.rest_common import (
    CONSUMER_ALREADY_EXISTS, CONSUMER_FORMAT_MISMATCH, INVALID_CONSUMER_CONFIG, RestError, V2_CONTENT_TYPE,
    add_fallback, add_route, json_body, json_response, no_content, parse_timestamp, rest_handler, unprocessable,
)
from kcompat.broker.http.rest_consumer import ConsumerInstance
from kcompat.broker.http.rest_consumer_manager import ConsumerManager

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

BASE = "/consumers/{group}/instances/{instance}"
MAX_READ_TIMEOUT_MS = 30000
MAX_RESPONSE_BYTES = 67108864     # the REST Proxy's consumer.request.max.bytes
_EMBEDDED = re.compile(r"application/vnd\.kafka\.(\w+)\.v2\+json")
_ACCEPTED_TYPES = ("", "application/json", "application/vnd.kafka.v2+json", "application/vnd.kafka+json",
                   "application/vnd.kafka.binary.v2+json", "application/vnd.kafka.json.v2+json",
                   "application/octet-stream")


def _check_content_type(request: web.Request) -> None:
    ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if ctype not in _ACCEPTED_TYPES:
        raise RestError(415, 415, "HTTP 415 Unsupported Media Type")


def _partitions(items, what: str = "partitions") -> list[tuple[str, int]]:
    """``[{"topic": str, "partition": int >= 0}]`` -> [(topic, partition)]; 422 otherwise."""
    if not isinstance(items, list):
        raise unprocessable(f"{what} must be an array of {{topic, partition}}")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise unprocessable(f"each of {what} must be an object with topic and partition")
        topic, partition = item.get("topic"), item.get("partition")
        if not isinstance(topic, str) or not topic:
            raise unprocessable("topic must be a non-empty string")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise unprocessable("partition must be an integer >= 0")
        out.append((topic, partition))
    return out


def _offset(item, field: str = "offset") -> int:
    value = item.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise unprocessable(f"{field} must be an integer >= 0")
    return value


def _field(body, name: str):
    if body is None:
        return None
    if not isinstance(body, dict):
        raise unprocessable("the request body must be a JSON object")
    return body.get(name)


def _flag(value, name: str, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise RestError(422, INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: {name} must be true or false")


def _create_settings(body) -> dict:
    """Validated settings of ``POST /consumers/{group}``."""
    body = body or {}
    if not isinstance(body, dict):
        raise unprocessable("the request body must be a JSON object")
    name = body.get("id") if body.get("id") is not None else body.get("name")
    if name is not None and (not isinstance(name, str) or not name or "/" in name):
        raise RestError(422, INVALID_CONSUMER_CONFIG, "Invalid consumer configuration: name must be a non-empty "
                                                      "string without '/'")
    fmt = body.get("format") or "binary"
    if not isinstance(fmt, str) or fmt.lower() not in ("binary", "json"):
        detail = ("needs a Schema Registry, which kcompat does not provide"
                  if isinstance(fmt, str) and fmt.lower() in ("avro", "jsonschema", "protobuf") else
                  "must be binary or json")
        raise RestError(422, INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: format {fmt!r} {detail}")
    reset = body.get("auto.offset.reset") or "latest"
    if not isinstance(reset, str) or reset.lower() not in ("earliest", "latest", "none"):
        raise RestError(422, INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: Invalid value {reset} for "
                                                      "configuration auto.offset.reset: String must be one of: "
                                                      "latest, earliest, none")
    timeout = body.get("consumer.request.timeout.ms", body.get("requestWaitMs"))
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0):
        raise RestError(422, INVALID_CONSUMER_CONFIG,
                        "Invalid consumer configuration: consumer.request.timeout.ms must be an integer >= 0")
    return {"name": name or f"rest-consumer-{uuid.uuid4()}", "fmt": fmt.lower(), "reset": reset.lower(),
            "auto_commit": _flag(body.get("auto.commit.enable"), "auto.commit.enable", True),
            "request_timeout_ms": min(timeout if timeout else 1000, MAX_READ_TIMEOUT_MS)}


def _query_int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise RestError(400, 400, f"Query parameter {name} must be an integer, not {raw!r}") from None


def routes(app: web.Application, services: HttpServices) -> None:
    """Register the ``/consumers`` routes on ``app``; the instances are closed with it."""
    manager = ConsumerManager(services)
    handler = rest_handler(V2_CONTENT_TYPE)

    async def close_all(_app) -> None:
        await manager.close()
    app.on_shutdown.append(close_all)

    def instance(request: web.Request) -> ConsumerInstance:
        return manager.get(request.match_info["group"], request.match_info["instance"])

    def ok(obj) -> web.Response:
        return json_response(obj, 200, V2_CONTENT_TYPE)

    @handler
    async def create(request):
        _check_content_type(request)
        group = request.match_info["group"]
        settings = _create_settings(await json_body(request, required=False))
        if (group, settings["name"]) in manager.instances:
            raise RestError(409, CONSUMER_ALREADY_EXISTS,
                            "Consumer with specified consumer ID already exists in the specified consumer group.")
        inst = ConsumerInstance(services, group, settings["name"], settings["fmt"], settings["reset"],
                                settings["auto_commit"], settings["request_timeout_ms"])
        manager.add(inst)
        return ok({"instance_id": inst.name,
                   "base_uri": f"{request.url.origin()}/consumers/{quote(group, safe='')}/instances/"
                               f"{quote(inst.name, safe='')}"})

    @handler
    async def delete(request):
        await manager.remove(request.match_info["group"], request.match_info["instance"])
        return no_content()

    @handler
    async def subscribe(request):
        _check_content_type(request)
        inst = instance(request)
        body = await json_body(request)
        topics, pattern = _field(body, "topics"), _field(body, "topic_pattern")
        if topics is not None:
            if not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics):
                raise unprocessable("topics must be an array of topic names")
            await inst.subscribe(topics, None)
        elif pattern is not None:
            if not isinstance(pattern, str) or not pattern:
                raise unprocessable("topic_pattern must be a non-empty string")
            try:
                re.compile(pattern)
            except re.error as e:
                raise unprocessable(f"topic_pattern is not a valid regular expression: {e}") from None
            await inst.subscribe(None, pattern)
        else:
            raise unprocessable("A list (of Topics type) or a topic pattern must be specified.")
        return no_content()

    @handler
    async def subscription(request):
        return ok({"topics": instance(request).subscribed_topics()})

    @handler
    async def unsubscribe(request):
        await instance(request).unsubscribe()
        return no_content()

    @handler
    async def assign(request):
        _check_content_type(request)
        inst = instance(request)
        await inst.assign(_partitions(_field(await json_body(request), "partitions")))
        return no_content()

    @handler
    async def assignments(request):
        return ok({"partitions": [{"topic": t, "partition": p} for t, p in instance(request).assigned()]})

    @handler
    async def records(request):
        inst = instance(request)
        named = set(_EMBEDDED.findall(request.headers.get("Accept", "")))
        if named and inst.format not in named:
            raise RestError(406, CONSUMER_FORMAT_MISMATCH, "The requested embedded data format does not match the "
                                                           "deserializer for this consumer instance")
        timeout = _query_int(request, "timeout")
        max_bytes = _query_int(request, "max_bytes")
        timeout = inst.request_timeout_ms if timeout is None or timeout <= 0 else min(timeout, MAX_READ_TIMEOUT_MS)
        max_bytes = MAX_RESPONSE_BYTES if max_bytes is None or max_bytes <= 0 else min(max_bytes, MAX_RESPONSE_BYTES)
        out = await inst.read(timeout, max_bytes)
        return json_response(out, 200, f"application/vnd.kafka.{inst.format}.v2+json")

    @handler
    async def commit(request):
        _check_content_type(request)
        inst = instance(request)
        body = await json_body(request, required=False)
        items = _field(body, "offsets")
        if items is None:
            await inst.commit(None)
        else:
            tps = _partitions(items, "offsets")
            offsets = {}
            for (t, p), item in zip(tps, items):
                meta = item.get("metadata")
                if meta is not None and not isinstance(meta, str):
                    raise unprocessable("metadata must be a string")
                offsets[(t, p)] = (_offset(item) + 1, meta)
            await inst.commit(offsets)
        return ok([])

    @handler
    async def committed(request):
        inst = instance(request)
        body = await json_body(request, required=False)
        items = _field(body, "partitions")
        tps = inst.assigned() if items is None else _partitions(items)
        found = await inst.committed(tps) if tps else {}
        return ok({"offsets": [{"topic": t, "partition": p, "offset": found[(t, p)][0],
                                "metadata": found[(t, p)][1] or ""} for t, p in tps if (t, p) in found]})

    @handler
    async def seek(request):
        _check_content_type(request)
        inst = instance(request)
        body = await json_body(request)
        items, stamps = _field(body, "offsets"), _field(body, "timestamps")
        if items is None and stamps is None:
            raise unprocessable("offsets or timestamps must be given")
        if items is not None:
            tps = _partitions(items, "offsets")
            await inst.seek({tp: _offset(item) for tp, item in zip(tps, items)})
        if stamps is not None:
            tps = _partitions(stamps, "timestamps")
            for tp, item in zip(tps, stamps):
                try:
                    ts = parse_timestamp(item.get("timestamp"))
                except (ValueError, OverflowError) as e:
                    raise unprocessable(f"timestamp must be an ISO 8601 date-time: {e}") from None
                await inst.seek_to([tp], ts)
        return no_content()

    def seek_to(where: int):
        @handler
        async def seek_end(request):
            _check_content_type(request)
            inst = instance(request)
            await inst.seek_to(_partitions(_field(await json_body(request), "partitions")), where)
            return no_content()
        return seek_end

    add_route(app, "POST", "/consumers/{group}", create)
    add_route(app, "DELETE", BASE, delete)
    add_route(app, "POST", f"{BASE}/subscription", subscribe)
    add_route(app, "GET", f"{BASE}/subscription", subscription)
    add_route(app, "DELETE", f"{BASE}/subscription", unsubscribe)
    add_route(app, "POST", f"{BASE}/assignments", assign)
    add_route(app, "GET", f"{BASE}/assignments", assignments)
    add_route(app, "GET", f"{BASE}/records", records)
    add_route(app, "POST", f"{BASE}/offsets", commit)
    add_route(app, "GET", f"{BASE}/offsets", committed)
    add_route(app, "POST", f"{BASE}/positions", seek)
    add_route(app, "POST", f"{BASE}/positions/beginning", seek_to(EARLIEST))
    add_route(app, "POST", f"{BASE}/positions/end", seek_to(LATEST))
    add_fallback(app, "/consumers/", V2_CONTENT_TYPE)
