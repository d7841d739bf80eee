"""Per-API request metrics of the network layer (Kafka's RequestMetrics and SocketServer metrics):
request counts by version, error counts by code, time histograms and request/response bytes, and
the connection counts. Kept as plain numbers updated on each request; exported by
:mod:`kcompat.broker.http.metrics`.

Times follow Kafka's RequestChannel (milliseconds): ``total`` from the request read off the socket
to its response handed to the socket; ``request_queue`` 0 (kcompat handles a request as soon as it
is read, there is no request queue); ``local`` the handler's synchronous work; ``remote`` the wait
for others (replication for acks=all, a long-polling fetch, a coordinator write); ``response_send``
the wait behind earlier responses of the same connection (responses leave in request order)."""

from __future__ import annotations

import bisect

BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)
TIMES = ("total", "request_queue", "local", "remote", "response_send")


class Histogram:
    """Cumulative buckets are built at export; here a count per bucket (last: +Inf) and a sum."""

    __slots__ = ("counts", "sum", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_MS) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value_ms: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS_MS, value_ms)] += 1
        self.sum += value_ms
        self.count += 1


class ApiStats:
    """One API's numbers: ``requests`` (version -> count), ``errors`` (error code -> count, NONE
    included, per partition where the response has partitions, as Kafka's errorCounts),
    ``times`` (name -> :class:`Histogram`), ``request_bytes``, ``response_bytes``."""

    __slots__ = ("requests", "errors", "times", "request_bytes", "response_bytes")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}
        self.errors: dict[int, int] = {}
        self.times = {name: Histogram() for name in TIMES}
        self.request_bytes = 0
        self.response_bytes = 0


class RequestStats:
    """The broker's request and connection numbers, by API key."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}
        self.connections = 0
        self.connections_created = 0
        self.connections_closed = 0
        # responses written with sendfile (kcompat.broker.sendfile_writer) and their file bytes
        self.zero_copy_responses = 0
        self.zero_copy_bytes = 0

    def record(self, api_key: int, version: int, request_bytes: int, response_bytes: int, response,
               local_ms: float, remote_ms: float, send_ms: float) -> None:
        s = self.apis.get(api_key)
        if s is None:
            s = self.apis[api_key] = ApiStats()
        s.requests[version] = s.requests.get(version, 0) + 1
        s.request_bytes += request_bytes
        s.response_bytes += response_bytes
        if response is not None:
            errors = s.errors
            for code in error_codes(response):
                errors[code] = errors.get(code, 0) + 1
        t = s.times
        t["total"].observe(local_ms + remote_ms + send_ms)
        t["request_queue"].observe(0.0)
        t["local"].observe(local_ms)
        t["remote"].observe(remote_ms)
        t["response_send"].observe(send_ms)


_PLANS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _plan(cls) -> tuple[bool, tuple[str, ...]]:
    """(has an ``error_code`` field, names of its list fields of structs) for a generated class."""
    plan = _PLANS.get(cls)
    if plan is None:
        fields = getattr(cls, "FIELDS", ())
        has = any(f[0] == "error_code" for f in fields)
        nested = tuple(f[0] for f in fields if isinstance(f[1], str) and f[1].startswith("[]") and f[7])
        plan = _PLANS[cls] = (has, nested)
    return plan


def error_codes(response):
    """The error codes of a response, as Kafka's errorCounts: the top-level one if the response
    has one, and those of its entries (topics, partitions, groups, ...) two levels deep."""
    has, nested = _plan(type(response))
    if has:
        yield response.error_code
    for name in nested:
        for item in getattr(response, name) or ():
            ihas, inested = _plan(type(item))
            if ihas:
                yield item.error_code
                continue
            for sub in inested:
                for leaf in getattr(item, sub) or ():
                    lhas, _ = _plan(type(leaf))
                    if lhas:
                        yield leaf.error_code
