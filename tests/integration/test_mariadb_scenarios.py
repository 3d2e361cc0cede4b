"""The real upstream end to end: scenario steps run as SQL on MariaDB shards, Debezium's
MariaDB connector captures them on Kafka Connect, the streaming job replicates them to
Delta; the Delta table is checked against the file's expectations and against the shards'
own rows (``devkit/scenario_mariadb.py``); each test asserts that comparison ran.

A time-bounded subset runs here; ``scripts/scenarios-mariadb`` runs every shipped file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.scenario.model import Scenario, Step, load_scenario
from devkit.kafka_local import KafkaBroker
from devkit.scenario_mariadb import MariaDbScenarioSession, _MariaRun

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2] / "tests" / "scenarios"
SUBSET = [
    "dm/dm030-add-column-optimistic.yaml",  # add column on one shard, then the other
    "dm/dm003-add-column-pessimistic.yaml",  # pessimistic hold and release
    # what a real gh-ost run writes to the binlog, verbatim: changelog and sentry tables,
    # its /* gh-ost */ comments and qualified names, the cut-over RENAME
    "beyond/gh-ost-binlog-statements-optimistic.yaml",
    # the shadow in the snapshot, its ALTER never read: the cut-over is the schema difference
    "beyond/gh-ost-began-before-the-job-pessimistic.yaml",
    "beyond/explicit-null-not-default-optimistic.yaml",  # a NULL the shard sent stays NULL
    # a table moved from server s1 to s2 by the copy tool's SQL (copy, markers, heartbeats)
    "moves/move-between-servers.yaml",
    # ENUM/SET members with backslashes and quotes: Debezium names a binlog row's member by
    # its own parse of the DDL (c\\d for c\d); the job maps it back (docs/upstream.md)
    "beyond/enum-set-members-with-backslashes-and-quotes-optimistic.yaml",
    # BIT(1) as Debezium's boolean, BIT(16) as its bytes least significant first: a BIT(1)
    # column stopped the job (the batch failed on every run) before it was read as such
    "beyond/bit-columns-keep-their-values-optimistic.yaml",
]


@pytest.fixture(scope="module")
def session(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with MariaDbScenarioSession(tmp_path_factory.mktemp("mariadb"), broker=kafka) as s:
        yield s


@pytest.mark.parametrize("name", SUBSET)
def test_scenario_on_real_mariadb_and_debezium(session: MariaDbScenarioSession, name: str):
    result = session.run(load_scenario(ROOT / name))
    assert result.output["failures"] == []
    assert result.ok
    # every file here ends as its shards do: the oracle ran (an exemption would skip it)
    assert result.output["oracle"] == "compared"


# One topic per server for all its shard tables (Debezium's ByLogicalTableRouter and
# PartitionRouting, docs/cluster.md), with a NULL the shard sent where its column has a
# default: Debezium 3.5's router put the default in its place (dbz#1848, fixed in 3.6), so
# routed capture runs Debezium 3.6.1's MySqlConnector (upstream_local.ROUTED_CONNECTOR;
# no 3.6 MariaDbConnector is served), on an upstream of its own.
ROUTED = ["beyond/explicit-null-not-default-optimistic.yaml"]


@pytest.fixture(scope="module")
def routed_session(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with MariaDbScenarioSession(
        tmp_path_factory.mktemp("mariadb-routed"), broker=kafka, topics="per-table"
    ) as s:
        yield s


def _topics(bootstrap: str) -> dict[str, int]:
    from confluent_kafka.admin import AdminClient

    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {name: len(t.partitions) for name, t in meta.topics.items()}


@pytest.mark.parametrize("name", ROUTED)
def test_scenario_on_real_mariadb_with_one_routed_topic_per_server(
    routed_session: MariaDbScenarioSession, kafka: KafkaBroker, name: str
):
    before = _topics(kafka.bootstrap)
    result = routed_session.run(load_scenario(ROOT / name))
    assert result.output["failures"] == []
    assert result.ok and result.output["oracle"] == "compared"
    new = {t: n for t, n in _topics(kafka.bootstrap).items() if t not in before}
    routed = {t: n for t, n in new.items() if t.endswith(".routed")}
    # a routed topic per server, four partitions; no topic of a shard table
    assert routed and all(n == 4 for n in routed.values()), new
    assert not [t for t in new if t.count(".") == 2 and "shardmerge_ctl" not in t], new


class _SnapshotRun(_MariaRun):
    """Rows exist before capture starts: Debezium's snapshot reads them (op ``r``)."""

    def __init__(self, session: MariaDbScenarioSession, scenario: Scenario, before: list[Step]):
        super().__init__(session, scenario)
        self.before = before

    def create_tables(self) -> None:
        super().create_tables()
        for step in self.before:
            for _ in self.step(step):  # a step that observes first has the job catch up
                self.catch_up()


def test_snapshot_rows_and_a_table_created_later_join_the_target(session):
    """A shard with rows when capture starts is replicated from the snapshot; a shard
    table created afterwards joins its target; the oracle is the shards' own rows."""
    scenario = Scenario.model_validate(
        {
            "name": "snapshot then a new shard table",
            "mode": "optimistic",
            "target": "shop.orders",
            "shards": {
                "s1.db1.orders": "CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2))",
                "s2.db1.orders": "CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2))",
            },
            "steps": [
                {"shard": "s1.db1.orders", "insert": {"id": 4, "total": "4.40"}},
                {"shard": "s2.db1.orders", "update": {"key": {"id": 20}, "set": {"total": "2"}}},
                {
                    "shard": "s2.db1.orders_2",
                    "sql": "CREATE TABLE orders_2 (id INT PRIMARY KEY, total DECIMAL(10,2))",
                },
                {"shard": "s2.db1.orders_2", "insert": {"id": 30, "total": "30.00"}},
            ],
            "expect": {
                "rows": [
                    {"id": 1, "total": "1.10"},
                    {"id": 2, "total": "2.20"},
                    {"id": 3, "total": "3.30"},
                    {"id": 4, "total": "4.40"},
                    {"id": 20, "total": "2.00"},
                    {"id": 30, "total": "30.00"},
                ],
                "blocked": [],
                "error": None,
            },
        }
    )
    before = [
        Step(shard="s1.db1.orders", insert={"id": i, "total": f"{i}.{i}0"}) for i in (1, 2, 3)
    ] + [Step(shard="s2.db1.orders", insert={"id": 20, "total": "20.00"})]
    result = _SnapshotRun(session, scenario, before).run()
    assert result.output["failures"] == []
    assert result.output["oracle"] == "compared"
    assert len(result.output["rows"]) == 6
