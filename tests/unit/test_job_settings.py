"""The job's settings (no Spark needed); the state store is tested on a real Hadoop
filesystem in tests/integration/test_state_store.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.ids import TargetId
from streaming.config import ConfigError, load_settings

BASE = """
kafka: {bootstrap: "localhost:9092"}
sources: [{format: debezium, pattern: 'shop(\\..*)?'}]
routes: [{target: shop.orders, table: 'orders_*', extract: {source_column: _source}}]
targets: {shop.orders: {mode: pessimistic}}
sink: {path: /tmp/lake}
checkpoint: /tmp/ck
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_a_valid_file_builds_router_and_targets(tmp_path: Path):
    s = load_settings(write(tmp_path, BASE), environ={})
    router = s.router()
    assert router.routes[0].extract.source_column == "_source"
    assert s.target_configs()[TargetId("shop", "orders")].mode == "pessimistic"
    assert s.table_path(TargetId("shop", "orders")) == "/tmp/lake/shop/orders"
    assert s.dead_letters() == "/tmp/ck/dead_letter"


@pytest.mark.parametrize(
    ("sink", "checkpoint"),
    [("s3a://bucket/lake/", "s3a://bucket/ck"), ("hdfs://nn:8020/lake", "file:///data/ck/")],
)
def test_locations_stay_uris(tmp_path: Path, sink: str, checkpoint: str):
    env = {"SHARDMERGE__SINK__PATH": sink, "SHARDMERGE__CHECKPOINT": checkpoint}
    s = load_settings(write(tmp_path, BASE), environ=env)
    # pathlib would make s3a://bucket/... into s3a:/bucket/...
    assert s.table_path(TargetId("shop", "orders")) == sink.rstrip("/") + "/shop/orders"
    assert s.dead_letters() == checkpoint.rstrip("/") + "/dead_letter"


def test_environment_overrides_nested_fields(tmp_path: Path):
    env = {
        "SHARDMERGE__KAFKA__BOOTSTRAP": "broker:1234",
        "SHARDMERGE__KAFKA__MAX_OFFSETS_PER_TRIGGER": "500",
        "SHARDMERGE__KAFKA__OPTIONS": "{sasl.jaas.config: secret-value}",
    }
    s = load_settings(write(tmp_path, BASE), environ=env)
    assert s.kafka.bootstrap == "broker:1234"
    assert s.kafka.max_offsets_per_trigger == 500
    assert "secret-value" not in repr(s.kafka.options)
    assert s.kafka.options["sasl.jaas.config"].get_secret_value() == "secret-value"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("sink: {path: /tmp/lake, kind: iceberg}", "sink.kind"),
        ("sink: {path: /tmp/lake, kind: jdbc}", "needs sink.url and sink.dialect"),
        (
            "sink: {path: /tmp/lake, kind: jdbc, url: 'jdbc:mariadb://h/', dialect: postgresql}",
            "starts with jdbc:postgresql:",
        ),
        (
            "sink: {path: /tmp/lake, kind: jdbc, url: 'jdbc:mariadb://h/?password=x', "
            "dialect: mariadb}",
            "SHARDMERGE__SINK__PASSWORD",
        ),
        (
            "sink: {path: /tmp/lake, kind: jdbc, url: 'jdbc:mariadb://h/', dialect: mariadb, "
            "password: hunter2}",
            "sink.password in a settings file",
        ),
        ("routes: [{target: no_dot}]", "routes.0.target"),
        ("sources: [{format: avro, topics: [a]}]", "sources.0.format"),
        ("sources: [{topics: [a], pattern: b}]", "sources.0"),
        ("targets: {shop.orders: {mode: sometimes}}", "targets.shop.orders.mode"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path: Path, change: str, field: str):
    key = change.split(":")[0]
    text = "\n".join(line for line in BASE.splitlines() if not line.startswith(key + ":"))
    path = write(tmp_path, text + "\n" + change + "\n")
    with pytest.raises(ConfigError) as e:
        load_settings(path, environ={})
    assert str(path) in str(e.value) and field in str(e.value)


def test_a_jdbc_sink_takes_its_password_from_the_environment_or_a_file(tmp_path: Path):
    text = "\n".join(line for line in BASE.splitlines() if not line.startswith("sink:"))
    sink = "sink: {path: /tmp/lake, kind: jdbc, url: 'jdbc:mariadb://db:3306/', dialect: mariadb}"
    path = write(tmp_path, text + "\n" + sink + "\n")
    s = load_settings(path, environ={"SHARDMERGE__SINK__PASSWORD": "s3cret"})
    assert s.sink.password is not None and s.sink.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    s = load_settings(path, environ={"SHARDMERGE__SINK__PASSWORD_FILE": str(secret)})
    assert s.sink.password is not None and s.sink.password.get_secret_value() == "from-a-file"
    with pytest.raises(ConfigError, match="cannot be read"):
        load_settings(path, environ={"SHARDMERGE__SINK__PASSWORD_FILE": str(tmp_path / "no")})


# --- which topics are read ahead (streaming.job._subscriptions) ------------------------------


def _java_like(regex: str, topic: str) -> bool:
    """Spark's Kafka source keeps a topic when the (anchored) pattern matches it."""
    import re

    return re.search(regex, topic) is not None


@pytest.mark.parametrize(
    "topic, data, schema",
    [
        ("shop", False, True),  # Debezium's schema-change topic: topic.prefix
        ("shop.db_0.orders_1", True, False),
        ("shop.all.orders", True, False),  # a routed logical-table topic
        ("shop-schemahistory", False, False),  # not the source's: never read
        ("other", False, False),  # a dotless topic of another connector
        ("other.db.t", False, False),
    ],
)
def test_debezium_sources_read_their_schema_topic_ahead_by_default(topic, data, schema):
    from streaming.config import SourceSettings
    from streaming.job import _subscriptions

    split = _subscriptions(SourceSettings(pattern=r"shop(\..*)?"))
    assert split is not None
    (kind, data_regex), (kind2, schema_regex) = split
    assert kind == kind2 == "subscribePattern"
    assert _java_like(data_regex, topic) is data
    assert _java_like(schema_regex, topic) is schema


def test_listed_topics_split_and_other_formats_and_the_switch_do_not():
    from streaming.config import SourceSettings
    from streaming.job import _subscriptions

    listed = SourceSettings(topics=["shop", "shop.db.t1", "shop.db.t2"])
    assert _subscriptions(listed) == (
        ("subscribe", "shop.db.t1,shop.db.t2"),
        ("subscribe", "shop"),
    )
    assert _subscriptions(SourceSettings(topics=["shop.db.t1"])) is None  # no schema topic
    assert _subscriptions(SourceSettings(format="canal", pattern="c.*", source="c")) is None
    off = SourceSettings(pattern=r"shop(\..*)?", read_schema_ahead=False)
    assert _subscriptions(off) is None


def test_the_offsets_log_is_read_per_kafka_source():
    from streaming.source.offsets_log import kafka_offsets as _offsets

    assert _offsets('{"shop":{"0":3},"shop.db.t":{"0":10,"1":7}}') == {
        ("shop", 0): 3,
        ("shop.db.t", 0): 10,
        ("shop.db.t", 1): 7,
    }
    assert _offsets("-") == {}
    with pytest.raises(ValueError, match="not the offsets of a Kafka source"):
        _offsets("[1, 2]")


def test_a_checkpoint_from_before_the_default_keeps_its_layout(tmp_path: Path):
    from streaming.job import layout_for

    s = load_settings(write(tmp_path, BASE), environ={})
    assert layout_for(s, None) == [True]  # new checkpoint: data and schema-change sources
    assert layout_for(s, 2) == [True]
    assert layout_for(s, 1) == [False]  # made with one Kafka source: it stays one


TOKEN = "0f3a9c1d7e5b2486a1c0e9f7d3b5a2c4e6f8"  # 36 characters, as `openssl rand -hex 18`


def test_environment_strings_and_secrets_are_taken_verbatim(tmp_path: Path):
    """Only lists and mappings are YAML; a secret with ` #` or a leading `*` arrives whole."""
    env = {
        "SHARDMERGE__OPS__TOKEN": f"*{TOKEN} #not a comment",
        "SHARDMERGE__KAFKA__BOOTSTRAP": "broker:1234 # keep",
        "SHARDMERGE__OPS__PORT": "9500",
        "SHARDMERGE__OPS__ENABLED": "false",
        "SHARDMERGE__KAFKA__OPTIONS": "{sasl.jaas.config: 'x #y'}",
    }
    s = load_settings(write(tmp_path, BASE), environ=env)
    assert s.ops.token is not None
    assert s.ops.token.get_secret_value() == f"*{TOKEN} #not a comment"
    assert s.kafka.bootstrap == "broker:1234 # keep"
    assert (s.ops.port, s.ops.enabled) == (9500, False)
    assert s.kafka.options["sasl.jaas.config"].get_secret_value() == "x #y"


def test_a_mistyped_variable_is_refused_not_ignored(tmp_path: Path):
    """Why the loader is ours, not pydantic-settings': that one ignores a prefixed nested
    variable that names no field (SHARDMERGE__OPS__TOKNE would leave the job without its
    token, silently) and reads mappings as JSON, not the YAML the docs use."""
    with pytest.raises(ConfigError, match=r"ops\.tokne: Extra inputs are not permitted"):
        load_settings(write(tmp_path, BASE), environ={"SHARDMERGE__OPS__TOKNE": TOKEN})


def test_a_yaml_error_names_the_variable_never_its_value(tmp_path: Path):
    env = {"SHARDMERGE__KAFKA__OPTIONS": "{sasl.jaas.config: [s3cr3t-value"}
    with pytest.raises(ConfigError, match="SHARDMERGE__KAFKA__OPTIONS") as e:
        load_settings(write(tmp_path, BASE), environ=env)
    assert "s3cr3t" not in str(e.value)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("q7Z", "has 3 characters"),
        ("change-me", "has 9 characters"),
        ("change-me-" * 4, "placeholder"),
        ("a" * 40, "placeholder"),
    ],
)
def test_weak_and_placeholder_tokens_are_refused(tmp_path: Path, token: str, why: str):
    with pytest.raises(ConfigError, match=why) as e:
        load_settings(write(tmp_path, BASE), environ={"SHARDMERGE__OPS__TOKEN": token})
    assert token not in str(e.value)


def test_the_token_can_come_from_a_file(tmp_path: Path):
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    env = {"SHARDMERGE__OPS__TOKEN_FILE": str(secret)}
    s = load_settings(write(tmp_path, BASE), environ=env)
    assert s.ops.token is not None and s.ops.token.get_secret_value() == TOKEN
    with pytest.raises(ConfigError, match="not both"):
        load_settings(write(tmp_path, BASE), environ={**env, "SHARDMERGE__OPS__TOKEN": TOKEN})
    with pytest.raises(ConfigError, match="cannot be read"):
        load_settings(
            write(tmp_path, BASE), environ={"SHARDMERGE__OPS__TOKEN_FILE": str(tmp_path / "no")}
        )


def test_spark_conf_from_the_environment_is_key_value_pairs():
    from streaming.runtime.session_conf import env_conf

    assert env_conf("a.b=1\n  c.d=x=y  e=") == {"a.b": "1", "c.d": "x=y", "e": ""}
    assert env_conf("") == {}
    with pytest.raises(ValueError, match=r"'spark\.sql\.x' is not key=value"):
        env_conf("a=1 spark.sql.x")
    with pytest.raises(ValueError, match="'=1' is not key=value"):
        env_conf("=1")


def test_a_submitted_session_gets_what_the_job_needs_unless_the_submitter_set_it():
    from streaming.runtime.spark_session import submitted_conf

    added = submitted_conf([("spark.sql.extensions", "com.example.Ext")])
    assert (
        added["spark.sql.extensions"] == "com.example.Ext,io.delta.sql.DeltaSparkSessionExtension"
    )
    assert added["spark.sql.variable.substitute"] == "false"
    # a stage HotSpot would not compile runs operator by operator (docs/benchmarks.md)
    assert added["spark.sql.codegen.hugeMethodLimit"] == "8000"
    mine = submitted_conf([
        ("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension"),
        ("spark.sql.catalog.spark_catalog", "my.Catalog"),
        ("spark.sql.codegen.hugeMethodLimit", "65535"),
    ])  # fmt: skip
    assert mine == {"spark.sql.variable.substitute": "false"}
