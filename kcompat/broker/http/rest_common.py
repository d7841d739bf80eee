"""What the REST Proxy modules (:mod:`.rest_v3`, :mod:`.rest_v3_produce`, :mod:`.rest_v2_consumers`)
share: Confluent's error bodies and codes, bounded body reading, JSON parsing, the mapping of Kafka
error codes to REST errors, and ISO 8601 timestamps.

Errors are answered as Confluent's REST Proxy answers them (``io.confluent.rest.exceptions`` and
``io.confluent.kafkarest.Errors``): a JSON body ``{"error_code": <int>, "message": "..."}`` with an
HTTP status; ``error_code`` is either the HTTP status itself (400, 404, 413, 415, 422, 500) or a
five-digit code whose first three digits are the status (40401 topic not found, 40402 partition
not found, 40403 consumer instance not found, 40601 format mismatch, 40901/40902/40903 conflicts,
42204 invalid consumer configuration, 42206 payload error, 50002 Kafka error, 50003 retriable
Kafka error, 50302 broker not available).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import functools
import json
import logging

from aiohttp import web

from kcompat.protocol.errors import ErrorCode
from kcompat.schema_registry.errors import RegistryError

log = logging.getLogger("kcompat.http.rest")

V3_CONTENT_TYPE = "application/json"
V2_CONTENT_TYPE = "application/vnd.kafka.v2+json"

# Confluent's codes (KafkaExceptionMapper, kafkarest Errors)
TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
KAFKA_UNKNOWN_TOPIC_PARTITION = 40403
KAFKA_BAD_REQUEST = 40002
KAFKA_AUTHENTICATION = 40101
KAFKA_AUTHORIZATION = 40301
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_SUBSCRIBED = 40901
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
INVALID_CONSUMER_CONFIG = 42204
INVALID_PAYLOAD = 42206
TOO_MANY_REQUESTS = 42901
KAFKA_ERROR = 50002
KAFKA_RETRIABLE = 50003
BROKER_NOT_AVAILABLE = 50302

RECORD_TOO_LARGE_MESSAGE = "The request included a message larger than the maximum message size the server can accept."


class RestError(RegistryError):
    """An error answered as ``{"error_code": code, "message": message}`` with HTTP ``status``
    (Confluent's REST Proxy and Schema Registry share that shape: ``status``, ``code``,
    ``message``, ``body()``)."""


def not_found(message: str = "HTTP 404 Not Found") -> RestError:
    """404; ``error_code`` 404 (a path, cluster or group that does not exist)."""
    return RestError(404, 404, message)


def bad_request(message: str) -> RestError:
    """400, ``error_code`` 400 (malformed JSON, a record the proxy cannot take)."""
    return RestError(400, 400, message)


def unprocessable(message: str, code: int = 422) -> RestError:
    """422 (``error_code`` 422 or a 422xx code): a well-formed body that makes no sense."""
    return RestError(422, code, message)


def topic_not_found() -> RestError:
    """404 40401 "Topic not found." """
    return RestError(404, TOPIC_NOT_FOUND, "Topic not found.")


def partition_not_found() -> RestError:
    """404 40402 "Partition not found." """
    return RestError(404, PARTITION_NOT_FOUND, "Partition not found.")


def too_large(message: str = RECORD_TOO_LARGE_MESSAGE) -> RestError:
    """413, ``error_code`` 413: a body or record larger than accepted."""
    return RestError(413, 413, message)


# Kafka's RetriableException subclasses among the codes a produce, fetch or commit can see
RETRIABLE = frozenset({
    ErrorCode.CORRUPT_MESSAGE, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.UNSTABLE_OFFSET_COMMIT, ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.STALE_MEMBER_EPOCH,
})
_BAD_REQUEST = frozenset({
    ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.POLICY_VIOLATION, ErrorCode.INVALID_PARTITIONS,
    ErrorCode.INVALID_REPLICATION_FACTOR, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_CONFIG,
    ErrorCode.SECURITY_DISABLED, ErrorCode.TOPIC_DELETION_DISABLED,
})
_AUTHORIZATION = frozenset({
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
})


def error_name(code: int) -> str:
    """Kafka's name of an error code (``error <n>`` for one kcompat does not know)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def kafka_error(code: int, message: str | None = None) -> RestError:
    """A Kafka protocol error as Confluent's ``KafkaExceptionMapper`` maps the Java exception:
    authentication 401/40101, authorization 403/40301, UNKNOWN_TOPIC_OR_PARTITION 404/40403,
    BROKER_NOT_AVAILABLE 503/50302, THROTTLING_QUOTA_EXCEEDED 429/42901, the admin-style errors
    (INVALID_REQUEST, UNSUPPORTED_VERSION, INVALID_TOPIC_EXCEPTION, POLICY_VIOLATION, ...) 400/40002,
    retriable errors 500/50003, anything else 500/50002. MESSAGE_TOO_LARGE and
    RECORD_LIST_TOO_LARGE (the producer's RecordTooLargeException) are 413/413, as the REST Proxy
    documents for ``/records``."""
    text = f"{error_name(code)}: {message}" if message else error_name(code)
    if code in (ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.ILLEGAL_SASL_STATE,
                ErrorCode.UNSUPPORTED_SASL_MECHANISM):
        return RestError(401, KAFKA_AUTHENTICATION, text)
    if code in _AUTHORIZATION:
        return RestError(403, KAFKA_AUTHORIZATION, text)
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, KAFKA_UNKNOWN_TOPIC_PARTITION, "This server does not host this topic-partition.")
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return too_large()
    if code == ErrorCode.BROKER_NOT_AVAILABLE:
        return RestError(503, BROKER_NOT_AVAILABLE, text)
    if code == ErrorCode.THROTTLING_QUOTA_EXCEEDED:
        return RestError(429, TOO_MANY_REQUESTS, text)
    if code in _BAD_REQUEST:
        return RestError(400, KAFKA_BAD_REQUEST, text)
    if code in RETRIABLE:
        return RestError(500, KAFKA_RETRIABLE, text)
    return RestError(500, KAFKA_ERROR, f"Kafka error: {text}")


def unavailable(what: str) -> RestError:
    """A retriable failure of the proxy's own Kafka requests (connection lost, timed out)."""
    return RestError(500, KAFKA_RETRIABLE, what)


# ------------------------------------------------------------------------------------------------
# responses and handlers
# ------------------------------------------------------------------------------------------------

def dumps(obj) -> str:
    """Compact JSON, UTF-8 as is (Jackson's output)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def json_response(obj, status: int = 200, content_type: str = V3_CONTENT_TYPE) -> web.Response:
    """``obj`` as compact JSON with ``status`` and ``content_type``."""
    return web.Response(text=dumps(obj), status=status, content_type=content_type)


def no_content() -> web.Response:
    """204, as the REST Proxy answers requests that return nothing."""
    return web.Response(status=204)


def rest_handler(content_type: str):
    """Decorate an aiohttp handler: a :class:`RestError` becomes its JSON body and status, any
    other exception a logged 500 ``{"error_code": 500, "message": "Internal Server Error"}``, so a
    bad request never escapes as aiohttp's plain-text error page."""
    def wrap(fn):
        @functools.wraps(fn)
        async def handler(request: web.Request) -> web.StreamResponse:
            try:
                return await fn(request)
            except RestError as e:
                return json_response(e.body(), e.status, content_type)
            except (asyncio.CancelledError, web.HTTPException):
                raise
            except Exception:
                log.exception("%s %s failed", request.method, request.path)
                return json_response({"error_code": 500, "message": "Internal Server Error"}, 500, content_type)
        return handler
    return wrap


def add_route(app: web.Application, method: str, path: str, handler) -> None:
    """Serve ``path`` with and without a trailing slash, as the REST Proxy (Jersey) does."""
    app.router.add_route(method, path, handler)
    app.router.add_route(method, path + "/", handler)


def add_fallback(app: web.Application, prefix: str, content_type: str) -> None:
    """JSON 404 (or 405 when the path exists for other methods) for anything under ``prefix``
    that no route serves, as the REST Proxy's ``{"error_code": 404, "message": "HTTP 404 Not Found"}``."""
    async def fallback(request: web.Request) -> web.Response:
        for resource in request.app.router.resources():
            if resource is own:
                continue
            match, allowed = await resource.resolve(request)
            if match is None and allowed:
                return json_response({"error_code": 405, "message": "HTTP 405 Method Not Allowed"}, 405,
                                     content_type)
        return json_response(not_found().body(), 404, content_type)
    own = app.router.add_route("*", prefix + "{tail:.*}", fallback).resource


# ------------------------------------------------------------------------------------------------
# request bodies
# ------------------------------------------------------------------------------------------------

SMALL_BODY_LIMIT = 1 << 20   # bytes: bodies of the requests that carry no records


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, at most ``limit`` bytes (RestError 413 beyond, before reading it when the
    Content-Length says so)."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(f"Request body of {request.content_length} bytes is larger than the {limit} bytes accepted.")
    out = bytearray()
    while True:
        chunk = await request.content.readany()
        if not chunk:
            return bytes(out)
        out += chunk
        if len(out) > limit:
            raise too_large(f"Request body is larger than the {limit} bytes accepted.")


def _no_constants(name: str):
    raise ValueError(f"Non-standard token '{name}'")


def parse_json(data: bytes | str):
    """Decode one JSON document; ValueError (with the decoder's message) if it is not valid JSON
    (NaN and Infinity, which Jackson refuses, included) or nests deeper than Python's recursion
    limit."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    try:
        return json.loads(data, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


async def json_body(request: web.Request, *, required: bool = True):
    """The request's JSON body (None when empty and not ``required``): 400 for malformed JSON,
    422 ``Payload error`` for an empty body that is required, 413 beyond
    :data:`SMALL_BODY_LIMIT`."""
    data = await read_body(request, SMALL_BODY_LIMIT)
    if not data.strip():
        if required:
            raise unprocessable("Payload error. Request body is empty. Data is required.", INVALID_PAYLOAD)
        return None
    try:
        return parse_json(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"Error processing JSON: {e}") from None


def media_type(request: web.Request) -> str:
    """The request's Content-Type without parameters, lower case ("" if none)."""
    return (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()


# ------------------------------------------------------------------------------------------------
# time
# ------------------------------------------------------------------------------------------------

def iso_timestamp(ms: int) -> str:
    """Epoch milliseconds as Java's ``Instant.toString`` prints them: ``2021-02-05T19:14:42.123Z``
    (no fraction for whole seconds)."""
    t = _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc).replace(microsecond=(ms % 1000) * 1000)
    text = t.strftime("%Y-%m-%dT%H:%M:%S")
    if ms % 1000:
        text += f".{ms % 1000:03d}"
    return text + "Z"


def parse_timestamp(value) -> int:
    """An ISO 8601 date-time (``2021-02-05T19:14:42Z``, an offset, or a naive time taken as UTC) as
    epoch milliseconds; ValueError otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"timestamp must be an ISO 8601 string, not {type(value).__name__}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    t = _dt.datetime.fromisoformat(text)
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return int(t.timestamp() * 1000)
