"""Broker and topic configuration: Kafka's names, defaults, precedence, sources and errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from odradek.server.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    AlterConfigOp,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    Endpoint,
    apply_incremental,
    describe_topic_config,
    effective_topic_config,
    parse_properties,
    to_log_config,
    validate_topic_overrides,
)

STATIC = ConfigSource.STATIC_BROKER_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG
DYNAMIC = ConfigSource.DYNAMIC_BROKER_CONFIG
CLUSTER_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG


def entry(entries, name):
    (found,) = [e for e in entries if e.name == name]
    return found


# -- server.properties ---------------------------------------------------------------------


def test_properties_accept_equals_colon_and_whitespace_separators():
    text = "a=1\nb: 2\nc 3\n  d  =  4\ne=\nf\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "", "f": ""}


def test_properties_skip_hash_and_bang_comments_and_blank_lines():
    text = "# listeners=nope\n! also a comment\n\n   \n   # indented comment\nx=1\n"
    assert parse_properties(text) == {"x": "1"}


def test_properties_backslash_continues_a_line_without_its_leading_whitespace():
    text = "listeners=PLAINTEXT://:9092,\\\n          INTERNAL://:9093\nnext=1\n"
    assert parse_properties(text) == {
        "listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
        "next": "1",
    }


def test_properties_even_number_of_backslashes_is_an_escaped_backslash_not_a_continuation():
    assert parse_properties("path=C:\\\\\nnext=1") == {"path": "C:\\", "next": "1"}


def test_properties_comment_line_ending_in_backslash_does_not_swallow_the_next_line():
    assert parse_properties("# comment \\\nkey=value\n") == {"key": "value"}


def test_properties_escapes_in_keys_and_values():
    text = "a\\=b\\:c\\ d=tab\\there\\u0041\\\\\\q\r\nsmile=\\ud83d\\ude00"
    assert parse_properties(text) == {"a=b:c d": "tab\there" + "A\\q", "smile": "\U0001f600"}


def test_properties_later_duplicate_key_wins():
    assert parse_properties("num.partitions=1\nnum.partitions=3\n") == {"num.partitions": "3"}


def test_properties_malformed_unicode_escape_is_a_config_error():
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties("x=\\u12G4")


def test_stock_kafka_server_properties_load(tmp_path: Path):
    path = tmp_path / "server.properties"
    path.write_text(
        "############################# Server Basics #############################\n"
        "broker.id=0\n"
        "#listeners=PLAINTEXT://:9092\n"
        "num.network.threads=3\n"
        "num.io.threads=8\n"
        "socket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\n"
        "socket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kafka-logs\n"
        "num.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "log.retention.hours=168\n"
        "log.retention.check.interval.ms=300000\n"
        "zookeeper.connect=localhost:2181\n"
        "zookeeper.connection.timeout.ms=18000\n"
        "group.initial.rebalance.delay.ms=0\n"
    )
    config = BrokerConfig.load(path)
    assert config.node_id == 0
    assert config.log_dirs == (Path("/tmp/kafka-logs"),)
    assert config.get("offsets.topic.replication.factor") == 1
    assert config.zookeeper_connect == "localhost:2181"
    assert config.get("group.initial.rebalance.delay.ms") == 0
    assert config.retention_ms == 168 * 3_600_000


# -- broker config -------------------------------------------------------------------------


def test_broker_defaults_are_kafkas():
    config = BrokerConfig()
    assert config.listeners == (Endpoint("PLAINTEXT", "", 9092),)
    assert config.advertised_listeners == config.listeners
    assert config.log_dirs == (Path("/tmp/kafka-logs"),)
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.auto_create_topics_enable is True
    assert config.get("delete.topic.enable") is True
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.get("fetch.max.bytes") == 57671680
    assert config.retention_ms == 7 * 24 * 3_600_000
    assert config.get("offsets.topic.num.partitions") == 50
    assert config.get("offsets.topic.replication.factor") == 3
    assert config.offsets_retention_ms == 10080 * 60_000
    assert config.get("group.initial.rebalance.delay.ms") == 3000
    assert config.zookeeper_connect is None
    assert config.zookeeper_connection_timeout_ms == 18000
    assert config.cluster_id is None


def test_set_overrides_beat_the_file(tmp_path: Path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nlog.dirs=/var/kafka\n")
    config = BrokerConfig.load(path, {"num.partitions": "6"})
    assert config.num_partitions == 6
    assert config.log_dirs == (Path("/var/kafka"),)


def test_log_dirs_overrides_log_dir_and_splits_on_commas():
    config = BrokerConfig({"log.dir": "/a", "log.dirs": "./data, ./more,"})
    assert config.log_dirs == (Path("data"), Path("more"))
    assert BrokerConfig({"log.dir": "/a"}).log_dirs == (Path("/a"),)


@pytest.mark.parametrize(
    ("props", "expected_ms"),
    [
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "42"}, 42),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.ms": "-5"}, -1),
    ],
)
def test_retention_ms_beats_minutes_beats_hours(props, expected_ms):
    config = BrokerConfig(props)
    assert config.retention_ms == expected_ms
    assert effective_topic_config({}, config)["retention.ms"] == expected_ms


def test_zero_retention_is_rejected_like_kafka():
    with pytest.raises(ConfigError, match="must be unlimited \\(-1\\) or, greater than"):
        BrokerConfig({"log.retention.ms": "0"})


def test_node_id_and_broker_id_are_synonyms():
    assert BrokerConfig({"broker.id": "7"}).node_id == 7
    assert BrokerConfig({"node.id": "7"}).get("broker.id") == 7
    with pytest.raises(ConfigError, match="same value as `broker.id`"):
        BrokerConfig({"node.id": "1", "broker.id": "2"})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("num.partitions", "0", "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
        ("message.max.bytes", "lots", "Invalid value lots for configuration message.max.bytes: Not a number of type INT"),
        ("message.max.bytes", "2147483648", "Not a number of type INT"),
        ("log.retention.bytes", "1_000", "Not a number of type LONG"),
        ("auto.create.topics.enable", "yes", "auto.create.topics.enable: Expected value to be either true or false"),
        ("log.cleanup.policy", "delete,archive", "Invalid value archive for configuration log.cleanup.policy: String must be one of: compact, delete"),
        ("log.message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        ("offsets.topic.replication.factor", "40000", "Not a number of type SHORT"),
    ],
)  # fmt: skip
def test_invalid_values_are_rejected_with_the_key_named(name, value, message):
    with pytest.raises(ConfigError) as error:
        BrokerConfig({name: value})
    assert message in str(error.value)
    assert error.value.name == name


def test_values_are_trimmed_and_booleans_case_insensitive():
    config = BrokerConfig({"num.partitions": " 4 ", "auto.create.topics.enable": "FALSE "})
    assert config.num_partitions == 4
    assert config.auto_create_topics_enable is False


def test_unknown_keys_are_kept_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        config = BrokerConfig({"my.plugin.setting": "x"})
    assert "my.plugin.setting" in caplog.text
    assert config.get("my.plugin.setting") == "x"
    described = entry(config.describe(), "my.plugin.setting")
    # Kafka cannot type an unknown key, so it treats it as sensitive.
    assert (described.value, described.type, described.sensitive) == (None, ConfigType.UNKNOWN, True)
    assert described.source is STATIC


def test_listeners_parse_names_hosts_and_ports():
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092, internal://[::1]:9093,EXTERNAL://:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:SSL",
            "advertised.listeners": "PLAINTEXT://kafka.example:9092",
        }
    )
    assert config.listeners == (
        Endpoint("PLAINTEXT", "127.0.0.1", 9092),
        Endpoint("INTERNAL", "::1", 9093),
        Endpoint("EXTERNAL", "", 0),
    )
    assert config.advertised_listeners == (Endpoint("PLAINTEXT", "kafka.example", 9092),)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "localhost:9092"}, "Unable to parse localhost:9092 to a broker endpoint"),
        ({"listeners": "CLIENT://:9092"}, "No security protocol defined for listener CLIENT"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "Each listener must have a different port"),
        ({"listeners": "PLAINTEXT://:9092,plaintext://:9093"}, "Each listener must have a different name"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable meta-address 0.0.0.0"),
    ],
)  # fmt: skip
def test_bad_listeners_are_rejected(props, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(props)


TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
}


def test_each_listener_has_the_security_protocol_its_name_maps_to():
    config = BrokerConfig(TWO_LISTENERS)
    assert [e.name for e in config.listeners] == ["PLAINTEXT", "INTERNAL"]
    assert config.listener_security_protocol_map == {"PLAINTEXT": "PLAINTEXT",
                                                     "INTERNAL": "PLAINTEXT"}
    assert config.advertised_listeners == config.listeners


def test_the_inter_broker_listener_defaults_to_the_one_named_after_its_security_protocol():
    assert BrokerConfig(TWO_LISTENERS).inter_broker_listener_name == "PLAINTEXT"


def test_the_inter_broker_listener_can_be_named_in_any_case():
    config = BrokerConfig(TWO_LISTENERS | {"inter.broker.listener.name": "internal"})
    assert config.inter_broker_listener_name == "INTERNAL"


def test_listeners_on_ephemeral_ports_may_share_port_zero():
    config = BrokerConfig(TWO_LISTENERS | {"listeners": "PLAINTEXT://:0,INTERNAL://:0"})
    assert [e.port for e in config.listeners] == [0, 0]


def test_advertised_listeners_are_matched_to_listeners_by_name_and_may_share_a_port():
    config = BrokerConfig(TWO_LISTENERS | {
        "advertised.listeners": "internal://10.0.0.1:9092,PLAINTEXT://kafka.example:9092"})
    assert config.advertised_listeners == (Endpoint("INTERNAL", "10.0.0.1", 9092),
                                           Endpoint("PLAINTEXT", "kafka.example", 9092))


def test_a_listener_mapped_to_ssl_is_a_valid_config():
    """Refused only when the broker starts: see test_socket_server."""
    config = BrokerConfig({"listeners": "SSL://:9093", "inter.broker.listener.name": "SSL"})
    assert config.listener_security_protocol_map["SSL"] == "SSL"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "INTERNAL://:9093", "listener.security.protocol.map": "INTERNAL:PLAINTEXT"},
         "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
         "The valid options based on currently configured listeners are INTERNAL"),
        (TWO_LISTENERS | {"inter.broker.listener.name": "OTHER"},
         "Listener with name OTHER defined in inter.broker.listener.name not found in "
         "listener.security.protocol.map."),
        (TWO_LISTENERS | {"inter.broker.listener.name": "INTERNAL",
                          "security.inter.broker.protocol": "PLAINTEXT"},
         "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
        ({"inter.broker.listener.name": "SSL"},
         "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
        ({"security.inter.broker.protocol": "SSL"},
         "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
        ({"security.inter.broker.protocol": "TLS"},
         "Invalid value TLS for configuration security.inter.broker.protocol: String must be "
         "one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"},
         "Invalid security protocol `TLS` defined in listener.security.protocol.map"),
        (TWO_LISTENERS | {"advertised.listeners": "PLAINTEXT://h:9092,EXTERNAL://h:9093",
                          "listener.security.protocol.map":
                              "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"},
         "advertised.listeners listener names must be equal to or a subset of the ones defined "
         "in listeners. Found PLAINTEXT,EXTERNAL. The valid options based on the current "
         "configuration are PLAINTEXT,INTERNAL"),
        ({"listeners": ""}, "There must be at least one broker advertised listener."),
    ],
)  # fmt: skip
def test_listener_configs_kafka_refuses_are_refused_with_its_message(props, message):
    with pytest.raises(ConfigError) as refused:
        BrokerConfig(props)
    assert message in str(refused.value)


# -- DescribeConfigs on the broker ---------------------------------------------------------


def test_describe_reports_defaults_as_default_config():
    described = entry(BrokerConfig().describe(), "num.partitions")
    assert described.value == "1"
    assert described.source is DEFAULT and described.is_default
    assert described.read_only and not described.sensitive
    assert described.type is ConfigType.INT
    assert described.synonyms == (ConfigSynonym("num.partitions", "1", DEFAULT),)
    assert described.documentation


def test_describe_reports_static_values_with_their_synonyms():
    config = BrokerConfig({"log.retention.hours": "24", "log.cleanup.policy": "compact , delete"})
    hours = entry(config.describe(), "log.retention.hours")
    assert (hours.value, hours.source, hours.is_default) == ("24", STATIC, False)
    assert hours.synonyms == (
        ConfigSynonym("log.retention.hours", "24", STATIC),
        ConfigSynonym("log.retention.hours", "168", DEFAULT),
    )
    # log.retention.ms itself is unset: Kafka shows it as a null default.
    millis = entry(config.describe(), "log.retention.ms")
    assert (millis.value, millis.source, millis.synonyms) == (None, DEFAULT, ())
    assert entry(config.describe(), "log.cleanup.policy").value == "compact,delete"


def test_describe_can_be_limited_to_some_names():
    names = [e.name for e in BrokerConfig().describe(["num.partitions", "no.such.key"])]
    assert names == ["num.partitions"]


def test_dynamic_broker_override_wins_and_is_not_read_only():
    config = BrokerConfig({"log.retention.hours": "24"})
    config.set_dynamic({"log.retention.ms": "1000"})
    assert config.retention_ms == 1000
    described = entry(config.describe(), "log.retention.ms")
    assert (described.value, described.source, described.read_only) == ("1000", DYNAMIC, False)
    assert [(s.name, s.source) for s in described.synonyms] == [
        ("log.retention.ms", DYNAMIC),
        ("log.retention.hours", STATIC),
        ("log.retention.hours", DEFAULT),
    ]
    assert config.dynamic_configs() == {"log.retention.ms": "1000"}


def test_static_only_configs_cannot_be_altered_dynamically():
    config = BrokerConfig()
    with pytest.raises(ConfigError, match=r"Cannot update these configs dynamically: Set\(log.dirs, num.partitions\)"):
        config.set_dynamic({"num.partitions": "3", "log.dirs": "/x", "message.max.bytes": "10"})
    assert config.dynamic_configs() == {}


def test_listeners_cannot_be_set_as_a_cluster_default():
    with pytest.raises(ConfigError, match="broker id must be specified: Set\\(listeners\\)"):
        BrokerConfig().set_dynamic({"listeners": "PLAINTEXT://:9093"}, per_broker=False)


def test_an_invalid_dynamic_update_leaves_the_config_unchanged():
    config = BrokerConfig()
    config.set_dynamic({"message.max.bytes": "2000"})
    with pytest.raises(ConfigError, match="message.max.bytes"):
        config.set_dynamic({"message.max.bytes": "-1"})
    with pytest.raises(ConfigError, match="min.compaction.lag.ms"):
        config.set_dynamic({"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"})
    assert config.message_max_bytes == 2000
    assert config.dynamic_configs() == {"message.max.bytes": "2000"}


def test_validate_only_does_not_apply_the_update():
    config = BrokerConfig()
    config.validate_dynamic({"message.max.bytes": "2000"})
    assert config.message_max_bytes == 1048588


def test_cluster_default_resource_describes_only_its_own_overrides():
    config = BrokerConfig()
    config.set_dynamic({"log.cleaner.delete.retention.ms": "34"}, per_broker=False)
    (described,) = config.describe(cluster_default=True)
    assert (described.name, described.value, described.source) == (
        "log.cleaner.delete.retention.ms",
        "34",
        CLUSTER_DEFAULT,
    )
    assert described.synonyms == (ConfigSynonym("log.cleaner.delete.retention.ms", "34", CLUSTER_DEFAULT),)


# -- topic configs -------------------------------------------------------------------------


def test_topic_defaults_are_kafkas():
    effective = effective_topic_config({}, BrokerConfig())
    assert set(effective) == set(TOPIC_CONFIGS)
    assert effective["retention.ms"] == 604800000
    assert effective["retention.bytes"] == -1
    assert effective["segment.bytes"] == 1073741824
    assert effective["segment.ms"] == 604800000
    assert effective["max.message.bytes"] == 1048588
    assert effective["cleanup.policy"] == ("delete",)
    assert effective["message.timestamp.type"] == "CreateTime"
    assert effective["min.insync.replicas"] == 1
    assert effective["compression.type"] == "producer"
    assert effective["flush.messages"] == 2**63 - 1
    assert effective["min.cleanable.dirty.ratio"] == 0.5
    assert effective["remote.storage.enable"] is False


def test_every_topic_synonym_is_a_broker_config():
    for topic in TOPIC_CONFIGS.values():
        for synonym in topic.synonyms:
            assert synonym.name in BROKER_CONFIGS, (topic.name, synonym.name)
            assert BROKER_CONFIGS[synonym.name].dynamic == (synonym is topic.synonyms[0])


def test_topic_inherits_a_static_broker_setting_through_its_synonym():
    broker = BrokerConfig({"log.retention.hours": "24", "log.roll.hours": "2"})
    entries = describe_topic_config({}, broker)
    retention = entry(entries, "retention.ms")
    assert (retention.value, retention.source, retention.read_only) == ("86400000", STATIC, False)
    assert retention.synonyms == (
        ConfigSynonym("log.retention.hours", "24", STATIC),
        ConfigSynonym("log.retention.hours", "168", DEFAULT),
    )
    assert (entry(entries, "segment.ms").value, entry(entries, "segment.ms").source) == ("7200000", STATIC)


def test_topic_inherits_booleans_and_lists_unchanged():
    broker = BrokerConfig({"log.preallocate": "true", "log.cleanup.policy": "compact"})
    effective = effective_topic_config({}, broker)
    assert effective["preallocate"] is True
    assert effective["cleanup.policy"] == ("compact",)
    assert entry(describe_topic_config({}, broker), "preallocate").value == "true"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("log.roll.ms", "0", "Invalid value 0 for configuration log.roll.ms: Value must be at least 1"),
        ("log.flush.interval.ms", "-1", "Invalid value -1 for configuration log.flush.interval.ms"),
    ],
)  # fmt: skip
def test_broker_values_a_topic_could_not_hold_are_rejected_at_startup(name, value, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig({name: value})


def test_topic_override_beats_the_broker_and_heads_the_synonyms():
    broker = BrokerConfig({"log.retention.hours": "24"})
    retention = entry(describe_topic_config({"retention.ms": "1000"}, broker), "retention.ms")
    assert (retention.value, retention.source, retention.is_default) == ("1000", TOPIC, False)
    assert [(s.name, s.source) for s in retention.synonyms] == [
        ("retention.ms", TOPIC),
        ("log.retention.hours", STATIC),
        ("log.retention.hours", DEFAULT),
    ]
    assert effective_topic_config({"retention.ms": "1000"}, broker)["retention.ms"] == 1000


def test_topic_follows_dynamic_broker_and_cluster_default_overrides():
    broker = BrokerConfig({"log.cleaner.delete.retention.ms": "1"})
    broker.set_dynamic({"log.retention.ms": "10800000"}, per_broker=False)
    broker.set_dynamic({"log.cleaner.delete.retention.ms": "34"})
    entries = describe_topic_config({}, broker)
    assert (entry(entries, "retention.ms").value, entry(entries, "retention.ms").source) == ("10800000", CLUSTER_DEFAULT)
    assert (entry(entries, "delete.retention.ms").value, entry(entries, "delete.retention.ms").source) == ("34", DYNAMIC)


def test_untouched_topic_config_is_default_with_the_broker_default_as_synonym():
    policy = entry(describe_topic_config({}, BrokerConfig()), "cleanup.policy")
    assert (policy.value, policy.source, policy.is_default, policy.type) == ("delete", DEFAULT, True, ConfigType.LIST)
    assert policy.synonyms == (ConfigSynonym("log.cleanup.policy", "delete", DEFAULT),)
    no_synonym = entry(describe_topic_config({}, BrokerConfig()), "leader.replication.throttled.replicas")
    assert (no_synonym.value, no_synonym.source, no_synonym.synonyms) == ("", DEFAULT, ())


def test_unknown_topic_config_is_rejected_like_kafka():
    with pytest.raises(ConfigError, match="^Unknown topic config name: retention.hours$"):
        validate_topic_overrides({"retention.ms": "1", "retention.hours": "1"})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ({"cleanup.policy": "compact,delete,"}, "Invalid value  for configuration cleanup.policy: String must be one of: compact, delete"),
        ({"compression.type": "brotli"}, "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ({"min.cleanable.dirty.ratio": "half"}, "Not a number of type DOUBLE"),
        ({"leader.replication.throttled.replicas": "0:1,x"}, "must be the literal '\\*' or a list of replicas"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict topic config setting min.compaction.lag.ms \\(10\\) > max.compaction.lag.ms \\(5\\)"),
        ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
    ],
)  # fmt: skip
def test_invalid_topic_overrides_are_rejected(overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate_topic_overrides(overrides)


def test_topic_override_validation_sees_the_brokers_values():
    broker = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "100"})
    validate_topic_overrides({"min.compaction.lag.ms": "100"}, broker)
    with pytest.raises(ConfigError, match="conflict topic config setting"):
        validate_topic_overrides({"min.compaction.lag.ms": "101"}, broker)


def test_valid_overrides_come_back_parsed():
    parsed = validate_topic_overrides(
        {"cleanup.policy": "compact, delete", "min.cleanable.dirty.ratio": "0.1", "preallocate": "True"}
    )
    assert parsed == {"cleanup.policy": ("compact", "delete"), "min.cleanable.dirty.ratio": 0.1, "preallocate": True}


# -- IncrementalAlterConfigs ---------------------------------------------------------------


def test_append_to_cleanup_policy_starts_from_the_default():
    ops = [("cleanup.policy", AlterConfigOp.APPEND, "compact")]
    assert apply_incremental({}, ops, TOPIC_CONFIGS) == {"cleanup.policy": "delete,compact"}


def test_append_skips_values_already_present_and_subtract_removes_them():
    current = {"cleanup.policy": "compact"}
    appended = apply_incremental(current, [("cleanup.policy", 2, "compact,delete")], TOPIC_CONFIGS)
    assert appended == {"cleanup.policy": "compact,delete"}
    subtracted = apply_incremental(appended, [("cleanup.policy", 3, "compact")], TOPIC_CONFIGS)
    assert subtracted == {"cleanup.policy": "delete"}
    assert current == {"cleanup.policy": "compact"}  # the input is not modified


def test_subtracting_every_policy_leaves_an_empty_list_that_keeps_all_data():
    overrides = apply_incremental({}, [("cleanup.policy", AlterConfigOp.SUBTRACT, "delete")], TOPIC_CONFIGS)
    assert overrides == {"cleanup.policy": ""}
    log_config = to_log_config(effective_topic_config(overrides, BrokerConfig()))
    assert (log_config.retention_ms, log_config.retention_bytes) == (-1, -1)


@pytest.mark.parametrize(("op", "verb"), [(AlterConfigOp.APPEND, "append"), (AlterConfigOp.SUBTRACT, "subtract")])
def test_append_and_subtract_only_apply_to_lists(op, verb):
    with pytest.raises(ConfigError, match=f"^Config value {verb} is not allowed for config key: retention.ms$"):
        apply_incremental({}, [("retention.ms", op, "1")], TOPIC_CONFIGS)


def test_set_and_delete():
    current = {"retention.ms": "1", "segment.ms": "2"}
    ops = [("retention.ms", AlterConfigOp.DELETE, None), ("segment.bytes", AlterConfigOp.SET, "1048576")]
    assert apply_incremental(current, ops, TOPIC_CONFIGS) == {"segment.ms": "2", "segment.bytes": "1048576"}


def test_incremental_ops_work_on_dynamic_broker_configs():
    config = BrokerConfig()
    ops = [("log.cleanup.policy", AlterConfigOp.APPEND, "compact")]
    config.set_dynamic(apply_incremental(config.dynamic_configs(), ops, BROKER_CONFIGS))
    assert config.get("log.cleanup.policy") == ("delete", "compact")
    assert effective_topic_config({}, config)["cleanup.policy"] == ("delete", "compact")


# -- the log layer's LogConfig ---------------------------------------------------------------


def test_to_log_config_carries_the_effective_topic_values():
    broker = BrokerConfig({"log.segment.bytes": "1048576", "log.roll.ms": "60000"})
    overrides = {"cleanup.policy": "compact,delete", "message.timestamp.type": "LogAppendTime"}
    log_config = to_log_config(effective_topic_config(overrides, broker))
    assert log_config.segment_bytes == 1048576
    assert log_config.segment_ms == 60000
    assert log_config.cleanup_policy == "compact,delete"
    assert log_config.log_append_time
    assert log_config.retention_ms == 604800000


# -- values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [("0.5", "0.5"), ("1", "1.0"), ("0.0001", "1.0E-4"), (".25", "0.25"), ("1e0", "1.0")],
)
def test_doubles_are_shown_as_java_prints_them(value, wire):
    ratio = TOPIC_CONFIGS["min.cleanable.dirty.ratio"]
    assert ratio.to_string(ratio.parse(value)) == wire


def test_config_defs_carry_kafkas_types():
    assert TOPIC_CONFIGS["cleanup.policy"].type is ConfigType.LIST
    assert TOPIC_CONFIGS["min.cleanable.dirty.ratio"].type is ConfigType.DOUBLE
    assert BROKER_CONFIGS["offsets.topic.replication.factor"].type is ConfigType.SHORT
    assert BROKER_CONFIGS["log.retention.ms"].type is ConfigType.LONG
    assert not any(d.sensitive for d in TOPIC_CONFIGS.values())
    # Kafka's PASSWORD configs: secrets, never described with their value
    assert {name for name, d in BROKER_CONFIGS.items() if d.sensitive} == {
        "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
        "ssl.keystore.certificate.chain", "ssl.truststore.password",
        "ssl.truststore.certificates", "sasl.jaas.config"}


def test_a_listeners_own_value_wins_over_the_brokers_from_any_layer():
    config = BrokerConfig({
        "ssl.client.auth": "requested",
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": "jaas-for-plain",
    })
    assert config.listener_config("INTERNAL", "ssl.client.auth") == "required"
    assert config.listener_config("EXTERNAL", "ssl.client.auth") == "requested"
    assert config.listener_config("SASL_SSL", "sasl.jaas.config", "PLAIN") == "jaas-for-plain"
    assert config.listener_config("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256") is None
    config.set_dynamic({"ssl.client.auth": "none"})
    assert config.listener_config("INTERNAL", "ssl.client.auth") == "required"


def test_a_listeners_own_value_is_checked_like_the_config_it_sets():
    with pytest.raises(ConfigError, match="String must be one of: required, requested, none"):
        BrokerConfig({"listener.name.ssl.ssl.client.auth": "sometimes"})
