"""kcompat/container.py without Docker: KAFKA_* variables to properties as the apache/kafka image maps
them, the default single node, errors naming the variable, and ``kcompat container`` /
``kcompat healthcheck`` as processes (the image's entry point and health check)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kcompat.container import (DATA_DIR, DEFAULTS, HTTP_LISTENERS, ContainerConfigError, load_config, node_properties,
                               property_name)
from kcompat.testing.ports import free_ports
from tests.support.broker_process import ROOT


@pytest.mark.parametrize("variable,name", [
    ("KAFKA_NODE_ID", "node.id"),
    ("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"),
    ("KAFKA_LISTENER_NAME_PLAINTEXT___HOST_MAX_CONNECTIONS", "listener.name.plaintext_host.max.connections"),
    ("KAFKA_CONFIG_PROVIDERS_MY__PROVIDER_CLASS", "config.providers.my-provider.class"),
    ("KAFKA_log_retention_ms", "log.retention.ms"),
])
def test_variable_names_map_to_properties_as_in_the_apache_kafka_image(variable, name):
    assert property_name(variable) == name


@pytest.mark.parametrize("variable", ["KAFKA_", "KAFKA__NODE_ID", "KAFKA_NODE_ID_", "KAFKA_NODE____ID",
                                      "KAFKA_NODE-ID"])
def test_a_variable_that_maps_to_no_property_is_refused_by_name(variable):
    with pytest.raises(ContainerConfigError, match=variable):
        property_name(variable)


def test_no_environment_is_the_apache_kafka_default_single_node():
    props, _, cluster_id = node_properties({"PATH": "/bin", "KAFKA_HEAP_OPTS": "-Xmx1g"})
    assert props == {**DEFAULTS, "log.dirs": DATA_DIR, "http.listeners": HTTP_LISTENERS} and cluster_id is None
    config, _ = load_config({})
    assert [(n, p) for n, _h, p in config.listeners] == [("PLAINTEXT", 9092), ("CONTROLLER", 9093)]


def test_environment_is_the_configuration_with_listeners_from_advertised_ones():
    env = {"KAFKA_NODE_ID": "2", "KAFKA_PROCESS_ROLES": "broker,controller", "CLUSTER_ID": "abc",
           "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka-2:19092,HOST://localhost:39092",
           "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT",
           "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs", "KAFKA_JMX_OPTS": "-Dx"}
    props, source, cluster_id = node_properties(env)
    assert cluster_id == "abc"
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:19092,HOST://0.0.0.0:39092"
    assert props["log.dirs"] == "/tmp/kraft-combined-logs" and "advertised.listeners" in props
    assert source["node.id"] == "KAFKA_NODE_ID" and "jmx.opts" not in props


def test_process_roles_need_a_cluster_id_as_in_the_apache_kafka_image():
    with pytest.raises(ContainerConfigError, match="CLUSTER_ID"):
        node_properties({"KAFKA_PROCESS_ROLES": "broker,controller"})


@pytest.mark.parametrize("env,variable", [
    ({"KAFKA_NUM_PARTITIONS": "many"}, "KAFKA_NUM_PARTITIONS"),
    ({"KAFKA_NO_SUCH_SETTING": "1"}, "KAFKA_NO_SUCH_SETTING"),
    ({"KAFKA_NODE_ID": "1", "KAFKA_node_id": "2"}, "KAFKA_node_id"),
])
def test_bad_values_and_unknown_settings_name_the_variable(env, variable):
    with pytest.raises(ContainerConfigError, match=variable):
        load_config(env)


def _cli(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_") and k != "CLUSTER_ID"}
    base["PYTHONPATH"] = str(ROOT)
    base["KAFKA_HTTP_LISTENERS"] = ""   # the image's HTTP port 8090 would clash with other tests' nodes
    return subprocess.Popen([sys.executable, "-m", "kcompat", *args], env={**base, **env}, cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_container_entry_point_serves_and_healthcheck_proves_it(tmp_path):
    port, cport = free_ports(2)
    env = {"KAFKA_NODE_ID": "1", "KAFKA_PROCESS_ROLES": "broker,controller", "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg",
           "KAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
           "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
           "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@127.0.0.1:{cport}", "KAFKA_LOG_DIRS": str(tmp_path / "data")}
    health = _cli(["healthcheck"], env)
    out, err = health.communicate(timeout=30)
    assert health.returncode == 1 and "unhealthy" in err      # nothing serves yet
    node = _cli(["container"], env)
    try:
        deadline = time.monotonic() + 60
        while True:
            health = _cli(["healthcheck"], env)
            out, err = health.communicate(timeout=30)
            if health.returncode == 0:
                break
            assert time.monotonic() < deadline, err
            time.sleep(0.1)
        assert f"127.0.0.1:{port} answers ApiVersions" in out
        meta = (tmp_path / "data" / "meta.properties").read_text()
        assert "cluster.id=MkU3OEVBNTcwNTJENDM2Qg" in meta
    finally:
        node.terminate()
        _, log = node.communicate(timeout=30)
    assert node.returncode == 0 and "shutdown complete" in log


def test_container_entry_point_refuses_a_bad_variable_before_touching_the_data(tmp_path):
    node = _cli(["container"], {"KAFKA_LOG_DIRS": str(tmp_path / "data"), "KAFKA_NUM_PARTITIONS": "-3"})
    _, err = node.communicate(timeout=60)
    assert node.returncode == 2
    assert "KAFKA_NUM_PARTITIONS" in err
    assert not (tmp_path / "data").exists()
