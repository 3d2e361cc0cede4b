"""One topic per logical table (docs/cluster.md): the connector settings the project's
real upstream registers, and the records its producer writes as Debezium's routing does."""

from __future__ import annotations

import json
import re
from typing import Any

from devkit.debezium_build import DebeziumBuilder
from devkit.producer import java_string_hash, routed_partition
from devkit.upstream_local import Routed, routed_config
from schemas import parse_create_table


def test_java_string_hash_is_java_s() -> None:
    # String.hashCode, as the JVM gives it
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("é中") == 233 * 31 + 0x4E2D
    assert java_string_hash("\N{GRINNING FACE}") == 0xD83D * 31 + 0xDE00  # two UTF-16 units
    assert java_string_hash("polygenelubricants") == -(2**31)  # Java's Integer.MIN_VALUE


def test_routed_partition_is_the_sum_of_hashes_without_its_sign() -> None:
    total = (java_string_hash("db_0") + java_string_hash("orders_0")) & 0x7FFFFFFF
    assert routed_partition(["db_0", "orders_0"], 4) == total % 4
    got = {routed_partition([f"db_{d}", f"orders_{t}"], 4) for d in range(8) for t in range(16)}
    assert got == {0, 1, 2, 3}


def _key(schemas_enable: bool, create: str = "CREATE TABLE t (id INT PRIMARY KEY, a INT)") -> Any:
    builder = DebeziumBuilder("s1", schemas_enable=schemas_enable, routed=True)
    (record,) = builder.row("db", "t", "c", None, {"id": 1, "a": 2}, parse_create_table(create))
    return record.key


def test_routed_key_adds_the_routers_field() -> None:
    assert json.loads(_key(False) or b"") == {
        "id": 1, "__dbz__physicalTableIdentifier": "s1.db.t"
    }  # fmt: skip
    out = json.loads(_key(True) or b"")
    assert [f["field"] for f in out["schema"]["fields"]] == ["id", "__dbz__physicalTableIdentifier"]
    assert out["payload"]["__dbz__physicalTableIdentifier"] == "s1.db.t"
    assert _key(False, "CREATE TABLE t (id INT, a INT)") is None  # a table without a key


def test_the_connector_routes_every_shard_topic_but_the_markers() -> None:
    config = routed_config(Routed(logical="all", partitions=8, exclude_db="ctl"), "r1_")
    assert config["transforms"].split(",")[-1] == "run"  # the run prefix router stays last
    # Java and Python agree on these constructs (anchors, classes, a negative lookahead)
    regex = re.compile(config["transforms.logical.topic.regex"])
    for topic in ("s1.db_0.orders_0", "s1.db-7.a$b"):
        assert regex.match(topic)
        assert regex.sub(config["transforms.logical.topic.replacement"].replace("$1", r"\1"),
                         topic) == "s1.all"  # fmt: skip
    for topic in ("s1", "s1.ctl.markers", "s1-schemahistory"):
        assert not regex.match(topic)
    assert re.match(config["predicates.routed.pattern"], "s1.all")
    assert not re.match(config["predicates.routed.pattern"], "s1")
    assert re.match(config["topic.creation.routed.include"], "r1_s1.all")
    assert config["transforms.shard.partition.topic.num"] == "8"
    assert config["topic.creation.routed.partitions"] == "8"
    assert config["transforms.shard.partition.payload.fields"] == "source.db,source.table"


def test_routed_capture_refuses_a_connector_whose_router_replaces_explicit_nulls(tmp_path) -> None:
    import pytest

    from devkit.upstream_local import ROUTED_CONNECTOR, Upstream, UpstreamError

    up = Upstream("t", tmp_path, "127.0.0.1:9", {}, "http://127.0.0.1:9", 0, tmp_path / "log")
    assert up.connector == "mariadb" != ROUTED_CONNECTOR
    with pytest.raises(UpstreamError, match=r"dbz#1848.*SHARDMERGE_DEBEZIUM=mysql"):
        up.add_connector("s1", run_prefix="r_", bootstrap="127.0.0.1:9", routed=Routed())
