"""Raw protocol access: one request at a time with kcompat's codecs over a plain blocking socket
(used by the test fixtures' admin calls and by tests that need exact wire control)."""

from __future__ import annotations

import socket
import struct

from kcompat.protocol.messages import api_classes
from kcompat.protocol.messages.headers import RequestHeader, ResponseHeader


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    """A blocking connection to ``host:port`` whose reads and writes time out after ``timeout`` s."""
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock``; ConnectionError if the broker closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def send_request(sock: socket.socket, request, version: int, correlation_id: int = 1,
                 client_id: str = "kcompat-testing") -> None:
    """Write one request frame (size, header v1 or v2 as the version is flexible, body)."""
    req_cls = type(request)
    flexible = req_cls.FLEXIBLE_MIN is not None and version >= req_cls.FLEXIBLE_MIN
    body = bytearray()
    RequestHeader(request_api_key=req_cls.API_KEY, request_api_version=version, correlation_id=correlation_id,
                  client_id=client_id).write(body, 2 if flexible else 1)
    request.write(body, version)
    sock.sendall(struct.pack(">i", len(body)) + bytes(body))


def read_response(sock: socket.socket, api_key: int, version: int):
    """Read one response frame; returns (correlation id, decoded response)."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    frame = memoryview(recv_exact(sock, size))
    _req_cls, resp_cls = api_classes(api_key)
    flexible = resp_cls.FLEXIBLE_MIN is not None and version >= resp_cls.FLEXIBLE_MIN and api_key != 18
    header, off = ResponseHeader.read(frame, 0, 1 if flexible else 0)
    resp, _ = resp_cls.read(frame, off, version)
    return header.correlation_id, resp


def call(bootstrap: str, request, version: int):
    """One request/response round trip on a fresh connection."""
    with connect(bootstrap) as sock:
        send_request(sock, request, version)
        return read_response(sock, type(request).API_KEY, version)[1]


def api_versions(bootstrap: str) -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of every API the broker lists in ApiVersions v3."""
    from kcompat.protocol.messages.api_versions import ApiVersionsRequest
    resp = call(bootstrap, ApiVersionsRequest(client_software_name="kcompat-testing",
                                              client_software_version="1"), 3)
    assert resp.error_code == 0
    return [(a.api_key, a.min_version, a.max_version) for a in resp.api_keys]
