"""What tools/fuzz_protocol.py fuzzes: every decoder kcompat runs on bytes from outside.

A :class:`Target` is one decoder with the property it must keep: ``run(data)`` either returns or
raises one of ``allowed`` (the decoder's own error type); anything else is a finding. ``seeds``
are valid encodings to mutate; ``scaled(k)`` a valid input that grows linearly with ``k`` (the
linear-time check). Targets, by group:

- ``request``: ``<Request>.read`` of every API key and version in the protocol (flexible and
  not), whether kcompat serves it or not: the generated decoders (tools/gen_protocol.py).
  Allowed: DecodeError.
- ``header``: RequestHeader v1 and v2, as the connection reads them. Allowed: DecodeError.
- ``frame``: the connection itself (kcompat/broker/connection.py ``KafkaConnection``) on a broker
  and on a controller listener, handlers stubbed: framing, header, KIP-511, unknown keys and
  versions, body decoding, the error responses it builds. Nothing may escape ``buffer_updated``;
  a closed connection must have logged why; a complete frame is never left unanswered.
- ``batch``: ``records.parse_header`` / ``iter_batches`` / ``crc_valid`` / ``iter_records`` /
  ``scan_records`` over a buffer of batches. Allowed: CorruptRecordError.
- ``compression``: ``compression.decompress_chunks`` per codec under ``decompressed_limit``.
  Allowed: CompressionError.
- ``append``: ``Partition.append`` (the produce-side validation) on a real Log in a temporary
  directory, for a plain, a compacted, a LogAppendTime and a timestamp-bounded topic. Allowed:
  KafkaError with a Kafka error code.
- ``follower``: ``Partition.append_as_follower``. Allowed: KafkaError, and the ValueError the log
  documents for offsets that do not follow its end (``Log.append``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
import struct
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from kcompat.protocol import compression
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages import API_TABLE, api_classes
from kcompat.protocol.messages.headers import RequestHeader
from kcompat.protocol.primitives import DecodeError

NOW_MS = 1_700_000_000_000
BIG = (400, 800, 1600, 3200)  # scaled(k) sizes for targets whose inputs are cheap per byte
_CLEANUPS: list[Callable[[], None]] = []


@dataclass
class Target:
    name: str
    group: str
    run: Callable[[bytes], object]
    allowed: tuple = ()
    seeds: Callable[[random.Random], list[bytes]] = lambda rng: []
    scaled: Callable[[int], bytes] | None = None
    accept: Callable[[BaseException], bool] = lambda e: True  # extra condition on an allowed error
    reset: Callable[[], None] = lambda: None  # forget state between measured runs (a fresh log)
    close: Callable[[], None] = lambda: None  # undo what building the target did (close_all: every target)
    scale: tuple = (50, 100, 200, 400)  # the k of scaled(k) for the linear-time check

    def check(self, data: bytes) -> BaseException | None:
        """Run one input; the exception that breaks the property, or None."""
        try:
            self.run(data)
        except self.allowed as e:
            if not self.accept(e):
                return e
        except Exception as e:  # noqa: BLE001 - any other exception is the finding
            return e
        return None


# ------------------------------------------------------------------------------------------------
# valid messages from the generated classes' FIELDS
# ------------------------------------------------------------------------------------------------

def _in(versions, v: int) -> bool:
    lo, hi = versions
    return v >= lo and (hi is None or v <= hi)


def sample(cls, root, version: int, rng: random.Random, width: int | None = None, depth: int = 0):
    """A ``cls`` instance valid at ``version`` with every present field set: arrays get ``width``
    elements at the top level (random 0-3 if None; nested arrays 0-2), nullable fields sometimes
    null, tagged fields set, and sometimes an unknown tagged field."""
    kw = {}
    for attr, typ, versions, nullable, _tag, _tagged, _flex, ref in cls.FIELDS:
        if not _in(versions, version):
            continue
        if _in(nullable, version) and rng.random() < 0.15:
            kw[attr] = None
            continue
        kw[attr] = _value(typ, ref, root, version, rng, width if depth == 0 else None, depth)
    obj = cls(**kw)
    flexible = root.FLEXIBLE_MIN is not None and version >= root.FLEXIBLE_MIN
    if flexible and rng.random() < 0.2:
        obj.unknown_tagged_fields = [(rng.choice([90, 1000, 70000]), rng.randbytes(rng.randint(0, 6)))]
    return obj


def _value(typ, ref, root, version, rng, width, depth):
    if typ.startswith("[]"):
        n = width if width is not None else rng.randint(0, 3 if depth == 0 else 2)
        return [_value(typ[2:], ref, root, version, rng, None, depth + 1) for _ in range(n)]
    if ref is not None:
        return sample(getattr(root, ref), root, version, rng, None, depth + 1)
    if typ in ("int8", "int16", "int32", "int64"):
        bits = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}[typ]
        return rng.choice([0, -1, 1, rng.randint(0, min(1000, (1 << bits) - 1)), (1 << bits) - 1, -(1 << bits)])
    if typ in ("uint16", "uint32"):
        return rng.choice([0, 1, 65535 if typ == "uint16" else 0xFFFFFFFF, rng.randint(0, 1000)])
    if typ == "float64":
        return rng.random()
    if typ == "string":
        return rng.choice(["", "t", "fuzz-topic", "ü-\u2603", "x" * 40])
    if typ == "bytes":
        return rng.randbytes(rng.randint(0, 12))
    if typ == "bool":
        return rng.random() < 0.5
    if typ == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if typ == "records":
        return valid_batch(rng)
    raise ValueError(f"no sample for type {typ}")


def dense(cls, root, version: int, width: int, depth: int = 0):
    """A ``cls`` instance valid at ``version`` whose top-level arrays hold ``width`` elements of
    the smallest encoding (nested arrays empty, strings and bytes empty, numbers 0): the most
    decoded objects per input byte, for the memory check."""
    kw = {}
    for attr, typ, versions, _nullable, _tag, _tagged, _flex, ref in cls.FIELDS:
        if not _in(versions, version):
            continue
        if typ.startswith("[]"):
            n = width if depth == 0 else 0
            elem = typ[2:]
            if ref is not None:
                kw[attr] = [dense(getattr(root, ref), root, version, width, depth + 1) for _ in range(n)]
            else:
                kw[attr] = [_zero(elem) for _ in range(n)]
        elif ref is not None:
            kw[attr] = dense(getattr(root, ref), root, version, width, depth + 1)
        else:
            kw[attr] = _zero(typ)
    return cls(**kw)


def _zero(typ: str):
    return {"string": "", "bytes": b"", "records": b"", "bool": False, "float64": 0.0,
            "uuid": uuid.UUID(int=0)}.get(typ, 0)


def repeated(cls, version: int, k: int):
    """A sample ``cls`` instance whose top-level arrays hold one element repeated ``k`` times:
    its encoding grows by the same bytes per element (the linear-time check's scaled input)."""
    obj = sample(cls, cls, version, random.Random(1), width=1)
    for attr in cls.__slots__:
        value = getattr(obj, attr, None)
        if isinstance(value, list) and len(value) == 1:
            setattr(obj, attr, value * k)
    return obj


def encode(obj, version: int) -> bytes:
    out = bytearray()
    obj.write(out, version)
    return bytes(out)


def valid_batch(rng: random.Random, n: int | None = None, codec: int | None = None, keys: bool = True,
                ts: int = NOW_MS, **kw) -> bytes:
    """A RecordBatch v2 with ``n`` records (random 1-5) of small keys, values and headers."""
    n = rng.randint(1, 5) if n is None else n
    codec = rng.choice([0, 0, 1, 2, 3, 4]) if codec is None else codec
    recs = [(ts + i, (b"k%d" % i) if keys or rng.random() < 0.5 else None,
             rng.choice([None, b"", rng.randbytes(rng.randint(1, 40))]),
             (("h", b"v"),) if rng.random() < 0.3 else ()) for i in range(n)]
    return rb.build_batch(recs, codec=codec, **kw)


# ------------------------------------------------------------------------------------------------
# decoder targets
# ------------------------------------------------------------------------------------------------

def request_targets() -> list[Target]:
    out = []
    for key in sorted(API_TABLE):
        req, _ = api_classes(key)
        lo, hi = req.VALID_VERSIONS
        for v in range(lo, hi + 1):
            out.append(Target(
                name=f"request:{key}:{v}", group="request",
                run=lambda data, c=req, v=v: c.read(memoryview(data), 0, v),
                allowed=(DecodeError,),
                seeds=lambda rng, c=req, v=v: [encode(sample(c, c, v, rng), v) for _ in range(4)]
                + [encode(sample(c, c, v, rng, width=0), v), encode(dense(c, c, v, 300), v)],
                scaled=lambda k, c=req, v=v: encode(repeated(c, v, k), v)))
    return out


def header_targets() -> list[Target]:
    def seeds(rng, v):
        return [encode(RequestHeader(request_api_key=rng.randrange(90), request_api_version=rng.randrange(18),
                                     correlation_id=rng.randrange(1 << 31),
                                     client_id=rng.choice([None, "", "kafka-python", "x" * 300])), v)
                for _ in range(4)]
    return [Target(name=f"header:{v}", group="header", run=lambda d, v=v: RequestHeader.read(memoryview(d), 0, v),
                   allowed=(DecodeError,), seeds=lambda rng, v=v: seeds(rng, v),
                   scaled=lambda k, v=v: encode(RequestHeader(client_id="c" * min(k, 32767)), v))
            for v in (1, 2)]


# -- the connection, with stub handlers --------------------------------------------------------------

class _Transport:
    def __init__(self) -> None:
        self.closed = False
        self.written = 0
        self.reading = True

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def writelines(self, bufs) -> None:
        self.written += sum(len(b) for b in bufs)

    def write(self, b) -> None:
        self.written += len(b)

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def _feed(conn, transport: _Transport, data: bytes) -> bytes:
    """Deliver ``data`` to ``conn`` as a transport does to an ``asyncio.BufferedProtocol``: into
    the buffers its ``get_buffer`` gives, as many reads as it takes, until the bytes run out, the
    connection pauses reading or it is closed; returns the bytes not delivered."""
    pos = 0
    while pos < len(data) and transport.reading and not transport.closed:
        with conn.get_buffer(-1) as buf:
            n = min(len(buf), len(data) - pos)
            buf[:n] = data[pos:pos + n]
        pos += n
        conn.buffer_updated(n)
    return data[pos:]


class _CloseLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record) -> None:
        self.records.append(record.getMessage())


class FrameProblem(Exception):
    """The connection broke a property without raising (closed silently, a frame left pending)."""


def frame_target(controller: bool) -> Target:
    from kcompat.broker import apis
    from kcompat.broker import connection as conn_mod
    from kcompat.broker.request_stats import RequestStats
    from kcompat.broker.context import NO_RESPONSE
    from kcompat.broker.listeners import ConnectionServices
    from kcompat.broker.quota.client_quota import QuotaManagers
    from kcompat.broker.quota.connections import ConnectionQuotas
    from kcompat.config.broker import BrokerConfig
    from kcompat.kraft.image import MetadataImage
    from kcompat.security.sasl_server import SaslListeners

    listener = "CONTROLLER" if controller else "PLAINTEXT"
    # a real config (its defaults: no connection limit, no quota) and the real quota objects the
    # connection consults; of the handlers' services, only what the stub handlers and the request
    # quota see
    config = BrokerConfig({"queued.max.requests": "500", "process.roles": "broker,controller", "node.id": "1",
                           "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                           "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093"})
    quotas = QuotaManagers(config.get)
    services = ConnectionServices(
        api_services=SimpleNamespace(config=config, quotas=quotas, authorizer=None, now_ms=lambda: NOW_MS, share=None),
        config=config, request_stats=RequestStats(),
        connection_quotas=ConnectionQuotas(config.get, config.controller_listener_names, None),
        connections=set(), sasl=SaslListeners(config, MetadataImage()))
    stubs = {k: SimpleNamespace(API_KEY=k, MIN_VERSION=m.MIN_VERSION, MAX_VERSION=m.MAX_VERSION,
                                error_response=getattr(m, "error_response", None),
                                handle=lambda ctx, req: NO_RESPONSE)
             for k, m in apis.handlers_for(controller).items()}
    close_log = _CloseLog()
    logger = logging.getLogger("kcompat.broker.connection")
    logger.addHandler(close_log)
    propagate, logger.propagate = logger.propagate, False  # millions of close lines
    level = logger.level
    logger.setLevel(logging.WARNING)  # the close lines are what the target checks, whatever else configured
    loop = asyncio.new_event_loop()

    def cleanup() -> None:
        if cleanup in _CLEANUPS:
            _CLEANUPS.remove(cleanup)
            logger.removeHandler(close_log)
            logger.propagate = propagate
            logger.setLevel(level)
            loop.close()
    _CLEANUPS.append(cleanup)

    async def one(data: bytes) -> str:
        close_log.records.clear()
        c = conn_mod.KafkaConnection(services, listener)
        c.handlers = stubs
        t = _Transport()
        c.connection_made(t)
        undelivered = data
        while True:
            undelivered = _feed(c, t, undelivered)
            await asyncio.sleep(0)  # frames left at the in-flight limit are processed by call_soon
            await asyncio.sleep(0)
            if not undelivered or t.closed or not t.reading:
                break
        if t.closed:
            reasons = [r for r in close_log.records if "closing connection" in r]
            if not reasons:
                raise FrameProblem(f"closed without a log line: {close_log.records}")
            outcome = "closed:" + reasons[0].split(": ", 1)[-1][:50]
        else:
            rest = c._frames.unframed()
            if len(rest) >= 4 and len(rest) - 4 >= struct.unpack_from(">i", rest, 0)[0] >= 0:
                raise FrameProblem(f"a complete frame of {len(rest)} bytes was left unanswered")
            outcome = f"open:{bool(t.written)}"
        c.connection_lost(None)
        return outcome

    def run(data: bytes) -> str:
        return loop.run_until_complete(one(data))

    def seeds(rng: random.Random) -> list[bytes]:
        out = []
        for key, m in sorted(apis.handlers_for(controller).items()):
            req, _ = api_classes(key)
            v = rng.randint(m.MIN_VERSION, m.MAX_VERSION)
            flexible = req.FLEXIBLE_MIN is not None and v >= req.FLEXIBLE_MIN
            body = encode(RequestHeader(request_api_key=key, request_api_version=v, correlation_id=rng.randrange(99),
                                        client_id="fuzz"), 2 if flexible else 1) + encode(sample(req, req, v, rng), v)
            out.append(struct.pack(">i", len(body)) + body)
        return [b"".join(rng.sample(out, 3)) for _ in range(len(out) // 3)] + out

    def scaled(k: int) -> bytes:
        one_frame = seeds(random.Random(1))[-1]
        return one_frame * k

    return Target(name=f"frame:{listener.lower()}", group="frame", run=run, seeds=seeds, scaled=scaled,
                  close=cleanup)


# -- record batches and compression --------------------------------------------------------------------

def _batch_run(data: bytes) -> None:
    mv = memoryview(data)
    for pos, h in rb.iter_batches(mv):
        one = mv[pos:pos + h.size]
        rb.crc_valid(mv, pos, h)
        for _ in rb.iter_records(one, max_size=None):
            pass
        for _ in rb.scan_records(one):
            pass


def batch_target() -> Target:
    def seeds(rng):
        out = [valid_batch(rng, codec=c) for c in (0, 0, 1, 2, 3, 4)]
        out.append(valid_batch(rng, codec=0) + valid_batch(rng, codec=1))
        out.append(rb.build_control_batch(rb.CONTROL_COMMIT, 5, 0, 1, NOW_MS))
        return out
    return Target(name="batch", group="batch", run=_batch_run, allowed=(rb.CorruptRecordError,), seeds=seeds,
                  scaled=lambda k: valid_batch(random.Random(k), n=k, codec=0), scale=BIG)


def compression_targets() -> list[Target]:
    out = []
    for codec in (1, 2, 3, 4):
        def run(data, codec=codec):
            for _ in compression.decompress_chunks(codec, data, compression.decompressed_limit(len(data))):
                pass

        def seeds(rng, codec=codec):
            datas = [b"", rng.randbytes(100), bytes(5000), b"abc" * 3000, rng.randbytes(20000)]
            res = [compression.compress(codec, d) for d in datas]
            if codec == compression.SNAPPY:
                res += [compression.xerial_compress(d, 4096) for d in datas]
            return res
        out.append(Target(name=f"compression:{compression.NAMES[codec]}", group="compression", run=run,
                          allowed=(compression.CompressionError,), seeds=seeds,
                          scaled=lambda k, codec=codec: compression.compress(
                              codec, random.Random(k).randbytes(64 * k)), scale=BIG))
    return out


# -- the produce path and the follower path on a real log -------------------------------------------------

class _Partitions:
    """A Partition per policy on a Log in a temporary directory, replaced every ``RECYCLE``
    appends so the directory stays small."""

    RECYCLE = 2000

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kcompat-fuzz-"))
        self.count = 0
        self.current: dict[str, object] = {}
        self.generation = 0

    def get(self, name: str, policy):
        from kcompat.isr.partition import Partition
        from kcompat.log import Log, LogConfig
        self.count += 1
        p = self.current.get(name)
        if p is None or self.count % self.RECYCLE == 0:
            if p is not None:
                del self.current[name]
                self._close(p)
            self.generation += 1
            d = self.root / f"{name}-{self.generation}"
            log = Log.open(d, LogConfig(), recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=NOW_MS)
            p = Partition("fuzz", 0, uuid.UUID(int=7), log, policy=policy)
            self.current[name] = p
        return p

    def drop(self, name: str) -> None:
        """Start ``name`` on a new, empty log at the next ``get``."""
        p = self.current.pop(name, None)
        if p is not None:
            self._close(p)

    @staticmethod
    def _close(p) -> None:
        try:
            p.log.close()
        finally:
            shutil.rmtree(p.log.directory, ignore_errors=True)

    def close(self) -> None:
        for p in self.current.values():
            try:
                p.log.close()
            except Exception:  # noqa: BLE001 - best effort at exit
                pass
        shutil.rmtree(self.root, ignore_errors=True)


_PARTITIONS: _Partitions | None = None


def partitions() -> _Partitions:
    global _PARTITIONS
    if _PARTITIONS is None:
        _PARTITIONS = _Partitions()
    return _PARTITIONS


def _kafka_code(e: BaseException) -> bool:
    return isinstance(getattr(e, "code", None), ErrorCode)


def append_targets() -> list[Target]:
    from kcompat.isr.partition import AppendPolicy
    policies = {
        "plain": AppendPolicy(),
        "compact": AppendPolicy(compact=True),
        "logappendtime": AppendPolicy(log_append_time=True),
        "bounded": AppendPolicy(compact=True, timestamp_before_max_ms=3600_000, timestamp_after_max_ms=3600_000),
    }
    out = []
    for name, policy in policies.items():
        def run(data, name=name, policy=policy):
            partitions().get(name, policy).append(memoryview(bytearray(data)), NOW_MS)

        def seeds(rng):
            return ([valid_batch(rng, codec=c) for c in (0, 1, 2, 3, 4)]
                    + [valid_batch(rng, keys=False, codec=c) for c in (0, 4)]
                    + [valid_batch(rng, producer_id=9, producer_epoch=0, base_sequence=0)]
                    + [valid_batch(rng, ts=NOW_MS - 10**8)])
        out.append(Target(name=f"append:{name}", group="append", run=run, allowed=(KafkaError,),
                          accept=_kafka_code, seeds=seeds, reset=lambda name=name: partitions().drop(name),
                          scaled=lambda k: valid_batch(random.Random(k), n=k, codec=0), scale=BIG))

    def follower_run(data):
        p = partitions().get("follower", AppendPolicy())
        buf = bytearray(data)
        if len(buf) >= 8 and buf[-1] & 1 and p.log_end_offset < 2**63:  # most inputs start at the log end
            struct.pack_into(">q", buf, 0, p.log_end_offset)
        p.append_as_follower(memoryview(buf), NOW_MS)

    def follower_ok(e):
        return _kafka_code(e) or type(e) is ValueError

    def follower_seeds(rng):
        a = valid_batch(rng, codec=0, base_offset=0, partition_leader_epoch=3)
        b = rb.build_control_batch(rb.CONTROL_ABORT, 9, 0, 1, NOW_MS, base_offset=5)
        c = valid_batch(rng, codec=3, base_offset=6, producer_id=9, producer_epoch=0, base_sequence=0,
                        transactional=True)
        return [a + b"\x01", a + b + c + b"\x01", c + b + b"\x00"]

    out.append(Target(name="follower", group="follower", run=follower_run, allowed=(KafkaError, ValueError),
                      accept=follower_ok, seeds=follower_seeds, reset=lambda: partitions().drop("follower"),
                      scaled=lambda k: valid_batch(random.Random(k), n=k, codec=0) + b"\x01", scale=BIG))
    return out


def all_targets() -> list[Target]:
    """Every target, in a stable order."""
    return (request_targets() + header_targets() + [frame_target(False), frame_target(True)] + [batch_target()]
            + compression_targets() + append_targets())


def close_all() -> None:
    """Undo what building the targets did (loggers, event loops, temporary logs)."""
    global _PARTITIONS
    while _CLEANUPS:
        _CLEANUPS[-1]()
    if _PARTITIONS is not None:
        _PARTITIONS.close()
        _PARTITIONS = None
