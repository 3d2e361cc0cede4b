"""The Sink port's contract (``streaming/storage/sink.py``): what every sink the job writes targets
in must do, run against each implementation (Delta today). A new sink joins ``SINKS`` and
passes these as they are.

Each test makes a table of its own (a target per test), so the tests share one session.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from coordinator.decisions import ApplyDDL, CreateTarget
from coordinator.ids import TargetId
from schemas.ddl import parse_create_table, parse_ddl
from schemas.model import ColumnType
from streaming.sql.quoting import ident
from streaming.storage.sink import Sink, apply_downstream

pytestmark = pytest.mark.spark

# A hostile name: the contract holds for any identifier upstream may send.
ODD = "a`b'c;--"
CREATE = f"CREATE TABLE t (id INT NOT NULL, `{ODD.replace('`', '``')}` VARCHAR(20), src VARCHAR(8), PRIMARY KEY (id))"


def delta(spark: Any, root: Path) -> tuple[Sink, Callable[[TargetId], list[dict[str, Any]]]]:
    from streaming.storage.delta_sink import DeltaSink

    def locate(t: TargetId) -> str:
        return f"file://{root}/{t.db}/{t.table}"

    def rows(t: TargetId) -> list[dict[str, Any]]:
        got = spark.read.format("delta").load(locate(t)).collect()
        return sorted((r.asDict() for r in got), key=lambda r: r["id"])

    return DeltaSink(spark, "contract-app", locate), rows


def _jdbc(spark: Any, url: str, dialect: str, user: str, password: str, tag: str) -> Any:
    from streaming.storage.jdbc_sink import JdbcSink

    sink = JdbcSink(spark, "contract-app", url, dialect, user, password)  # type: ignore[arg-type]
    sink.meta = f"shardmerge_{tag}"

    def rows(t: TargetId) -> list[dict[str, Any]]:
        got = sink.read(t).collect()
        return sorted((r.asDict() for r in got), key=lambda r: r["id"])

    return sink, rows


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from devkit import downstream_local, upstream_local

    with downstream_local.mariadb(tmp_path_factory.mktemp("sink-mariadb")) as server:
        yield f"jdbc:mariadb://127.0.0.1:{server.port}/", *upstream_local.ADMIN


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from devkit import downstream_local

    with downstream_local.postgresql(tmp_path_factory.mktemp("sink-pg")) as server:
        yield f"jdbc:postgresql://127.0.0.1:{server.port}/postgres", "postgres", ""


SINKS = ["delta", "mariadb", "postgresql"]


@pytest.fixture(params=SINKS)
def made(request: pytest.FixtureRequest, spark: Any, tmp_path: Path) -> Any:
    tag = tmp_path.name.replace("-", "_").lower()[-40:]
    if request.param == "delta":
        return delta(spark, tmp_path)
    if request.param == "mariadb":
        url, user, password = request.getfixturevalue("mariadb")
        return _jdbc(spark, url, "mariadb", user, password, tag)
    url, user, password = request.getfixturevalue("postgres")
    return _jdbc(spark, url, "postgresql", user, password, tag)


def create(target: TargetId) -> CreateTarget:
    return CreateTarget(target, parse_create_table(CREATE), CREATE, "the first shard's CREATE")


def alter(target: TargetId, sql: str, after: str) -> ApplyDDL:
    (change,) = parse_ddl(sql)
    return ApplyDDL(target, change.specs, parse_create_table(after), sql, "every shard ran it")


def frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, f"id int, {ident(ODD)} string, src string, _action string")


def test_create_is_idempotent_and_history_names_its_cause(made: Any) -> None:
    sink, _ = made
    t = TargetId("shop", "created")
    for _ in range(2):
        assert apply_downstream(sink, create(t), itertools.count(1).__next__, rewrite=False).applied
    assert set(sink.columns(t)) == {"id", ODD.lower(), "src"}
    history = sink.history(t, 10)
    assert len(history) == 1  # the second create changed nothing
    assert history[0]["cause"]["statement"] == CREATE
    assert history[0]["cause"]["reason"] == "the first shard's CREATE"


def test_a_change_is_applied_once_and_one_it_cannot_make_is_refused_with_advice(
    made: Any,
) -> None:
    sink, _ = made
    t = TargetId("shop", "altered")
    apply_downstream(sink, create(t), itertools.count(1).__next__, rewrite=False)
    add_sql = "ALTER TABLE t ADD COLUMN note INT"
    after = CREATE.replace(", PRIMARY KEY", ", note INT, PRIMARY KEY")
    add = alter(t, add_sql, after)
    for _ in range(2):  # a batch run again
        assert apply_downstream(sink, add, itertools.count(1).__next__, rewrite=False).applied
    assert sink.columns(t)["note"] and len(sink.history(t, 10)) == 2
    assert sink.history(t, 10)[0]["cause"]["statement"] == add_sql
    # VARCHAR -> INT: no sink narrows a text column in place
    narrow = alter(t, "ALTER TABLE t MODIFY src INT", after.replace("src VARCHAR(8)", "src INT"))
    change = apply_downstream(sink, narrow, itertools.count(100).__next__, rewrite=False)
    assert not change.applied
    assert "MODIFY src INT" in change.advice and "shardmerge unlock shop.altered --retry" in (
        change.advice
    )
    assert "INT" not in sink.columns(t)["src"]  # the table is as it was
    assert len(sink.history(t, 10)) == 2


def test_rows_merged_under_a_slot_are_written_once(made: Any, spark: Any) -> None:
    sink, rows = made
    t = TargetId("shop", "merged")
    apply_downstream(sink, create(t), itertools.count(1).__next__, rewrite=False)
    assert sink.last_slot(t) is None
    cols = ["id", ODD, "src"]
    batch = frame(spark, [(1, "x'1", "s1", "u"), (2, "y", "s1", "u"), (3, "z", "s2", "u")])
    assert sink.merge(t, batch, ["id"], cols, 5) == {"inserted": 3, "updated": 0, "deleted": 0}
    # the same slot again (the batch run again): skipped, whatever its rows
    again = frame(spark, [(1, "changed", "s1", "u"), (2, None, "s1", "d")])
    # (its rows not even read: the batch does not wait for what reading them reports)
    skipped = {"inserted": 0, "updated": 0, "deleted": 0, "skipped": 1}
    assert sink.merge(t, again, ["id"], cols, 5) == skipped
    assert sink.last_slot(t) == 5
    assert [r[ODD] for r in rows(t)] == ["x'1", "y", "z"]
    # the next slot: an update and a delete
    assert sink.merge(t, again, ["id"], cols, 6) == {"inserted": 0, "updated": 1, "deleted": 1}
    assert [(r["id"], r[ODD]) for r in rows(t)] == [(1, "changed"), (3, "z")]
    assert sink.last_slot(t) == 6


def test_a_shards_rows_are_truncated_and_rehomed_by_their_values(made: Any, spark: Any) -> None:
    sink, rows = made
    t = TargetId("shop", "moved")
    apply_downstream(sink, create(t), itertools.count(1).__next__, rewrite=False)
    batch = frame(spark, [(1, "a", "s1", "u"), (2, "b", "s1", "u"), (3, "c", "s'2", "u")])
    sink.merge(t, batch, ["id"], ["id", ODD, "src"], 1)
    assert sink.rehome(t, (("src", "s1"),), (("src", "s9"),), 2, where="id = 2") == 1
    assert sink.rehome(t, (("src", "s1"),), (("src", "s9"),), 2) == 0  # slot 2 done
    assert [r["src"] for r in rows(t)] == ["s1", "s9", "s'2"]
    assert sink.truncate(t, [(("src", "s'2"),)], 3) == 1
    assert sink.truncate(t, [(("src", "s'2"),)], 3) == 0  # slot 3 done
    assert [r["id"] for r in rows(t)] == [1, 2]
    assert sink.truncate(t, [()], 4) == 2  # an empty match: every row
    assert rows(t) == []


def test_the_type_changes_a_sink_makes_in_place(made: Any) -> None:
    sink, _ = made
    assert sink.in_place(ColumnType("INT"), ColumnType("BIGINT"))
    assert sink.in_place(ColumnType("VARCHAR", 8), ColumnType("VARCHAR", 20))
    assert not sink.in_place(ColumnType("BIGINT"), ColumnType("INT"))
    assert not sink.in_place(ColumnType("VARCHAR", 8), ColumnType("INT"))


@pytest.mark.parametrize("dialect", ["mariadb", "postgresql"])
def test_a_jdbc_batch_killed_after_staging_writes_its_rows_once_when_run_again(
    request: pytest.FixtureRequest, spark: Any, tmp_path: Path, dialect: str
) -> None:
    """The database sink's own window (streaming/storage/jdbc_sink.py): the executors
    staged a batch's rows, the driver died before the transaction. The batch run again
    stages again (the staging table emptied first) and commits once."""
    url, user, password = request.getfixturevalue("mariadb" if dialect == "mariadb" else "postgres")
    sink, rows = _jdbc(spark, url, dialect, user, password, "killed_" + dialect[:2])
    t = TargetId("shop", "staged")
    apply_downstream(sink, create(t), itertools.count(1).__next__, rewrite=False)
    cols = ["id", ODD, "src"]
    first = frame(spark, [(1, "a", "s1", "u"), (2, "b", "s1", "u"), (9, "ghost", "s1", "u")])
    with sink._connection() as conn:  # the run that died: staged, never applied
        sink._stage(conn, t, first, cols, ["id"])
    assert rows(t) == [] and sink.last_slot(t) is None
    again = frame(spark, [(1, "a", "s1", "u"), (2, "b", "s1", "u")])  # what the re-run reads
    assert sink.merge(t, again, ["id"], cols, 7) == {"inserted": 2, "updated": 0, "deleted": 0}
    assert sink.merge(t, again, ["id"], cols, 7) == {
        "inserted": 0, "updated": 0, "deleted": 0, "skipped": 1,
    }  # fmt: skip
    assert [r["id"] for r in rows(t)] == [1, 2]


@pytest.mark.parametrize("dialect", ["mariadb", "postgresql"])
def test_a_jdbc_narrowing_a_row_does_not_fit_is_refused_and_changes_nothing(
    request: pytest.FixtureRequest, spark: Any, dialect: str
) -> None:
    """A narrowing within one kind is left to the database, which checks every row: one
    that does not fit makes it a refusal with advice (SQLSTATE class 22), never a cut."""
    url, user, password = request.getfixturevalue("mariadb" if dialect == "mariadb" else "postgres")
    sink, rows = _jdbc(spark, url, dialect, user, password, "narrow_" + dialect[:2])
    t = TargetId("shop", "narrowed")
    apply_downstream(sink, create(t), itertools.count(1).__next__, rewrite=False)
    sink.merge(t, frame(spark, [(1, "ten chars!", "s1", "u")]), ["id"],
               ["id", ODD, "src"], 1)  # fmt: skip
    odd = ODD.replace("`", "``")
    narrow = alter(
        t, f"ALTER TABLE t MODIFY `{odd}` VARCHAR(3)", CREATE.replace("VARCHAR(20)", "VARCHAR(3)")
    )
    change = apply_downstream(sink, narrow, itertools.count(10).__next__, rewrite=False)
    assert not change.applied and "does not fit" in change.advice
    assert [r[ODD] for r in rows(t)] == ["ten chars!"]
    assert len(sink.history(t, 10)) == 1


@pytest.mark.parametrize("dialect", ["mariadb", "postgresql"])
def test_a_jdbc_change_whose_history_row_was_lost_is_recorded_when_run_again(
    request: pytest.FixtureRequest, spark: Any, dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MySQL and MariaDB commit a DDL on its own: a run that dies between a change and its
    history row leaves the change made and unrecorded. The batch run again makes nothing
    twice and records what it finds made (PostgreSQL rolls both back: made again once)."""
    from streaming.storage.jdbc_sink import JdbcSink

    url, user, password = request.getfixturevalue("mariadb" if dialect == "mariadb" else "postgres")
    sink, _ = _jdbc(spark, url, dialect, user, password, "lost_" + dialect[:2])
    t = TargetId("shop", "unrecorded")
    record = JdbcSink._record

    def dies(*args: Any) -> None:
        raise RuntimeError("killed before the history row")

    after = CREATE.replace(", PRIMARY KEY", ", note INT, PRIMARY KEY")
    add = alter(t, "ALTER TABLE t ADD COLUMN note INT", after)
    for decision in (create(t), add):
        monkeypatch.setattr(JdbcSink, "_record", dies)
        with pytest.raises(RuntimeError, match="killed before the history row"):
            apply_downstream(sink, decision, itertools.count(1).__next__, rewrite=False)
        monkeypatch.setattr(JdbcSink, "_record", record)
        assert apply_downstream(sink, decision, itertools.count(1).__next__, rewrite=False).applied
        assert apply_downstream(sink, decision, itertools.count(1).__next__, rewrite=False).applied
    assert "note" in sink.columns(t)
    history = sink.history(t, 10)
    assert [h["operation"] for h in history] == ["ALTER TABLE", "CREATE TABLE"]


@pytest.mark.parametrize("dialect", ["mariadb", "postgresql"])
def test_a_jdbc_merge_of_a_column_the_recorded_schema_lacks_names_it(
    request: pytest.FixtureRequest, spark: Any, dialect: str
) -> None:
    """A table another job made (or one changed outside this job) lacks a column this job
    writes: the merge is refused with the column's name and writes nothing."""
    from streaming.storage.sink import SinkError

    url, user, password = request.getfixturevalue("mariadb" if dialect == "mariadb" else "postgres")
    sink, rows = _jdbc(spark, url, dialect, user, password, "foreign_" + dialect[:2])
    t = TargetId("shop", "foreign")
    apply_downstream(sink, create(t), itertools.count(1).__next__, rewrite=False)
    batch = spark.createDataFrame(
        [(1, "x", "s1", 7, "u")],
        f"id int, {ident(ODD)} string, src string, extra int, _action string",
    )
    with pytest.raises(SinkError, match=r"column\(s\) \['extra'\] that the schema recorded"):
        sink.merge(t, batch, ["id"], ["id", ODD, "src", "extra"], 1)
    assert rows(t) == [] and sink.last_slot(t) is None


TIMES = "CREATE TABLE t (id INT NOT NULL, at TIME(6), PRIMARY KEY (id))"


def test_a_time_reads_back_as_the_count_debezium_sends(made: Any, spark: Any) -> None:
    """Debezium's TIME, a count of microseconds, is kept as that text (on Delta, a STRING)
    and reads back as it from every sink; a database stores the time it names (MariaDB's
    TIME, PostgreSQL's INTERVAL), which refuses the count as written. Canal's and
    Maxwell's text (``10:00:00.5``) is stored as the time it names too."""
    sink, rows = made
    t = TargetId("shop", "times")
    create = CreateTarget(t, parse_create_table(TIMES), TIMES, "the first shard's CREATE")
    apply_downstream(sink, create, itertools.count(1).__next__, rewrite=False)
    # 10:00:00.5, MySQL's first and last TIME, a microsecond before midnight, midnight
    counts = ["36000500000", "-3020399999999", "3020399999999", "-1", "0", None]
    batch = spark.createDataFrame(
        [(i, c, "u") for i, c in enumerate(counts)], "id int, at string, _action string"
    )
    assert sink.merge(t, batch, ["id"], ["id", "at"], 1)["inserted"] == len(counts)
    assert [r["at"] for r in rows(t)] == counts
    if type(sink).__name__ == "JdbcSink":
        text = spark.createDataFrame([(9, "-10:00:00.5", "u")], "id int, at string, _action string")
        sink.merge(t, text, ["id"], ["id", "at"], 2)
        assert [r["at"] for r in rows(t)][-1] == "-36000500000"
