"""The mariadb engine: scenario steps run as SQL on real MariaDB shards, Debezium's MariaDB
connector (Kafka Connect) captures them, and the real streaming job replicates them to
Delta.

Per file: every source's databases are dropped, the file's shard tables are created as
written, and one connector per source starts (``snapshot.mode=initial``) with a
per-file topic prefix, so files share the servers, the Connect worker, the broker and the
Spark session without sharing topics. Steps run on the shard's own server: DDL as
written, structured DML as INSERT/UPDATE/DELETE. Before the job runs (an expectation, an
operator step, the end), the engine waits until Debezium has captured everything
executed so far: it bumps a marker row on each source and waits for that change on the
marker's topic (the job does not subscribe to it).

Besides the file's expectations, the end state is checked against an **oracle read from
the shards themselves**: the union of ``SELECT *`` of every routed table, projected onto
the downstream columns (a column a shard lacks takes its default or NULL; extract columns
take the shard's names), over the rows that routed tables held when a step dropped them
(DROP TABLE, DROP DATABASE: those rows stay downstream). The oracle is compared unless the
file says the downstream differs from it on purpose (``_MariaRun.oracle_exemption``, the one
list: an expected error or open lock, an operator step that skips or replaces a DDL, a shard
table or column dropped while its rows stay downstream); an oracle the run leaves no way to
compare (no table, an error, an open lock the file does not expect) is a failure. The
result's ``oracle`` says which (``compared``, ``exempt: ...``, ``not compared: ...``), and
the tests assert it.

A step's statement runs in its shard's database when that exists, without a default
database otherwise (``CREATE DATABASE`` after a ``DROP DATABASE``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from coordinator.ids import ShardId
from coordinator.routing import Router, TableKind
from coordinator.scenario.model import Scenario, ScenarioFileError, Step
from coordinator.scenario.moving import CopyTool
from coordinator.scenario.observe import Observation, row_key
from coordinator.scenario.runner import ScenarioResult
from coordinator.scenario.upstream import RowEvent
from coordinator.scenario.values import downstream_value, fill_value
from devkit import ghost_binary
from devkit.scenario_spark import SparkScenarioSession, _Run, run_in_session
from schemas.model import quote
from shardmerge.errors import ShardMergeError
from streaming.config import ExtractSettings, RouteSettings

__all__ = ["MariaDbScenarioSession", "dml_sql", "run_mariadb_files"]

MARKER_DB = "shardmerge_ctl"
# How the connectors lay out their data topics (MariaDbScenarioSession's ``topics``).
TOPIC_LAYOUTS = ("per-shard", "per-table")
SYSTEM_DBS = {"information_schema", "mysql", "performance_schema", "sys"}
CAPTURE_TIMEOUT_S = 90.0


class MariaDbRefused(ShardMergeError):
    """A MariaDB server refused a step's statement."""


def dml_sql(table: str, step: Step) -> tuple[str, list[Any]]:
    """The SQL statement and parameters of a structured ``insert``/``update``/``delete``."""
    if step.insert is not None:
        cols = list(step.insert)
        marks = ", ".join(["%s"] * len(cols))
        names = ", ".join(quote(c) for c in cols)
        return f"INSERT INTO {quote(table)} ({names}) VALUES ({marks})", list(step.insert.values())
    if step.update is not None:
        sets = ", ".join(f"{quote(c)} = %s" for c in step.update.set)
        where = " AND ".join(f"{quote(c)} <=> %s" for c in step.update.key)
        params = [*step.update.set.values(), *step.update.key.values()]
        return f"UPDATE {quote(table)} SET {sets} WHERE {where}", params
    if step.delete is not None:
        where = " AND ".join(f"{quote(c)} <=> %s" for c in step.delete)
        return f"DELETE FROM {quote(table)} WHERE {where}", list(step.delete.values())
    raise ValueError(f"not a DML step: {step}")


def _names(scenario: Scenario) -> list[str]:
    """Every shard a file names: its tables, its steps' and its moves' sides."""
    moved = [name for m in scenario.moves for name in (*m.from_, m.to)]
    return [*scenario.shards, *(s.shard for s in scenario.steps if s.shard), *moved]


def scenario_sources(scenario: Scenario) -> list[str]:
    return sorted({ShardId.parse(n).source for n in _names(scenario)})


def scenario_dbs(scenario: Scenario) -> list[str]:
    return sorted({ShardId.parse(n).db for n in _names(scenario)})


def event_sql(e: RowEvent) -> tuple[str, list[Any]]:
    """The statement of a row change the upstream model made (the copy tool's): by the
    table's primary key (every column without one)."""
    table = quote(e.shard.table)
    if e.op == "insert":
        assert e.after is not None
        cols = list(e.after)
        names = ", ".join(quote(c) for c in cols)
        marks = ", ".join(["%s"] * len(cols))
        return f"INSERT INTO {table} ({names}) VALUES ({marks})", [e.after[c] for c in cols]
    assert e.before is not None
    key = list(e.schema.primary_key) if e.schema.primary_key else list(e.before)
    where = " AND ".join(f"{quote(c)} <=> %s" for c in key)
    lowered = {k.lower(): v for k, v in e.before.items()}
    params = [lowered[c.lower()] for c in key]
    if e.op == "delete":
        return f"DELETE FROM {table} WHERE {where}", params
    assert e.after is not None
    sets = ", ".join(f"{quote(c)} = %s" for c in e.after)
    return f"UPDATE {table} SET {sets} WHERE {where}", [*e.after.values(), *params]


def routing(topics: str) -> Any:
    """The connectors' routing for a topic layout (:data:`TOPIC_LAYOUTS`): None for
    ``per-shard``; for ``per-table``, one topic per source for every shard table (the
    marker tables keep theirs), four partitions, a shard's rows in one."""
    from devkit import upstream_local

    if topics not in TOPIC_LAYOUTS:
        raise ValueError(f"topics: {topics!r} is one of {', '.join(TOPIC_LAYOUTS)}")
    return upstream_local.Routed(exclude_db=MARKER_DB) if topics == "per-table" else None


class MariaDbScenarioSession(SparkScenarioSession):
    """One broker, one Spark session and one MariaDB + Debezium upstream for many files."""

    def __init__(
        self,
        workdir: str | Path | None = None,
        broker: Any = None,
        upstream: Any = None,
        sources: tuple[str, ...] = ("s1", "s2"),
        topics: str = "per-shard",
        connector: str | None = None,
    ) -> None:
        """``topics``: ``per-shard`` (Debezium's default, a topic per table) or
        ``per-table`` (one routed topic per source for all its shard tables, four
        partitions, a shard's rows in one: ``upstream_local.Routed``). ``connector``:
        the Debezium connector (``upstream_local.CONNECTOR_CLASSES``); by default
        ``SHARDMERGE_DEBEZIUM``, else ``upstream_local.ROUTED_CONNECTOR`` for ``per-table``
        (the one whose router keeps explicit NULLs) and MariaDB's own for ``per-shard``."""
        super().__init__(workdir, broker)
        from devkit import upstream_local

        self.routed = routing(topics)
        if connector is None and self.routed is not None:
            connector = os.environ.get("SHARDMERGE_DEBEZIUM") or upstream_local.ROUTED_CONNECTOR

        self.upstream = upstream or self._stack.enter_context(
            upstream_local.running(
                self.broker.bootstrap,
                sources=sources,
                name="scenarios",
                base_dir=self.workdir / "upstream",
                connector=connector,
            )
        )

    def run(self, scenario: Scenario, topics: str | None = None) -> ScenarioResult:
        """One file; ``topics`` overrides the session's topic layout for it."""
        run = _MariaRun(self, scenario)
        if topics is not None:
            run.routed = routing(topics)
        return run.run()


class _MariaRun(_Run):
    engine = "mariadb"

    def __init__(self, session: MariaDbScenarioSession, scenario: Scenario) -> None:
        super().__init__(session, scenario)
        self.up = session.upstream
        self.routed = session.routed  # the connectors' topic layout
        self.sources = scenario_sources(scenario)
        self.dbs = scenario_dbs(scenario)
        extract = ExtractSettings(**(scenario.extract.model_dump() if scenario.extract else {}))
        # Every topic of this file but the marker's and the schema history's.
        pattern = f"{self.run_id}_[^.]+(?<!-schemahistory)(\\.(?!{MARKER_DB}\\.).+)?"
        self.settings = self.job_settings(
            pattern,
            [RouteSettings(target=scenario.target, db=db, extract=extract) for db in self.dbs],
        )
        self.connectors: list[str] = []
        self.marker = 0
        self.consumer: Any = None
        self.seen_marker: dict[str, int] = {}
        self.last_ddl: tuple[str, float] | None = None
        # Rows of shard tables a step dropped, read just before the drop (see finish).
        self.dropped_rows: list[tuple[ShardId, dict[str, Any]]] = []
        # Real gh-ost migrations (SHARDMERGE_GH_OST), per shadow table: see create_tables.
        self.gh_ost = ghost_binary.binary()
        self.migrations: dict[ShardId, ghost_binary.GhostMigration] = {}
        # What finish did with the oracle: compared, exempt: why, not compared: why.
        self.oracle_outcome = "not compared: the run did not finish"

    # --- the upstream ------------------------------------------------------------------

    def server(self, source: str) -> Any:
        server = self.up.servers.get(source)
        if server is None:
            have = ", ".join(sorted(self.up.servers))
            raise ShardMergeError(
                f"{self.scenario.path}: source {source} has no MariaDB server (running: {have});"
                " start the upstream with it (--sources)"
            )
        return server

    def execute(self, shard: ShardId, sql: str, params: list[Any] | None = None) -> None:
        """Run one statement on the shard's server, in the shard's database when it exists
        (a step after ``DROP DATABASE`` may be the ``CREATE DATABASE`` that brings it back)."""
        import pymysql

        try:
            conn = self.server(shard.source).connect()
        except pymysql.MySQLError as e:
            raise MariaDbRefused(f"MariaDB {shard.source}: cannot connect: {e}") from e
        try:
            with conn.cursor() as cur:
                if self.database_exists(cur, shard.db):
                    cur.execute(f"USE {quote(shard.db)}")
                cur.execute(sql, params)
        except pymysql.MySQLError as e:
            raise MariaDbRefused(f"MariaDB {shard.source} ({shard.db}) refused {sql!r}: {e}") from e
        finally:
            conn.close()

    @staticmethod
    def database_exists(cur: Any, db: str) -> bool:
        cur.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", [db])
        return cur.fetchone() is not None

    def begin(self) -> None:
        if self.scenario.unseen:
            # Debezium's snapshot reads every captured table's CREATE: nothing here makes
            # the job miss one (list the file's engines without mariadb).
            raise ScenarioFileError(
                f"unseen {self.scenario.unseen}: the real upstream's snapshot shows every "
                "table; this file cannot run on the mariadb engine"
            )
        self.create_tables()
        self.start_capture()

    def create_tables(self) -> None:
        """A clean slate on each source, then the file's databases and shard tables."""
        for source in self.sources:
            conn = self.server(source).connect()
            try:
                with conn.cursor() as cur:
                    cur.execute("SHOW DATABASES")
                    for (db,) in cur.fetchall():
                        if db.lower() not in SYSTEM_DBS:
                            cur.execute(f"DROP DATABASE {quote(db)}")
                    cur.execute(f"CREATE DATABASE {quote(MARKER_DB)}")
                    cur.execute(
                        f"CREATE TABLE {quote(MARKER_DB)}.marker (id INT PRIMARY KEY, n BIGINT)"
                    )
                    cur.execute(f"INSERT INTO {quote(MARKER_DB)}.marker VALUES (1, 0)")
                    for db in self.dbs:
                        cur.execute(f"CREATE DATABASE {quote(db)}")
            finally:
                conn.close()
        from schemas.ddl import parse_create_table

        shadows: list[tuple[ShardId, ShardId]] = []  # (shadow, real) gh-ost makes
        for name, sql in self.scenario.shards.items():
            shard = ShardId.parse(name)
            self.upstream.create(shard, parse_create_table(sql))
            real = self.real_migration(shard)
            if real is not None:
                shadows.append((shard, real))  # made by gh-ost, below
            else:
                self.execute(shard, sql)
        for shadow, real in shadows:
            # A migration that began before the job: gh-ost makes and alters the shadow and
            # copies the rows before capture starts, then waits at its cut-over.
            from devkit.upstream_local import ADMIN

            assert self.gh_ost is not None
            migration = ghost_binary.GhostMigration(
                self.gh_ost,
                self.server(shadow.source),
                ADMIN,
                real,
                self.upstream.table(real).schema,
                self.upstream.table(shadow).schema,
                self.root / "gh-ost",
            )
            self.migrations[shadow] = migration
            migration.wait_copied()
            print(f"    gh-ost: {real} copied to {shadow.table} ({migration.alter}); "
                  "waiting at its cut-over", file=sys.stderr)  # fmt: skip

    def real_migration(self, shard: ShardId) -> ShardId | None:
        """With a gh-ost binary: the real table of a shadow the file lists at the start
        beside it, which a real gh-ost run makes; else None."""
        origin = Router.shadow_origin(shard.table)
        if self.gh_ost is None or origin is None:
            return None
        real = shard.with_table(origin)
        return real if str(real) in self.scenario.shards else None

    def start_capture(self) -> None:
        """One connector per source; rows already in the tables arrive as a snapshot."""
        self.subscribe_markers()
        for source in self.sources:
            self.connectors.append(
                self.up.add_connector(
                    source,
                    run_prefix=f"{self.run_id}_",
                    bootstrap=self.s.broker.bootstrap,
                    routed=self.routed,
                )
            )

    def step(self, step: Step) -> Iterator[None]:
        if step.kind in ("operator", "expect", "copy", "freeze", "switch"):
            yield from super().step(step)
            return
        shard = ShardId.parse(step.shard or "")
        self.space(shard.source)
        if shard in self.migrations and step.kind != "sql":
            # gh-ost copies the real table's rows and follows its binlog: the file's
            # rows of the shadow are what it writes (kept in the upstream model only)
            self.upstream.step(shard, step)
            return
        cut = self.cut_over_of(shard, step)
        if cut is not None:
            assert step.sql is not None
            self.upstream.ddl(shard, step.sql)
            self.migrations.pop(cut).cut_over()
            print(f"    gh-ost: {shard} cut over", file=sys.stderr)
            self.last_ddl = (shard.source, time.time())
            return
        if step.kind == "sql":
            assert step.sql is not None
            self.upstream.ddl(shard, step.sql)
            self.keep_dropped_rows(shard, step.sql)
            self.execute(shard, step.sql)
            self.last_ddl = (shard.source, time.time())
        else:
            self.upstream.step(shard, step)  # an impossible step is an invalid file
            self.execute(shard, *dml_sql(shard.table, step))

    def copy_tool(self) -> CopyTool:
        """The copy tool of a move as SQL on the servers (its tables, copied rows and
        marker rows), as a real one runs it; Debezium captures it like any change."""

        def sql(shard: ShardId, text: str) -> None:
            self.space(shard.source)
            self.execute(shard, text)
            self.last_ddl = (shard.source, time.time())

        def row(event: RowEvent) -> None:
            self.space(event.shard.source)
            self.execute(event.shard, *event_sql(event))

        return CopyTool(self.upstream, sql, row, self.names.tag, self.scenario.heartbeats)

    def cut_over_of(self, shard: ShardId, step: Step) -> ShardId | None:
        """The shadow of a real gh-ost migration whose cut-over RENAME ``step`` is."""
        if step.kind != "sql" or not step.sql:
            return None
        from schemas.changes import RenameTable
        from schemas.ddl import parse_ddl
        from schemas.errors import DDLError

        try:
            changes = parse_ddl(step.sql)
        except DDLError:
            return None
        for change in changes:
            if isinstance(change, RenameTable):
                old = ShardId(shard.source, change.old.db or shard.db, change.old.table)
                if old in self.migrations:
                    return old
        return None

    def space(self, source: str) -> None:
        """MariaDB's binlog stamps events in whole seconds, and across sources the job can
        only go by that time: an event of another source in the same second as a DDL could
        be taken for one before it. A step on another source than the last DDL's waits for
        the next second, so that the file's order is the order the job sees."""
        now = time.time()
        last = self.last_ddl
        if last is not None and last[0] != source and int(now) == int(last[1]):
            time.sleep(int(now) + 1.02 - now)

    # --- waiting for Debezium -----------------------------------------------------------

    def marker_topic(self, source: str) -> str:
        return f"{self.run_id}_{source}.{MARKER_DB}.marker"

    def subscribe_markers(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.s.broker.bootstrap})
        topics = [self.marker_topic(s) for s in self.sources]
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            future.result(30)
        self.consumer = Consumer(
            {
                "bootstrap.servers": self.s.broker.bootstrap,
                "group.id": f"shardmerge-markers-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            }
        )
        self.consumer.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])

    def wait_captured(self) -> None:
        """Return once Debezium has put every statement executed so far on Kafka."""
        self.marker += 1
        for source in self.sources:
            self.execute(
                ShardId(source, MARKER_DB, "marker"),
                "UPDATE marker SET n = %s WHERE id = 1",
                [self.marker],
            )
        deadline = time.monotonic() + CAPTURE_TIMEOUT_S
        while any(self.seen_marker.get(s, -1) < self.marker for s in self.sources):
            if time.monotonic() > deadline:
                late = [s for s in self.sources if self.seen_marker.get(s, -1) < self.marker]
                raise ShardMergeError(
                    f"Debezium did not capture source(s) {', '.join(late)} within "
                    f"{CAPTURE_TIMEOUT_S:.0f} s; see the Connect log {self.up.connect_log}"
                )
            msg = self.consumer.poll(0.5)
            if msg is None or msg.error() or msg.value() is None:
                continue
            source = msg.topic()[len(self.run_id) + 1 :].split(".", 1)[0]
            value = json.loads(msg.value())
            after = (value.get("payload", value) or {}).get("after") or {}
            self.seen_marker[source] = max(self.seen_marker.get(source, -1), int(after["n"]))

    def catch_up(self) -> None:
        if self.error is None:
            self.wait_captured()
        super().catch_up()

    # --- the end ---------------------------------------------------------------------------

    def run(self) -> ScenarioResult:
        try:
            return super().run()
        finally:
            for migration in self.migrations.values():
                migration.stop()
            for name in self.connectors:
                try:
                    self.up.remove_connector(name)
                except Exception as e:  # cleanup goes on
                    print(f"    could not remove connector {name}: {e}", file=sys.stderr)
            if self.consumer is not None:
                self.consumer.close()

    def finish(self, seen: Observation) -> list[str]:
        """Compare the end state with the oracle; ``oracle`` in the output says whether it
        was (``compared``), why the file exempts it (``exempt: ...``), or why it could not
        be (``not compared: ...``, a failure)."""
        exempt = self.oracle_exemption(seen)
        if exempt:
            self.oracle_outcome = f"exempt: {exempt}"
            print(f"    oracle not compared: {exempt}", file=sys.stderr)
            return []
        unreachable = self.oracle_unreachable(seen)
        if unreachable:
            self.oracle_outcome = f"not compared: {unreachable}"
            return [
                f"oracle not compared: {unreachable}, which the file does not expect "
                "(the reasons a file may exempt its oracle: _MariaRun.oracle_exemption)"
            ]
        assert seen.schema is not None
        self.oracle_outcome = "compared"
        want = Counter(row_key(r) for r in self.oracle(seen))
        got = Counter(row_key(r) for r in seen.rows)
        if want == got:
            print(f"    oracle: the {len(seen.rows)} downstream rows equal the shards' own rows",
                  file=sys.stderr)  # fmt: skip
            return []
        missing = sorted((want - got).elements())
        extra = sorted((got - want).elements())
        return [f"oracle (the shards' own rows) differs; missing {missing}, unexpected {extra}"]

    def finish_output(self) -> dict[str, Any]:
        return {"oracle": self.oracle_outcome}

    def oracle_exemption(self, seen: Observation) -> str | None:
        """Why the file's end state differs from the shards' own rows on purpose, or None.

        The one list of reasons the oracle comparison may be left out. Each follows from
        the file (what it expects, its operator steps, its DROPs), never from the run
        alone: a run that ends without a table, with an error or with a lock open where
        its file expects none is a failure (``oracle_unreachable``), not a skip.
        """
        expect = self.scenario.expect
        if expect is not None and expect.error is not None:
            return "the file expects the run to stop with an error"
        if expect is not None and (
            expect.blocked or any(stage != "none" for stage in (expect.locks or {}).values())
        ):
            return "the file expects a lock open at the end (held rows are not downstream)"
        if any(step.operator for step in self.scenario.steps):
            return "an operator step changed what reaches the downstream"
        if seen.schema is None:
            return None
        extract = self.scenario.extract.model_dump() if self.scenario.extract else {}
        data = {c.key for c in seen.schema.columns} - {(n or "").lower() for n in extract.values()}
        differ = sorted({str(s) for s, row in self.dropped_rows if set(row) != data})
        if differ:
            return (
                f"shard table(s) {', '.join(differ)} were dropped with other columns than "
                "the downstream's (their rows stay downstream as they were written)"
            )
        kept = [c for c in self.dropped_columns() if seen.schema.has_column(c)]
        if kept:
            return (
                f"column(s) {', '.join(kept)} dropped on a shard stay downstream with the "
                "values the shard had (a DROP COLUMN waits for the last shard)"
            )
        return None

    @staticmethod
    def oracle_unreachable(seen: Observation) -> str | None:
        """What in the run's end state keeps the oracle from being compared, or None."""
        if seen.schema is None:
            return "no downstream table"
        if seen.error is not None:
            return f"the run stopped with an error ({seen.error})"
        if any(lock["stage"] != "none" or lock["blocked"] for lock in seen.locks):
            return "a lock is open"
        return None

    def step_changes(self) -> Iterator[tuple[ShardId, Any]]:
        """Every schema change of the file's DDL steps, with the step's shard."""
        from schemas.ddl import parse_ddl
        from schemas.errors import DDLError

        for step in self.scenario.steps:
            if not step.sql or not step.shard:
                continue
            try:
                changes = parse_ddl(step.sql)
            except DDLError:
                continue
            for change in changes:
                yield ShardId.parse(step.shard), change

    def keep_dropped_rows(self, at: ShardId, sql: str) -> None:
        """Before a DROP TABLE or DROP DATABASE runs, read the rows of the routed shard
        tables it drops: they stay downstream, so the oracle counts them."""
        from schemas.changes import DropDatabase, DropTable
        from schemas.ddl import parse_ddl
        from schemas.errors import DDLError

        try:
            changes = parse_ddl(sql)
        except DDLError:
            return  # a statement the parser cannot read drops nothing the job knows of
        for change in changes:
            if isinstance(change, DropDatabase):
                self.dropped_rows += self.read_rows(at.source, [change.name])
            elif isinstance(change, DropTable):
                db, table = change.table.db or at.db, change.table.table.lower()
                rows = self.read_rows(at.source, [db])
                self.dropped_rows += [(s, r) for s, r in rows if s.table.lower() == table]

    def dropped_columns(self) -> list[str]:
        from schemas.changes import AlterTable, DropColumn

        return [
            spec.name
            for _, change in self.step_changes()
            if isinstance(change, AlterTable)
            for spec in change.specs
            if isinstance(spec, DropColumn)
        ]

    def tables_of(self, source: str, dbs: list[str]) -> list[tuple[str, str]]:
        """``(db, table)`` of every table in ``dbs`` on ``source`` (a dropped database has
        none)."""
        conn = self.server(source).connect()
        try:
            with conn.cursor() as cur:
                out = []
                for db in dbs:
                    cur.execute("SELECT table_name FROM information_schema.tables "
                                "WHERE table_schema = %s", [db])  # fmt: skip
                    out += [(db, table) for (table,) in cur.fetchall()]
                return out
        finally:
            conn.close()

    def read_rows(self, source: str, dbs: list[str]) -> list[tuple[ShardId, dict[str, Any]]]:
        """Every row of the routed shard tables of ``dbs`` on ``source``, as it is now."""
        router = self.settings.router()
        rows: list[tuple[ShardId, dict[str, Any]]] = []
        tables = self.tables_of(source, dbs)
        conn = self.server(source).connect()
        try:
            with conn.cursor() as cur:
                for db, table in tables:
                    shard = ShardId(source, db, table)
                    if router.kind(shard) is not TableKind.SHARD or not router.route(shard):
                        continue
                    cur.execute(f"SELECT * FROM {quote(db)}.{quote(table)}")
                    cols = [d[0].lower() for d in cur.description]
                    rows += [(shard, dict(zip(cols, v, strict=True))) for v in cur.fetchall()]
        finally:
            conn.close()
        return rows

    def oracle(self, seen: Observation) -> list[dict[str, Any]]:
        """The shards' own rows, projected onto the downstream columns, over the rows of
        the shard tables dropped on the way (those stay downstream; a row of a table now
        replaces a dropped one with the same key, as the MERGE does)."""
        assert seen.schema is not None
        extract = self.scenario.extract
        names = {
            getattr(extract, f): f for f in ("source_column", "db_column", "table_column")
        } if extract else {}  # fmt: skip
        now = self.moved([r for source in self.sources for r in self.read_rows(source, self.dbs)],
                         seen)  # fmt: skip
        key = list(seen.schema.primary_key)
        rows: dict[Any, dict[str, Any]] = {}
        for i, (shard, row) in enumerate([*self.dropped_rows, *now]):
            out = self.project(row, shard, seen, names)
            rows[tuple(repr(out.get(k)) for k in key) if key else i] = out
        return list(rows.values())

    def moved(
        self, rows: list[tuple[ShardId, dict[str, Any]]], seen: Observation
    ) -> list[tuple[ShardId, dict[str, Any]]]:
        """The rows of the target's home tables: no marker table's; a move's ``to`` is no
        home before its switch (its rows are the copy); after it, ``from``'s rows of the
        moved keys are leftovers the copy tool has not cleaned up yet (their home is
        ``to``)."""
        moves = [m.move() for m in self.scenario.moves]
        out = []
        for shard, row in rows:
            if any(shard.table == m.marker for m in moves):
                continue
            home = True
            for m in moves:
                switched = seen.moves.get(m.id) == "switched"
                if shard == m.to and not switched:
                    home = False
                if shard in m.sources and switched and m.moves_row(row):
                    home = False
            if home:
                out.append((shard, row))
        return out

    @staticmethod
    def project(
        row: dict[str, Any], shard: ShardId, seen: Observation, extract: dict[str | None, str]
    ) -> dict[str, Any]:
        assert seen.schema is not None
        out = {}
        for col in seen.schema.columns:
            kind = extract.get(col.name)
            if kind is not None:
                out[col.name] = {
                    "source_column": shard.source,
                    "db_column": shard.db,
                    "table_column": shard.table,
                }[kind]
            elif col.key in row:
                out[col.name] = downstream_value(col, row[col.key])  # a zero date: NULL
            else:
                out[col.name] = fill_value(col)
        return out


def run_mariadb_files(
    scenarios: list[Scenario], topics: str = "per-shard"
) -> Iterator[ScenarioResult]:
    sources = sorted({s for scenario in scenarios for s in scenario_sources(scenario)})
    with MariaDbScenarioSession(sources=tuple(sources) or ("s1",), topics=topics) as session:
        yield from run_in_session(session, scenarios, "mariadb")
