"""A downstream change Delta cannot express (INT to VARCHAR) becomes a lock in stage
``conflict``: the job goes on, the target's rows wait in the stash, and after the operator
fixed the table by hand, ``unlock TARGET --retry`` runs the change and releases them."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
import yaml
from pyspark.sql import functions as F

from coordinator.commands import parse_command
from coordinator.ids import TargetId
from shardmerge.cli import main
from streaming.config import TargetSettings
from streaming.storage.state_store import StateStore
from tests.integration.test_ordering import BASE, Pipeline, ddl, row

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

TEXT = "CREATE TABLE {t} (id INT PRIMARY KEY, a VARCHAR(20))"


def test_a_change_delta_cannot_make_waits_for_the_operator(kafka, spark, tmp_path):
    p = Pipeline(kafka, spark, tmp_path, "pessimistic")
    p.send(
        [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
        + row(p, "t1", {"id": 1, "a": 1}, BASE)
        + row(p, "t2", {"id": 2, "a": 2}, BASE)
    )
    p.run()
    assert p.rows() == [{"id": 1, "a": 1}, {"id": 2, "a": 2}]
    p.send(
        [ddl(p, t, f"ALTER TABLE {t} MODIFY a VARCHAR(20)", TEXT) for t in ("t1", "t2")]
        + row(p, "t1", {"id": 3, "a": "three"}, TEXT)
        + row(p, "t2", {"id": 4, "a": "four"}, TEXT)
    )
    p.run()  # the job does not stop
    lock = p.lock()
    assert lock["stage"] == "conflict"
    assert "cannot change column 'a' from INT to STRING" in lock["conflict"]
    assert "--retry" in lock["conflict"]
    assert sorted(lock["blocked"]) == [f"{p.source}.db.t1", f"{p.source}.db.t2"]
    assert p.rows() == [{"id": 1, "a": 1}, {"id": 2, "a": 2}]  # rows 3, 4 wait
    p.send(row(p, "t1", {"id": 5, "a": "five"}, TEXT))
    p.run()
    assert len(p.rows()) == 2 and p.lock()["stage"] == "conflict"

    # The operator rebuilds the table with the new type (same columns, column mapping kept).
    path = p.settings.table_path(TargetId("shop", "t"))
    df = spark.read.format("delta").load(path)
    df.withColumn("a", F.col("a").cast("string")).write.format("delta").mode("overwrite").option(
        "overwriteSchema", "true"
    ).save(path)
    store = StateStore(spark, p.settings.checkpoint)
    # Mistyped commands in the same batch are recorded errors; they do not stop the job,
    # and the good command after them is applied.
    # a table name with a quote (legal in MySQL): a value, quoted in its words
    store.submit(parse_command(f'unlock shop.t --shard "{p.source}.db.o\'brien" --action skip'))
    store.submit(parse_command(f"unlock shop.t --shard {p.source}.db.t9 --action skip"))
    store.submit(parse_command("unlock shop.t --retry"))
    p.send(row(p, "t2", {"id": 6, "a": "six"}, TEXT))
    p.run()
    latest = store.latest()
    assert latest is not None
    errors = latest[1]["stats"]["command_errors"]
    assert len(errors) == 2, errors
    assert f"{p.source}.db.o'brien is not held" in errors[0], errors
    assert f"{p.source}.db.t9 is not held" in errors[1]
    assert p.lock()["stage"] == "none" and p.lock()["blocked"] == []
    assert p.rows() == [
        {"id": 1, "a": "1"},
        {"id": 2, "a": "2"},
        {"id": 3, "a": "three"},
        {"id": 4, "a": "four"},
        {"id": 5, "a": "five"},
        {"id": 6, "a": "six"},
    ]


DEC = "CREATE TABLE {t} (id INT PRIMARY KEY, p DECIMAL(5,2))"
DEC3 = "CREATE TABLE {t} (id INT PRIMARY KEY, p DECIMAL(5,3))"


def test_a_decimal_delta_cannot_widen_waits_then_is_rewritten(kafka, spark, tmp_path, capsys):
    """MODIFY p DECIMAL(5,3) on DECIMAL(5,2): more scale, one integer digit less. Delta
    cannot do it in place; the job does not stop, and with rewrite_incompatible the retry
    rewrites the table with the new type."""
    p = Pipeline(kafka, spark, tmp_path, "pessimistic")
    p.send(
        [ddl(p, t, DEC.format(t=t), DEC) for t in ("t1", "t2")]
        + row(p, "t1", {"id": 1, "p": "1.25"}, DEC)
        + row(p, "t2", {"id": 2, "p": "12.50"}, DEC)
    )
    p.run()
    p.send(
        [ddl(p, t, f"ALTER TABLE {t} MODIFY p DECIMAL(5,3)", DEC3) for t in ("t1", "t2")]
        + row(p, "t1", {"id": 3, "p": "1.125"}, DEC3)
    )
    p.run()  # the job does not stop
    lock = p.lock()
    assert lock["stage"] == "conflict"
    assert "from DECIMAL(5,2) to DECIMAL(5,3)" in lock["conflict"]
    assert "rewrite_incompatible" in lock["conflict"] and "--retry" in lock["conflict"]
    assert [r["id"] for r in p.rows()] == [1, 2]  # row 3 waits in the stash

    p.settings = p.settings.model_copy(
        update={
            "targets": {"shop.t": TargetSettings(mode="pessimistic", rewrite_incompatible=True)}
        }
    )
    StateStore(spark, p.settings.checkpoint).submit(parse_command("unlock shop.t --retry"))
    p.send(row(p, "t2", {"id": 4, "p": "2.5"}, DEC3))  # a batch to apply the command
    p.run()
    assert p.lock()["stage"] == "none" and p.lock()["blocked"] == []
    assert p.rows() == [
        {"id": 1, "p": Decimal("1.250")},
        {"id": 2, "p": Decimal("12.500")},
        {"id": 3, "p": Decimal("1.125")},
        {"id": 4, "p": Decimal("2.500")},
    ]
    # The rewrite's commit says which statement and which shard DDL caused it, and
    # `shardmerge history` shows it.
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(p.settings.model_dump(mode="json", exclude_defaults=True)))
    assert main(["history", "--config", str(config), "shop.t", "--json"]) == 0
    commits = json.loads(capsys.readouterr().out)["commits"]
    # The table's creation records the first shard's CREATE TABLE.
    created = [c for c in commits if c["operation"] == "CREATE TABLE"]
    assert len(created) == 1 and created[0]["cause"] is not None, commits
    assert created[0]["cause"]["statement"].startswith("CREATE TABLE"), created
    assert f"{p.source}.db.t1 is the target's first table" in created[0]["cause"]["reason"]
    caused = [c for c in commits if c["cause"] is not None and c not in created]
    assert caused, commits
    assert all("MODIFY COLUMN `p` DECIMAL(5,3)" in c["cause"]["statement"] for c in caused)
    assert all(c["cause"]["reason"] and c["cause"]["target"] == "shop.t" for c in caused)
    assert any(c["operation"] in ("WRITE", "CREATE OR REPLACE TABLE AS SELECT") for c in caused)
    assert main(["history", "--config", str(config), "shop.t"]) == 0
    assert "because:" in capsys.readouterr().out
