"""Bad input that must leave the broker serving.

Each probe keeps a bystander connection open, sends something malformed on a connection of its own,
records what the broker did with it (``closed``, an error response, or nothing), then requires that
the bystander connection and a new connection still get ApiVersions and Metadata answered. What the
broker did with the probed connection is an observed value, compared with Kafka; the pass criterion
is that it keeps serving (and answers the documented error where the protocol has one).
"""

from __future__ import annotations

import random
import struct

from conformance import wire
from conformance.registry import WIRE, scenario


def _still_serving(ctx, bystander: wire.Connection) -> None:
    try:
        ctx.check(wire.api_versions(bystander, 0).error_code == 0, "bystander connection: ApiVersions error")
        wire.metadata(bystander, [])
    except (OSError, ValueError) as e:
        ctx.fail(f"a connection opened before the probe stopped working: {e}")
    try:
        with ctx.wire() as fresh:
            ctx.check(wire.api_versions(fresh, 3).error_code == 0, "new connection: ApiVersions error")
            wire.metadata(fresh, [])
    except (OSError, ValueError) as e:
        ctx.fail(f"the broker does not serve new connections after the probe: {e}")


def _outcome(conn: wire.Connection, wait: float = 3.0) -> str:
    """What the broker did: 'closed', 'responded', or 'kept open' (no answer within ``wait``)."""
    conn.sock.settimeout(wait)
    try:
        data = conn.sock.recv(4)
    except TimeoutError:
        return "kept open"
    except OSError:
        return "closed"
    if not data:
        return "closed"
    return "responded"


def probe(name: str, title: str, *, expect: set[str] | None = None):
    """Register a probe: ``send(ctx, conn)`` sends the bad bytes. ``expect``: allowed outcomes."""

    def deco(send):
        @scenario(f"probe.{name}", area="probes", title=title, clients=[WIRE], timeout=45)
        def run(ctx):
            with ctx.wire() as bystander:
                wire.api_versions(bystander, 0)
                conn = ctx.wire()
                try:
                    send(ctx, conn)
                    outcome = _outcome(conn)
                except OSError:
                    outcome = "closed"
                finally:
                    conn.close()
                ctx.observe(connection=outcome)
                _still_serving(ctx, bystander)
                if expect is not None:
                    ctx.check(outcome in expect, f"probed connection {outcome}; expected {' or '.join(sorted(expect))}")

        run.__doc__ = send.__doc__
        return send

    return deco


@probe("oversize-frame", "A frame larger than socket.request.max.bytes (1 GiB claimed) is refused",
       expect={"closed"})
def oversize(ctx, conn):
    """Size 0x40000000 (> the 100 MiB default of socket.request.max.bytes), then a valid-looking header:
    the broker must close the connection without allocating the claimed size."""
    conn.send_raw(struct.pack(">i", 0x40000000) + struct.pack(">hhi", 18, 0, 1) + b"\x00\x00" + b"x" * 1000)


@probe("negative-frame-size", "A negative frame size closes the connection", expect={"closed"})
def negative(ctx, conn):
    conn.send_raw(struct.pack(">i", -5) + b"\x00" * 16)


@probe("zero-frame-size", "A zero-length frame (no request header) closes the connection", expect={"closed"})
def zero(ctx, conn):
    conn.send_raw(struct.pack(">i", 0) + struct.pack(">i", 0))


@probe("truncated-frame", "A frame that ends early (peer half-closes) leaves the broker serving")
def truncated(ctx, conn):
    """Claims 1000 bytes, sends 20 and shuts down its sending side."""
    conn.send_raw(struct.pack(">i", 1000) + struct.pack(">hhi", 3, 1, 7) + b"\x00\x05abcde" + b"\x00" * 6)
    import socket

    conn.sock.shutdown(socket.SHUT_WR)


@probe("bogus-string-length", "A client id claiming 30000 bytes inside a 20-byte frame is rejected",
       expect={"closed"})
def bogus_string(ctx, conn):
    body = struct.pack(">hhi", 3, 1, 9) + struct.pack(">h", 30000) + b"abcd" + struct.pack(">i", 0)
    conn.send_raw(struct.pack(">i", len(body)) + body)


@probe("huge-array-count", "A Metadata request claiming 2^31-1 topics is rejected without allocating them",
       expect={"closed", "responded"})
def huge_array(ctx, conn):
    body = struct.pack(">hhi", 3, 1, 11) + struct.pack(">h", 4) + b"conf" + struct.pack(">i", 0x7FFFFFFF)
    conn.send_raw(struct.pack(">i", len(body)) + body)


@probe("negative-array-count", "A Metadata v1 request with topics count -7 is rejected",
       expect={"closed", "responded"})
def negative_array(ctx, conn):
    body = struct.pack(">hhi", 3, 1, 12) + struct.pack(">h", 4) + b"conf" + struct.pack(">i", -7)
    conn.send_raw(struct.pack(">i", len(body)) + body)


@probe("unknown-api-key", "An unknown API key (key 999) leaves the broker serving", expect={"closed", "responded"})
def unknown_key(ctx, conn):
    conn.send_raw(wire.request_frame(999, 0, 13, b"\x00" * 8))


@probe("unsupported-version", "Metadata v99 (beyond the advertised range) leaves the broker serving",
       expect={"closed", "responded"})
def unsupported_version(ctx, conn):
    conn.send_raw(wire.request_frame(3, 99, 14, struct.pack(">i", 0)))


@probe("garbage", "256 random bytes in a frame close the connection", expect={"closed", "responded"})
def garbage(ctx, conn):
    rng = random.Random(20240511)
    body = bytes(rng.randrange(256) for _ in range(256))
    conn.send_raw(struct.pack(">i", len(body)) + body)


@probe("flexible-header-garbage-tags", "A flexible request header with a bogus tagged-field count is rejected",
       expect={"closed", "responded"})
def bogus_tags(ctx, conn):
    """ApiVersions v3 header v2 whose tagged-field section claims 2^28 fields."""
    body = struct.pack(">hhi", 18, 3, 15) + struct.pack(">h", 4) + b"conf" + b"\xff\xff\xff\x7f"
    conn.send_raw(struct.pack(">i", len(body)) + body)


@scenario("probe.corrupt-batch-crc", area="probes",
          title="A produced batch with a wrong CRC is refused (CORRUPT_MESSAGE) and nothing is appended",
          clients=[WIRE])
def corrupt_crc(ctx):
    topic = ctx.topic()
    with ctx.wire() as conn:
        res = wire.produce(conn, topic, 0, wire.record_batch([b"a", b"b"], corrupt_crc=True))
        ctx.expect_eq("produce_error", wire.error_name(res["error"]), wire.error_name(2))
        end = wire.list_offsets(conn, topic, 0, -1)
        ctx.expect_eq("log_end_offset_after", end["offset"], 0)
        ok = wire.produce(conn, topic, 0, wire.record_batch([b"c"]))
        ctx.expect_eq("next_produce", (wire.error_name(ok["error"]), ok["base_offset"]), (wire.error_name(0), 0))


@scenario("probe.produce-unknown-partition", area="probes",
          title="Produce to a partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION", clients=[WIRE])
def unknown_partition(ctx):
    topic = ctx.topic()
    with ctx.wire() as conn:
        res = wire.produce(conn, topic, 7, wire.record_batch([b"x"]))
        ctx.expect_eq("produce_error", wire.error_name(res["error"]), wire.error_name(3))
