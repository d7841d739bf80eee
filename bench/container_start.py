"""The kcompat image: its size, and the time from ``docker run`` to the first produce acknowledged (issue 24).

    python3 bench/container_start.py [--runs 5]

Builds the image as the container tests do (tests/container/images.py: this checkout's Dockerfile on
the Debian minbase test image), then ``--runs`` times: ``docker run -d -p 127.0.0.1:<port>:<port>``
with the advertised listener on that port, and a confluent-kafka producer (acks=all) retrying until
its first record to a new topic is acknowledged; also when the health check first says healthy.
Prints medians (min-max) with the load and a JSON line. No target, exit 0.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kcompat.testing.ports import free_ports  # noqa: E402
from tests.container.images import BASE_IMAGE, build_image, docker, health  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from fixture_start import produce_one  # noqa: E402


def one_run(image: str) -> dict:
    (port,) = free_ports(1)
    name = f"kcompat-bench-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    docker("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:{port}",
           "-e", f"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:{port}", image)
    try:
        t_run = time.monotonic()
        produce_one(f"localhost:{port}")
        t_ack = time.monotonic()
        while health(name) != "healthy":
            time.sleep(0.05)
        t_healthy = time.monotonic()
        t1 = time.monotonic()
        docker("stop", name)
        t_stop = time.monotonic() - t1
    finally:
        docker("rm", "-f", "-v", name, check=False)   # -v: the image's anonymous data volume too
    return {"run_returned": t_run - t0, "acked": t_ack - t0, "healthy": t_healthy - t0, "stop": t_stop}


def main() -> int:
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    image = build_image()
    size = int(docker("image", "inspect", "--format", "{{.Size}}", image).stdout)
    base = int(docker("image", "inspect", "--format", "{{.Size}}", BASE_IMAGE).stdout)
    print(f"image {image}: {size / 1e6:.0f} MB ({(size - base) / 1e6:.0f} MB over the {base / 1e6:.0f} MB base)")
    one_run(image)                                       # warm-up: page cache, docker-proxy
    results = []
    for i in range(runs):
        load = os.getloadavg()[0]
        r = one_run(image)
        r["load"] = load
        results.append(r)
        print(f"run {i + 1}: docker run returned {r['run_returned']:.2f} s, first produce acknowledged "
              f"{r['acked']:.2f} s, healthy {r['healthy']:.2f} s, docker stop {r['stop']:.2f} s, load {load:.2f}")
    summary = {k: round(statistics.median(r[k] for r in results), 3) for k in ("run_returned", "acked", "healthy", "stop")}
    print("median:", ", ".join(f"{k} {v:.2f} s" for k, v in summary.items()))
    print(json.dumps({"bench": "container_start", "image_mb": round(size / 1e6), "over_base_mb":
                      round((size - base) / 1e6), "runs": runs, **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
