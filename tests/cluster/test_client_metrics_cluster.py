"""Client metrics subscriptions (KIP-714) in a 3-node cluster: IncrementalAlterConfigs sent to any
node reaches the active controller, the ConfigRecords replicate through the metadata log, and every
node lists (ListConfigResources, KIP-1142) and describes the subscription; v1 lists each registered
broker once as a broker logger and once as a broker, as Kafka 4.3.1's KafkaApis does."""

from __future__ import annotations

from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DQ
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IQ
from kcompat.protocol.messages.list_config_resources import ListConfigResourcesRequest as LQ
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until

CLIENT_METRICS, BROKER, BROKER_LOGGER = 16, 4, 8


def listed(addr: str, version: int, types: list[int]) -> list[tuple[int, str]]:
    resp = wire.call(addr, LQ(resource_types=types), version)
    assert resp.error_code == 0, resp
    return [(r.resource_type, r.resource_name) for r in resp.config_resources]


def test_a_subscription_set_through_one_node_is_listed_and_described_by_every_node(tmp_path):
    cluster = Cluster(tmp_path, 3)
    try:
        cluster.start()
        addrs = [f"127.0.0.1:{p}" for p in cluster.client_ports]
        alter = IQ(resources=[IQ.AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name="fleet", configs=[
            IQ.AlterableConfig(name="metrics", config_operation=0, value="org.apache.kafka.producer."),
            IQ.AlterableConfig(name="interval.ms", config_operation=0, value="5000")])])
        (res,) = wire.call(addrs[2], alter, 1).responses
        assert (res.error_code, res.error_message) == (0, None)
        for addr in addrs:
            wait_until(lambda a=addr: listed(a, 0, []) == [(CLIENT_METRICS, "fleet")], 10, f"fleet listed by {addr}")
            (result,) = wire.call(addr, DQ(resources=[DQ.DescribeConfigsResource(
                resource_type=CLIENT_METRICS, resource_name="fleet", configuration_keys=["interval.ms", "metrics"])]),
                4).results
            assert [(c.name, c.value, c.config_source) for c in result.configs] == [
                ("interval.ms", "5000", 7), ("metrics", "org.apache.kafka.producer.", 7)]
            assert listed(addr, 1, [BROKER, BROKER_LOGGER]) == [
                *((BROKER_LOGGER, str(n)) for n in (1, 2, 3)), *((BROKER, str(n)) for n in (1, 2, 3))]
    finally:
        cluster.stop()
