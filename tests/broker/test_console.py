"""The web console (``GET /``) and its JSON API (``/api/v1/...``, :mod:`kcompat.broker.http.api`)
against a real broker process: the endpoints' shapes and values against what real clients did
(confluent-kafka's AdminClient, producers, a classic group with committed offsets, a KIP-848
consumer group, transactions); the page in a real headless Chromium (Debian's, installed by
``tools/install_chromium.sh``, driven by Selenium) showing a topic and a group's lag rising while a
producer runs and falling to 0 once a consumer catches up, with no JavaScript error; handler errors
answered as JSON 500s; and the page's files shipped in the wheel."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import types
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path

import confluent_kafka as ck
import pytest
from aiohttp import test_utils, web
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.broker.http import console
from kcompat.broker.http.services import HttpServices
from kcompat.broker.request_stats import RequestStats
from kcompat.testing.ports import free_ports
from tests.support.broker_process import ROOT, BrokerProcess, wait_for

log = logging.getLogger(__name__)

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def get(url: str) -> tuple[int, dict]:
    """(status, JSON body) of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.headers["Content-Type"].startswith("application/json")
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        assert e.headers["Content-Type"].startswith("application/json")
        return e.code, json.loads(e.read())


def ok(url: str) -> dict:
    status, body = get(url)
    assert status == 200, body
    return body


@pytest.fixture
def broker(tmp_path):
    (http_port,) = free_ports(1)
    with BrokerProcess(tmp_path / "data", {"http.listeners": f"HTTP://127.0.0.1:{http_port}"}) as b:
        yield b, f"http://127.0.0.1:{http_port}"


def _produce(bootstrap: str, topic: str, counts: dict[int, int], size: int = 100) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, n in counts.items():
        for i in range(n):
            p.produce(topic, b"v" * size, key=b"k%d" % i, partition=partition)
    assert p.flush(30) == 0


def test_json_endpoints_show_what_clients_did(broker, tmp_path):
    b, base = broker
    api = base + "/api/v1"
    suffix = uuid.uuid4().hex[:6]
    orders, payments, group, live_group = f"orders-{suffix}", f"payments-{suffix}", f"g-{suffix}", f"live-{suffix}"
    strict = f"strict-{suffix}"    # min.insync.replicas 2 with one replica: under min ISR from the start
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(orders, 3, 1), NewTopic(payments, 2, 1),
                                  NewTopic(strict, 1, 1, config={"min.insync.replicas": "2"})]).values():
        f.result(15)
    _produce(b.bootstrap, orders, {0: 100, 1: 100, 2: 100})
    _produce(b.bootstrap, payments, {0: 25, 1: 25}, size=50)
    # a classic group that committed 40, 100 and 0 on the three partitions: lag 60 + 0 + 100
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[ck.TopicPartition(orders, 0, 40), ck.TopicPartition(orders, 1, 100),
                      ck.TopicPartition(orders, 2, 0)], asynchronous=False)
    c.close()
    # transactions: one committed, one left open
    done = ck.Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"tx-done-{suffix}"})
    done.init_transactions(15)
    done.begin_transaction()
    done.produce(payments, b"paid", partition=1)
    done.commit_transaction(15)
    open_ = ck.Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"tx-open-{suffix}"})
    open_.init_transactions(15)
    open_.begin_transaction()
    open_.produce(payments, b"pending", partition=0)
    assert open_.flush(15) == 0
    # a KIP-848 consumer group with one live member reading payments
    live = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": live_group, "group.protocol": "consumer",
                        "client.id": "console-test", "auto.offset.reset": "earliest"})
    live.subscribe([payments])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            live.poll(0.2)
            status, g = get(f"{api}/groups/{live_group}")
            if status == 200 and g["state"] == "Stable" and g["members"] and g["members"][0]["assignment"]:
                break
        else:
            pytest.fail(f"the consumer group {live_group} did not become Stable with an assignment: {g}")
        assert g["protocol"] == "consumer" and g["protocol_type"] == "consumer"
        assert g["assignor"] in ("uniform", "range")
        [member] = g["members"]
        assert member["client_id"] == "console-test" and member["member_epoch"] >= 1
        assert member["assignment"] == {payments: [0, 1]}

        cluster = ok(f"{api}/cluster")
        assert cluster["cluster_id"] == admin.describe_cluster().result(10).cluster_id
        assert cluster["node_id"] == cluster["controller_id"] == 1 and cluster["this_node_is_controller"] is True
        assert cluster["quorum"]["voters"] == [1] and cluster["quorum"]["leader_id"] == 1
        assert cluster["brokers"] == {"total": 1, "online": 1, "fenced": 0}
        assert cluster["health"] == {"status": "critical", "active_controller": True, "offline": 0, "under_replicated": 0, "under_min_isr": 1,
                                     "fenced_brokers": 0, "problems": [
                                         {"topic": strict, "partition": 0, "leader": 1, "replicas": [1], "isr": [1],
                                          "offline": False, "under_replicated": False, "under_min_isr": True}]}
        assert cluster["topics"] == 5                     # with __consumer_offsets and __transaction_state
        assert cluster["groups"] >= 2 and cluster["transactions"] == 2
        assert cluster["metadata_offset"] > 0 and abs(cluster["now_ms"] - time.time() * 1000) < 60_000

        [br] = ok(f"{api}/brokers")["brokers"]
        assert br["id"] == 1 and br["status"] == "online" and br["controller"] and br["this_node"]
        assert {"listener": "PLAINTEXT", "host": "127.0.0.1", "port": b.port} in br["endpoints"]
        assert br["leaders"] == br["replicas"] >= 5
        [d] = br["log_dirs"]
        assert Path(d["path"]) == Path(tmp_path / "data") and d["size_bytes"] > 300 * 100
        assert d["disk_total_bytes"] >= d["disk_free_bytes"] > 0

        topics = {t["name"]: t for t in ok(f"{api}/topics")["topics"]}
        t = topics[orders]
        assert (t["partition_count"], t["replication_factor"], t["internal"], t["local_partitions"]) == (3, 1, False, 3)
        assert t["size_bytes"] > 300 * 100 and (t["offline"], t["under_replicated"], t["under_min_isr"]) == (0, 0, 0)
        assert topics["__consumer_offsets"]["internal"] is True
        assert (topics[strict]["under_min_isr"], topics[payments]["under_min_isr"]) == (1, 0)
        strict_detail = ok(f"{api}/topics/{strict}")
        assert strict_detail["min_insync_replicas"] == 2 and strict_detail["configs"] == {"min.insync.replicas": "2"}
        assert strict_detail["partitions"][0]["under_min_isr"] is True

        detail = ok(f"{api}/topics/{orders}")
        assert detail["min_insync_replicas"] == 1 and detail["configs"] == {}
        assert [p["partition"] for p in detail["partitions"]] == [0, 1, 2]
        for p in detail["partitions"]:
            assert (p["leader"], p["replicas"], p["isr"]) == (1, [1], [1])
            local = p["local"]
            assert local["role"] == "leader" and local["log_start_offset"] == 0
            assert local["log_end_offset"] == local["high_watermark"] == local["last_stable_offset"] == 100
            assert local["size_bytes"] > 100 * 100 and local["segments"] == 1
        assert get(f"{api}/topics/no-such-topic") == (404, {"error": "no topic 'no-such-topic'"})

        groups = {g["group_id"]: g for g in ok(f"{api}/groups")["groups"]}
        g = groups[group]
        assert (g["protocol"], g["state"], g["members"], g["topics"], g["partitions"], g["lag"]) == \
            ("classic", "Empty", 0, [orders], 3, 160)
        assert groups[live_group]["protocol"] == "consumer" and groups[live_group]["members"] == 1
        g = ok(f"{api}/groups/{group}")
        assert g["lag"] == 160 and g["members"] == [] and g["generation"] == 0
        assert [(o["partition"], o["committed"], o["high_watermark"], o["lag"]) for o in g["offsets"]] == \
            [(0, 40, 100, 60), (1, 100, 100, 0), (2, 0, 100, 100)]
        assert all(o["commit_timestamp"] > 0 and o["topic"] == orders for o in g["offsets"])
        assert len(g["history"]["t"]) == len(g["history"]["lag"])
        assert get(f"{api}/groups/nobody")[0] == 404

        tx = ok(f"{api}/transactions")
        states = {x["transactional_id"]: x for x in tx["transactions"]}
        assert states[f"tx-done-{suffix}"]["state"] == "CompleteCommit"
        pending = states[f"tx-open-{suffix}"]
        assert pending["state"] == "Ongoing" and pending["partitions"] == [{"topic": payments, "partition": 0}]
        assert pending["txn_start_ms"] > 0 and pending["timeout_ms"] > 0
        assert tx["states"] == {"CompleteCommit": 1, "Ongoing": 1}
        open_pid = pending["producer_id"]
        assert [p["current_txn_start_offset"] for p in tx["producers"]
                if p["producer_id"] == open_pid and (p["topic"], p["partition"]) == (payments, 0)] == [25]

        # the sampler runs every 2 s: the produce shows up as a rate in its history
        wait_for(lambda: sum(ok(f"{api}/rates")["bytes_in"]) > 0, 15, what="bytes in among the sampled rates")
        rates = ok(f"{api}/rates?topic={orders}")
        assert rates["interval_s"] == 2 and rates["window_s"] == 600 and rates["topic"] == orders
        assert len(rates["t"]) == len(rates["bytes_in"]) == len(rates["messages_in"]) >= 1
        assert max(rates["messages_in"]) > 0 and set(rates["current"]) >= {"bytes_in", "bytes_out", "messages_in"}
        assert get(f"{api}/rates?topic=nope")[0] == 404
        assert get(f"{api}/rates?window=soon")[0] == 400
        assert "/api/v1/groups/{id}" in ok(api)["endpoints"]
    finally:
        live.close()
        open_.abort_transaction(15)


def test_page_and_assets_are_served(broker):
    _b, base = broker
    with urllib.request.urlopen(base + "/", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/html")
        page = r.read().decode()
    assert '<script src="/static/console.js">' in page and 'href="/static/console.css"' in page
    for f in console.STATIC_DIR.iterdir():    # nothing is loaded from elsewhere (no CDN)
        assert not re.search(r"""(src|href)=["']?(https?:)?//|url\(["']?(https?:)?//|@import|fetch\(["']https?:""",
                             f.read_text()), f.name
    for name, ctype in (("console.js", "text/javascript"), ("console.css", "text/css"),
                        ("favicon.svg", "image/svg+xml")):
        with urllib.request.urlopen(f"{base}/static/{name}", timeout=10) as r:
            assert r.headers["Content-Type"].startswith(ctype)
    with urllib.request.urlopen(base + "/favicon.ico", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("image/svg+xml")
    for path in ("/static/nope.js", "/static/..%2Fconsole.py", "/static/.hidden.js"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + path, timeout=10)
        assert e.value.code == 404


def test_a_failing_handler_answers_500_json_and_the_sampler_survives(caplog):
    """In-process: the services of a node without state (no image, coordinators without their
    state) make every API handler and every sample fail; the handlers answer 500 with a JSON
    error, the listener's sampler logs and goes on."""
    async def run():
        app = web.Application()

        def nothing(*_args):
            return None
        stub = HttpServices(
            node_id=1, cluster_id="", config=None, image=None, controller_active=lambda: False, quorum=None,
            replica_manager=None, log_manager=None, groups=types.SimpleNamespace(), txn=types.SimpleNamespace(),
            remote_log=None, request_stats=RequestStats(), connection_count=lambda: 0, topic_values=nothing,
            leader_of=nothing, live_broker_ids=list, create_topics=nothing, auto_create_topics=nothing,
            wait_for_topics=nothing)
        console.routes(app, stub)
        history = app[console.HISTORY]
        history.interval_s = 0.05
        async with test_utils.TestClient(test_utils.TestServer(app)) as client:
            for path in ("/api/v1/cluster", "/api/v1/brokers", "/api/v1/topics", "/api/v1/topics/x", "/api/v1/groups",
                         "/api/v1/groups/x", "/api/v1/transactions"):
                r = await client.get(path)
                assert r.status == 500, path
                body = await r.json()
                assert body["path"] == path and "AttributeError" in body["error"]
            await asyncio.sleep(0.2)
            assert history._task is not None and not history._task.done()
            assert (await client.get("/")).status == 200
        assert history._task is None          # stopped with the application
    with caplog.at_level(logging.ERROR, logger="kcompat.http"):
        asyncio.run(run())
    assert any("GET /api/v1/cluster failed" in r.getMessage() for r in caplog.records)


def test_the_wheel_ships_the_console_files(tmp_path):
    """``pip install .`` (the container image's install) must bring the page: the files of
    ``static/`` are package data of ``kcompat.broker.http`` (pyproject.toml)."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(ROOT / "kcompat", src / "kcompat", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                    "-w", str(tmp_path / "out"), str(src)], check=True, timeout=240)
    [wheel] = (tmp_path / "out").glob("kcompat-*.whl")
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("kcompat/broker/http/static/")}
    expected = {f"kcompat/broker/http/static/{p.name}" for p in console.STATIC_DIR.iterdir() if p.is_file()}
    assert {"kcompat/broker/http/static/index.html", "kcompat/broker/http/static/console.js"} <= expected
    assert shipped == expected


# -- the page in a real browser ---------------------------------------------------------------------

def _chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run `sh tools/install_chromium.sh` "
                    "(as the README's test command does)")
    os.environ.setdefault("SE_OFFLINE", "true")     # Selenium Manager must not look for a browser to download
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1440,1000", "--force-prefers-reduced-motion", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


_LAG_JS = """
const row = [...document.querySelectorAll('#groups-table tr[data-group]')].find(r => r.dataset.group === arguments[0]);
const cell = row && row.querySelector('td[data-field="lag"]');
return cell ? cell.dataset.value : null;
"""
_TOPIC_JS = """
const row = [...document.querySelectorAll('#topics-table tr[data-topic]')].find(r => r.dataset.topic === arguments[0]);
return row ? row.querySelector('td[data-field="partitions"]').dataset.value : null;
"""


def _until(driver, fn, timeout: float, what: str):
    """Poll ``fn(driver)`` every 0.1 s until it returns something truthy (returned)."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn(driver)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _screenshot(driver, path: Path) -> None:
    """A PNG of the whole page at ``path``: the viewport is set to the page's height first."""
    height = driver.execute_script(
        "const v = document.getElementById('view').getBoundingClientRect();"
        "return Math.ceil(v.bottom + window.scrollY + document.querySelector('.footer').offsetHeight + 8)")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 1440, "height": max(800, min(height, 4000)),
                                                                   "deviceScaleFactor": 1, "mobile": False})
    time.sleep(0.5)     # the charts redraw on resize
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    log.warning("console screenshot: %s", path)
    print(f"console screenshot: {path}")


@pytest.mark.timeout(300)
def test_console_in_headless_chromium_shows_topics_and_lag_rising_then_falling(broker):
    b, base = broker
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"clicks-{suffix}", f"dashboard-{suffix}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    # the group starts at offset 0 of both partitions, with nothing to read: lag 0
    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[ck.TopicPartition(topic, 0, 0), ck.TopicPartition(topic, 1, 0)], asynchronous=False)

    driver = _chromium()
    try:
        driver.get(base + "/?refresh=500#topics")
        assert _until(driver, lambda d: d.execute_script(_TOPIC_JS, topic), 15, f"topic {topic} on the page") == "2"
        driver.execute_script("window.location.hash = '#groups'")
        _until(driver, lambda d: d.execute_script(_LAG_JS, group) == "0", 15, f"group {group} with lag 0")

        # a producer writes 50 records every 0.2 s for about 4 s: the lag the page shows climbs
        total = 1000
        producer_error: list[BaseException] = []

        def produce():
            try:
                p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2})
                for i in range(total):
                    p.produce(topic, b"click-%d" % i, partition=i % 2)
                    if i % 50 == 49:
                        p.flush(10)
                        time.sleep(0.2)
                assert p.flush(30) == 0
            except BaseException as e:   # re-raised by the test thread
                producer_error.append(e)

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        seen: list[int] = []

        def rising(d):
            v = d.execute_script(_LAG_JS, group)
            if v and (not seen or int(v) != seen[-1]):
                seen.append(int(v))
            ups = [x for x in seen if x > 0]
            return len(ups) >= 2 and ups[-1] > ups[0]      # up, from a value short of the total
        _until(driver, rising, 20, "the lag to rise while the producer runs")
        writer.join(30)
        assert not writer.is_alive() and not producer_error, producer_error
        _until(driver, lambda d: d.execute_script(_LAG_JS, group) == str(total), 10, f"lag {total} once all is written")
        assert seen == sorted(seen), f"lag went down while only the producer ran: {seen}"

        # the consumer reads everything from the committed offsets and commits: the lag falls to 0
        consumer.assign([ck.TopicPartition(topic, 0, 0), ck.TopicPartition(topic, 1, 0)])
        read, deadline = 0, time.monotonic() + 30
        while read < total and time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None:
                    read += 1
        assert read == total
        consumer.commit(asynchronous=False)
        _until(driver, lambda d: d.execute_script(_LAG_JS, group) == "0", 15, "the lag back at 0")
        refreshes = int(driver.find_element("id", "last-refresh").get_attribute("data-count"))
        assert refreshes >= 5            # one page load: what changed came with the page's own refresh

        # the group's own page: its lag over time (up, then down) and partitions
        driver.execute_script("window.location.hash = arguments[0]", "#group/" + group)
        _until(driver, lambda d: d.execute_script(
            "const e = document.getElementById('gd-lag'); return e && e.dataset.value === '0'"), 10, "the group page")
        time.sleep(2.2)      # one more sample of the sampler (every 2 s) in the chart
        _screenshot(driver, ARTIFACTS / "console-group.png")
        driver.execute_script("window.location.hash = '#overview'")
        _until(driver, lambda d: d.execute_script(
            "return document.querySelectorAll('#ov-stats .stat').length > 0 && "
            "document.querySelectorAll('#ov-bytes svg path').length > 0"), 10, "the overview with its charts")
        _screenshot(driver, ARTIFACTS / "console.png")

        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == [], f"JavaScript console errors: {errors}"
    finally:
        driver.quit()
        consumer.close()
