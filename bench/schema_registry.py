"""The built-in schema registry: registrations per second and cached lookups per second.

    python3 bench/schema_registry.py [--registrations N] [--lookups N] [--concurrency C]

Starts one kcompat node (``python -m kcompat serve``, a temporary ``log.dirs``) with its HTTP
listener, then with aiohttp from this process (``--concurrency`` requests in flight, 8 by
default):

- registrations: ``--registrations`` (2000) distinct Avro records, each a new id, ``POST
  /subjects/{subject}/versions`` over 20 subjects (compatibility NONE, so the cost is parse +
  one ``acks=all`` append to ``_schemas`` + reading it back; each answer waits for the node to
  have read its record);
- cached lookups: ``--lookups`` (20000) ``GET /schemas/ids/{id}`` of registered ids (what a
  deserializer asks), then as many ``GET /subjects/{s}/versions/latest``, answered from the
  node's in-memory state.

It prints one line per phase (requests, seconds, requests/s) and a one-line JSON summary last; it
asserts nothing. Broker and client share the cores: run it on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from kcompat.testing.ports import free_ports  # noqa: E402
from kcompat.testing.process import BrokerProcess  # noqa: E402

V1 = "application/vnd.schemaregistry.v1+json"


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"R{i}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string"}]})


async def run_phase(n: int, concurrency: int, request) -> float:
    """Seconds to run ``request(i)`` for i in 0..n-1 with ``concurrency`` in flight."""
    queue = iter(range(n))

    async def worker():
        for i in queue:
            await request(i)
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def bench(url: str, registrations: int, lookups: int, concurrency: int) -> dict:
    async with aiohttp.ClientSession(headers={"Content-Type": V1}) as s:
        async with s.put(f"{url}/config", json={"compatibility": "NONE"}) as r:
            assert r.status == 200, await r.text()
        ids: list[int] = []

        async def register(i: int) -> None:
            async with s.post(f"{url}/subjects/bench-{i % 20}/versions", data=json.dumps({"schema": schema(i)})) as r:
                body = await r.json(content_type=None)
                assert r.status == 200, body
                ids.append(body["id"])
        reg_s = await run_phase(registrations, concurrency, register)

        async def by_id(i: int) -> None:
            async with s.get(f"{url}/schemas/ids/{ids[i % len(ids)]}") as r:
                assert r.status == 200
                await r.read()
        id_s = await run_phase(lookups, concurrency, by_id)

        async def latest(i: int) -> None:
            async with s.get(f"{url}/subjects/bench-{i % 20}/versions/latest") as r:
                assert r.status == 200
                await r.read()
        latest_s = await run_phase(lookups, concurrency, latest)
    assert len(set(ids)) == registrations
    return {"registrations": registrations, "registrations_per_s": round(registrations / reg_s, 1),
            "lookups_by_id_per_s": round(lookups / id_s, 1), "lookups_latest_per_s": round(lookups / latest_s, 1),
            "lookups": lookups, "concurrency": concurrency}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--registrations", type=int, default=2000)
    ap.add_argument("--lookups", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    (port,) = free_ports(1)
    with tempfile.TemporaryDirectory() as d:
        with BrokerProcess(Path(d) / "data", {"http.listeners": f"HTTP://127.0.0.1:{port}"}, cwd=ROOT):
            out = asyncio.run(bench(f"http://127.0.0.1:{port}", args.registrations, args.lookups, args.concurrency))
    print(f"registrations            {out['registrations']:>7}  {out['registrations_per_s']:>10.1f} /s")
    print(f"GET /schemas/ids/{{id}}    {out['lookups']:>7}  {out['lookups_by_id_per_s']:>10.1f} /s")
    print(f"GET .../versions/latest  {out['lookups']:>7}  {out['lookups_latest_per_s']:>10.1f} /s")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
