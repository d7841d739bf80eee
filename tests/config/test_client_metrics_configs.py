"""Client metrics subscription configs (KIP-714) as Kafka 4.3.1's ClientMetricsConfigs: validation
order, messages and error codes, the match pattern parsing (Java's ``split("=")``), DescribeConfigs
entries, and IncrementalAlterConfigs' refusal of APPEND/SUBTRACT on them."""

from __future__ import annotations

import pytest

from kcompat.config import ConfigError, apply_incremental
from kcompat.config.client_metrics import describe_client_metrics, parse_match, validate_client_metrics_configs


def refused(name: str, configs: dict) -> tuple[str, str]:
    with pytest.raises(ConfigError) as e:
        validate_client_metrics_configs(name, configs)
    return e.value.error, e.value.message


def test_valid_subscriptions():
    validate_client_metrics_configs("s", {})
    validate_client_metrics_configs("s", {"metrics": "", "match": ""})   # empty lists are allowed
    validate_client_metrics_configs("s", {"metrics": "*", "interval.ms": " 100 ", "match": "client_id = a.* , "
                                          "client_software_version=1\\.2\\..*"})
    validate_client_metrics_configs("s", {"interval.ms": "3600000"})
    validate_client_metrics_configs("s", {"metrics": "a, a", "match": "client_id=x,client_id=x"})   # deduplicated


@pytest.mark.parametrize("name, configs, error, message", [
    ("s", {"metrics": None}, "INVALID_CONFIG", "Null value not supported for client metrics configs: metrics"),
    ("", {"metrics": "a"}, "INVALID_REQUEST", "Subscription name can't be empty"),
    ("s", {"push.enabled": "true"}, "INVALID_REQUEST", "Unknown client metrics configuration: push.enabled"),
    ("s", {"interval.ms": "99"}, "INVALID_REQUEST",
     "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"interval.ms": "1e3"}, "INVALID_CONFIG", "Invalid value 1e3 for configuration interval.ms: Not a number "
                                                    "of type INT"),
    ("s", {"match": "client_id=a,,client_id=b"}, "INVALID_CONFIG", "Configuration 'match' values must not be empty."),
    # ConfigDef.parse checks metrics before interval.ms; the interval range before the match patterns
    ("s", {"interval.ms": "x", "metrics": "a,,a"}, "INVALID_CONFIG", "Configuration 'metrics' values must not be empty."),
    ("s", {"interval.ms": "5", "match": "bad"}, "INVALID_REQUEST",
     "Invalid value 5 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
])
def test_refused_as_kafka(name, configs, error, message):
    assert refused(name, configs) == (error, message)


@pytest.mark.parametrize("pattern", ["client_id", "client_id=", "=a", "client_id=a=b", "client_rack=a",
                                     "client_id=[", "CLIENT_ID=a"])
def test_illegal_match_patterns(pattern):
    assert refused("s", {"match": pattern}) == ("INVALID_CONFIG", f"Illegal client matching pattern: {pattern}")


def test_match_patterns_parse_to_selectors_and_regexes():
    parsed = parse_match(["client_id = app-.*", "client_source_port=9\\d+", "client_instance_id=x=="])
    assert {k: p.pattern for k, p in parsed.items()} == {"client_id": "app-.*", "client_source_port": "9\\d+",
                                                         "client_instance_id": "x"}   # Java drops trailing ""


def test_described_with_kafka_sources_types_and_values():
    entries = describe_client_metrics({"metrics": " a , b,a ", "interval.ms": "+1000"}, include_synonyms=True,
                                      include_documentation=False)
    assert [(e.name, e.value, e.source, e.config_type, e.synonyms, e.documentation) for e in entries] == [
        ("interval.ms", "1000", 7, 3, [("interval.ms", "1000", 7)], None),
        ("match", "", 5, 7, [], None),
        ("metrics", "a,b", 7, 7, [("metrics", "a,b", 7)], None)]
    assert [e.name for e in describe_client_metrics({}, keys=["match"])] == ["match"]
    assert [e.name for e in describe_client_metrics({}, keys=[])] == ["interval.ms", "match", "metrics"]


@pytest.mark.parametrize("op, word", [(2, "APPEND"), (3, "SUBTRACT")])
def test_list_operations_are_refused_as_kafka_4_3_1_controller_does(op, word):
    with pytest.raises(ConfigError) as e:
        apply_incremental({"metrics": "a"}, [("metrics", op, "b")], resource="client_metrics")
    assert (e.value.error, e.value.message) == ("INVALID_CONFIG", f"Can't {word} to key metrics because its type is "
                                                                  "not LIST.")
    assert apply_incremental({"metrics": "a"}, [("metrics", 1, None), ("interval.ms", 0, "500")],
                             resource="client_metrics") == {"interval.ms": "500"}
    with pytest.raises(ConfigError) as e:   # for every resource type, before anything else
        apply_incremental({}, [("metrics", 0, None), ("match", 1, None), ("x", 2, None)], resource="client_metrics")
    assert (e.value.error, e.value.message) == ("INVALID_REQUEST", "Null value not supported for : metrics, x")
