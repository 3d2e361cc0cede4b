"""The spark engine: scenario steps become Debezium JSON on a real Kafka broker, the real
streaming job runs with ``Trigger.AvailableNow`` whenever the file asks for an observation
or an operator acts, and the downstream is a real Delta table.

Each file gets its own topics (a run prefix before the connector's topic names), Delta
tables and checkpoint, so several files share one broker and one Spark session; source
names stay the file's own (``s1``), as Debezium's ``source.name``.

Files can also run **side by side in one streaming query** (:meth:`SparkScenarioSession.
run_together`): part of a micro-batch's cost is the same for one target as for several
(the query's start, the Kafka read and decode, the stash and the state file), so files
that share a query pay it once per round instead of once each; each target still adds
its own MERGE and DDL (docs/benchmarks.md). Each file still sees exactly the batches it would
see alone: the files advance in rounds, each to its next observation point, then one
``AvailableNow`` query reads everything produced, which is each file's events since its
previous point. What tells the files apart in the shared job: each file's sources and
target get a prefix of their own (``m003_s1``, ``m003_shardddl.tb``: a route per file),
taken off again in everything observed (locks, shards, errors, extracted source names).
A file whose run is meant to stop the job (a strict target, an expected error) runs
alone: the stop ends the query for every file in it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import shlex
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from coordinator.commands import parse_command
from coordinator.ids import ShardId, TargetId
from coordinator.moves import MoveCommand, MoveSettings, parse_move_command
from coordinator.scenario.model import Scenario, Step
from coordinator.scenario.moving import CopyTool
from coordinator.scenario.observe import Observation, SeenDeadLetter, check, sorted_rows
from coordinator.scenario.runner import ScenarioResult, run_memory, skipped
from coordinator.scenario.upstream import RowEvent, Upstream, UpstreamError
from coordinator.scenario.values import bit_number
from coordinator.state import restore
from schemas.ddl import parse_create_table
from shardmerge.errors import ShardMergeError
from streaming.config import (
    ExtractSettings,
    KafkaSettings,
    RouteSettings,
    Settings,
    SinkSettings,
    SourceSettings,
    TargetSettings,
)
from streaming.storage.state_store import StateStore

__all__ = ["GROUP_SIZE", "SparkScenarioSession", "rounds", "shares_query"]

# Files per shared query: more share more of each batch's cost; every file of a group stops
# if the query does (an unexpected error), and each holds its producers open meanwhile.
GROUP_SIZE = 24


class SparkScenarioSession:
    """One broker and one SparkSession for any number of scenario files."""

    def __init__(
        self,
        workdir: str | Path | None = None,
        broker: Any = None,
        sink: dict[str, Any] | None = None,
    ) -> None:
        """``sink``: the targets' sink settings beyond ``path`` (``kind: jdbc``, ``url``,
        ``dialect``, ``user``, ``password``); None: Delta."""
        self.sink = dict(sink or {})
        # What the targets are written to, as scenario files name it (their `sinks:`).
        self.sink_kind: str = self.sink.get("dialect") or "delta"
        self._stack = contextlib.ExitStack()
        self.workdir = Path(workdir or self._stack.enter_context(tempfile.TemporaryDirectory()))
        from devkit import kafka_local
        from streaming.runtime.spark_session import MANY_TABLES_CONF, build_spark

        self.broker = broker or self._stack.enter_context(
            kafka_local.running("scenarios", self.workdir / "kafka")
        )
        self.spark = build_spark("shardmerge-scenarios", extra_conf=MANY_TABLES_CONF)

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> SparkScenarioSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fresh_downstream(self) -> None:
        """A database sink's server emptied before a file or group runs (targets' names
        repeat from run to run; on Delta each run has a lake of its own)."""
        if self.sink.get("kind") == "jdbc":
            from devkit import downstream_local

            downstream_local.empty(self.sink)

    def run(self, scenario: Scenario) -> ScenarioResult:
        """One file alone: its own topics, checkpoint and Delta tables."""
        self.fresh_downstream()
        return _Run(self, scenario).run()

    def run_together(self, scenarios: list[Scenario]) -> list[ScenarioResult]:
        """Files side by side in one streaming query (see the module docstring), results
        in the order given. A file whose steps fail the engine (a client error, a bug) is
        that file's failed result; the others go on. Files that must run alone
        (:func:`shares_query`) are refused."""
        alone = [s.name for s in scenarios if not shares_query(s, self.sink_kind)]
        if alone:
            raise ValueError(f"files that stop the job run alone, not together: {alone}")
        self.fresh_downstream()
        return _Group(self, scenarios).run()

    def run_files(
        self, scenarios: Iterable[Scenario], engine: str = "spark"
    ) -> Iterator[ScenarioResult]:
        """Each file's result in the order given: files that may share a query run in
        groups of up to :data:`GROUP_SIZE` (as even as they can be), the others alone. A
        group runs as many rounds as its file with the most observation points, so files
        are grouped by that count (:func:`rounds`); a group runs when the first of its
        files is due."""
        todo = list(scenarios)
        kind = self.sink_kind
        shared = [
            i for i, s in enumerate(todo) if s.runs_on(engine, kind) and shares_query(s, kind)
        ]
        shared.sort(key=lambda i: (rounds(todo[i]), i))
        group_of: dict[int, list[int]] = {}
        size = -(-len(shared) // -(-len(shared) // GROUP_SIZE)) if shared else 1  # even
        for k in range(0, len(shared), size):
            group = sorted(shared[k : k + size])
            group_of.update(dict.fromkeys(group, group))
        done: dict[int, ScenarioResult] = {}
        for i, scenario in enumerate(todo):
            if i in done:
                pass
            elif not scenario.runs_on(engine, kind):
                done[i] = skipped(scenario, engine, kind)
            elif i not in group_of:
                done[i] = _guarded(engine, scenario, functools.partial(self.run, scenario))
            else:
                group = group_of[i]
                results = _guarded_group(engine, [todo[j] for j in group], self)
                done.update(zip(group, results, strict=True))
                # The group's frames sit in reference cycles with their py4j handles; until
                # Python collects them, the driver keeps their plans (~60,000 plan nodes
                # for a group of 24, measured).
                gc.collect()
            yield done.pop(i)


def rounds(scenario: Scenario) -> int:
    """How many times the job catches up in the file's run: at each observation and
    operator step, and at the end."""
    return 1 + sum(step.kind in ("expect", "operator") for step in scenario.steps)


def shares_query(scenario: Scenario, sink: str = "delta") -> bool:
    """Whether the file may run in a query with others: its run is not meant to stop the
    job (no strict target, no expected error, and the memory engine runs it to the end
    without one). A stop would end the query for every file in it."""
    if scenario.strict:
        return False
    expects = [scenario.expect, *(step.expect for step in scenario.steps)]
    if any(e is not None and e.error is not None for e in expects):
        return False
    return run_memory(scenario, sink=sink).output.get("error") is None


class _Names:
    """A file's names in a shared job: its sources and target with the file's prefix."""

    def __init__(self, tag: str, scenario: Scenario) -> None:
        self.tag = tag
        self.sources = {ShardId.parse(name).source for name in scenario.shards}
        self.target = scenario.target

    def source(self, source: str) -> str:
        return self.tag + source

    def moves(self, scenario: Scenario) -> list[MoveSettings]:
        """The file's moves with its prefix on their ids and shards."""
        return [
            MoveSettings.model_validate(
                {
                    **m.model_dump(by_alias=True),
                    "id": self.tag + m.id,
                    "from": [self.tag + s for s in m.from_],
                    "to": self.tag + m.to,
                }
            )
            for m in scenario.moves
        ]

    def words(self, words: str) -> str:
        """An operator command with the file's target and shards named as in the job."""
        if not self.tag:
            return words

        def ours(word: str) -> bool:  # the target, or a shard of one of the file's sources
            shard = word.count(".") == 2 and word.split(".", 1)[0] in self.sources
            return word == self.target or shard

        return shlex.join(self.tag + w if ours(w) else w for w in shlex.split(words))

    def back(self, text: str | None) -> str | None:
        """Text from the job (a message, a shard or target name) in the file's own names."""
        return text.replace(self.tag, "") if text and self.tag else text


class _Run:
    def __init__(
        self, session: SparkScenarioSession, scenario: Scenario, group: _Group | None = None
    ) -> None:
        from devkit.producer import DebeziumProducer

        self.s = session
        self.scenario = scenario
        self.run_id = group.run_id if group else "r" + uuid.uuid4().hex[:8]
        self.root = session.workdir / self.run_id
        tag = group.tag(scenario) if group else ""
        self.names = _Names(tag, scenario)
        self.target = TargetId.parse(tag + scenario.target)
        self.settings = self.job_settings()
        self.upstream = Upstream()
        self.producers: dict[str, DebeziumProducer] = {}
        self.make_producer = lambda source: DebeziumProducer(
            session.broker.bootstrap,
            source,
            topic_namespace=f"{self.run_id}_",
            schemas_enable=scenario.row_schemas,
        )
        self.error: str | None = None
        self.result: ScenarioResult | None = None
        self.delta_columns: list[str] = []  # the Delta table's, as the last observation read

    engine = "spark"

    def route(self) -> RouteSettings:
        """This file's route: every shard of its sources to its target."""
        scenario = self.scenario
        extract = ExtractSettings(**(scenario.extract.model_dump() if scenario.extract else {}))
        return RouteSettings(
            target=str(self.target), source=self.names.source("*"), extract=extract
        )

    def target_settings(self) -> TargetSettings:
        scenario = self.scenario
        return TargetSettings(mode=scenario.mode, strict=scenario.strict, policy=scenario.policy)

    def job_settings(
        self, pattern: str | None = None, routes: list[RouteSettings] | None = None
    ) -> Settings:
        """The job's settings for this file: its own topics, Delta tables and checkpoint."""
        return _settings(
            self.s.broker.bootstrap,
            self.root,
            pattern or f"{self.run_id}_.*",
            routes or [self.route()],
            {str(self.target): self.target_settings()},
            self.names.moves(self.scenario),
            self.s.sink,
        )

    # --- names ---------------------------------------------------------------------------

    def producer(self, source: str) -> Any:
        """The producer of a source of the file (named as in the job)."""
        if source not in self.producers:
            self.producers[source] = self.make_producer(self.names.source(source))
        return self.producers[source]

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> ScenarioResult:
        """The file alone: the job catches up at each of the file's observation points."""
        for _ in self.rounds():
            self.catch_up()
        assert self.result is not None
        return self.result

    def rounds(self) -> Iterator[None]:
        """The file's steps; yields at each point where the job must catch up with what was
        produced (the caller runs it and sets ``error`` if the job stopped). Sets
        ``result`` at the end."""
        failures: list[str] = []
        invalid = False
        self.begin()
        for index, step in enumerate(self.scenario.steps):
            try:
                yield from self.step(step)
            except UpstreamError as e:
                self.error = f"{self.scenario.path}: step {index + 1}: {e}"
                failures.append(f"invalid file: {self.error}")
                invalid = True
                break
            if step.expect is not None:
                # The Delta table is read only when the step checks rows (about a second).
                seen = self.observe(
                    rows=step.expect.rows is not None, dead=step.expect.dead_letters is not None
                )
                failures += check(step.expect, seen, f"step {index + 1}")
            if self.error is not None:
                break
        if self.error is None:
            self.heartbeats()
            yield
        seen = self.observe()
        if self.scenario.expect is not None:
            failures += check(self.scenario.expect, seen, "end")
        expected_error = self.scenario.expect is not None and self.scenario.expect.error is not None
        if (
            self.error is not None
            and not expected_error
            and not any("error" in f for f in failures)
        ):
            failures.append(f"run stopped: {self.error}")
        failures += self.delta_matches_coordinator(seen)
        failures += self.finish(seen)
        output = {
            "name": self.scenario.name,
            "ok": not failures,
            "engine": self.engine,
            "columns": seen.columns(),
            "primary_key": list(seen.schema.primary_key) if seen.schema else [],
            "rows": sorted_rows(seen),
            "locks": seen.locks,
            "error": seen.error,
            "failures": failures,
            **({"moves": seen.moves} if seen.moves else {}),
            **({"dead_letters": seen.dead_letter_rows()} if seen.dead_letters else {}),
            **self.finish_output(),
        }
        self.close_producers()
        name = self.scenario.name
        self.result = ScenarioResult(name, self.engine, not failures, output, invalid=invalid)

    def close_producers(self) -> None:
        producers = list(self.producers.values())
        self.producers.clear()  # no client outlives the run (and retries a stopped broker)
        for p in producers:
            p.flush()

    def begin(self) -> None:
        """Create the file's initial shard tables upstream."""
        for name, sql in self.scenario.shards.items():
            shard = ShardId.parse(name)
            schema = parse_create_table(sql)
            self.upstream.create(shard, schema)
            if name not in self.scenario.unseen:
                self.producer(shard.source).ddl(shard.db, shard.table, sql, schema)

    def finish(self, seen: Observation) -> list[str]:
        """Checks an engine adds after the run (none here)."""
        return []

    def finish_output(self) -> dict[str, Any]:
        """What those checks report in the result's output (none here)."""
        return {}

    def step(self, step: Step) -> Iterator[None]:
        """One step; yields where the job must catch up first (an observation, a command)."""
        kind = step.kind
        if kind in ("operator", "expect"):
            self.heartbeats()
        if kind == "operator":
            assert step.operator is not None
            yield
            if self.error is not None:
                return
            words = self.names.words(step.operator)
            store = StateStore(self.s.spark, self.settings.checkpoint)
            if words.split()[:1] == ["move"]:
                command = parse_move_command(step.operator)
                store.submit(MoveCommand(command.action, self.names.tag + command.move))
            else:
                store.submit(parse_command(words))
            self.heartbeat()
            return
        if kind == "expect":
            yield
            return
        if kind in ("copy", "freeze", "switch"):
            self.copy_step(kind, step)
            return
        shard = ShardId.parse(step.shard or "")
        if kind == "sql":
            assert step.sql is not None
            self.upstream.ddl(shard, step.sql)
            table = self.upstream.tables.get(shard)
            word = step.sql.strip().split(None, 1)[0].upper()
            if word == "TRUNCATE":
                self.producer(shard.source).truncate(shard.db, shard.table)
            else:
                self.producer(shard.source).ddl(
                    shard.db, shard.table, step.sql, table.schema if table else None
                )
        else:
            event = self.upstream.step(shard, step)
            self.send(event)
        # Distinct source timestamps keep the global order of the file's steps.
        time.sleep(0.002)

    def heartbeats(self) -> None:
        """Before the job catches up (time passes): a heartbeat row in the marker table
        on every source of every move, as a copy tool writes one every second while a
        move runs (docs/moves.md: they move the job's marker watermark)."""
        if not self.scenario.heartbeats:
            return
        for m in self.scenario.moves:
            self.copy_tool().marker(m.move(), "heartbeat")

    def copy_tool(self) -> CopyTool:
        def sql(shard: ShardId, text: str) -> None:
            table = self.upstream.tables.get(shard)
            schema = table.schema if table else None
            self.producer(shard.source).ddl(shard.db, shard.table, text, schema)
            time.sleep(0.002)

        def row(event: RowEvent) -> None:
            self.send(event)
            time.sleep(0.002)

        return CopyTool(self.upstream, sql, row, self.names.tag, self.scenario.heartbeats)

    def copy_step(self, kind: str, step: Step) -> None:
        """The copy tool of a move: its statements and rows as the connector would send them
        (its marker rows name the move as the job knows it)."""
        move = next(m.move() for m in self.scenario.moves if m.id == step.action(kind))
        tool = self.copy_tool()
        if kind == "copy":
            tool.copy(move)
        else:
            tool.marker(move, "frozen" if kind == "freeze" else "switched")

    def send(self, e: RowEvent) -> None:
        op = {"insert": "c", "update": "u", "delete": "d"}[e.op]
        self.producer(e.shard.source).row(
            e.shard.db, e.shard.table, op, e.before, e.after, e.schema
        )

    def heartbeat(self) -> None:
        """A record that decodes to nothing, so that the next run has a batch to run."""
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.s.broker.bootstrap})
        p.produce(f"{self.run_id}_heartbeat", key=b"hb", value=None)
        p.flush(30)

    def catch_up(self) -> None:
        """Run the job until it has read everything produced so far."""
        if self.error is not None:
            return
        self.flush()
        self.error = _catch_up(self.s.spark, self.settings)

    def flush(self) -> None:
        """Hand everything the file produced so far to Kafka."""
        for p in self.producers.values():
            p.flush()

    # --- observing -----------------------------------------------------------------------------

    def observe(self, rows: bool = True, dead: bool = True) -> Observation:
        """The job's saved state and, with ``rows``, the Delta table's rows, with ``dead``
        the file's dead letters, in the file's own names."""
        store = StateStore(self.s.spark, self.settings.checkpoint)
        latest = store.latest()
        failed = store.failure()
        if failed is not None:
            latest = (failed["batch"], failed)
        letters = self.dead_letters() if dead else ()
        if latest is None:
            return Observation(None, [], [], self.names.back(self.error), dead_letters=letters)
        _, data = latest
        c = restore(data["coordinator"], self.settings.router(), self.settings.target_configs())
        view = c.target_view(self.target)
        schema = view.downstream if view is not None else None
        found: list[dict[str, Any]] = []
        df = (
            read_target(self.s.spark, self.settings, self.target)
            if rows and schema is not None
            else None
        )
        if df is not None:
            self.delta_columns = [f.name for f in df.schema.fields]
            found = [r.asDict() for r in df.collect()]
            # A BIT value is stored as MySQL's bytes of it (most significant first); the
            # files write it as the number (a database sink may read it back as one).
            bits = {c.name.lower() for c in schema.columns if c.type.base == "BIT"}
            for row in found if bits else []:
                for k, v in row.items():
                    if k.lower() in bits:
                        row[k] = bit_number(v)
            column = self.scenario.extract.source_column if self.scenario.extract else None
            if column:
                for row in found:
                    key = next((k for k in row if k.lower() == column.lower()), None)
                    if key is not None:
                        row[key] = self.names.back(row[key])
        back = self.names.back
        locks = []
        for lock in data.get("locks", []):
            if lock["target"] != str(self.target):
                continue  # another file's, in a shared job
            locks.append(
                {
                    "target": back(lock["target"]),
                    "mode": lock["mode"],
                    "stage": lock["stage"],
                    "blocked": [back(b) for b in lock["blocked"]],
                    "pending_ddl": [p["sql"] for p in lock["pending_ddl"]],
                    **({"conflict": back(lock["conflict"])} if lock.get("conflict") else {}),
                }
            )
        progress = data.get("moves", {}).get("progress", {})
        tag = self.names.tag
        moves = {m[len(tag) :]: p["state"] for m, p in progress.items() if m.startswith(tag)}
        return Observation(schema, found, locks, back(self.error), moves, letters)

    def dead_letters(self) -> tuple[SeenDeadLetter, ...]:
        """The file's rows in the job's dead-letter table (``streaming.storage.deadletter``): in a
        shared job, those of its own topics (``RUN_TAGsource.db.table``). A row the write
        step gave up on carries its event as JSON (source, db, tbl and its row images); a
        record the decode could not read, its raw value (its shard is its topic's)."""
        path = self.settings.dead_letters()
        if not Path(path).exists():
            return ()
        prefix = f"{self.run_id}_{self.names.tag}"
        found = []
        table = self.s.spark.read.format("delta").load(path)
        for r in table.where(table.topic.startswith(prefix)).collect():
            try:
                event = json.loads(bytes(r["value"] or b"").decode())
            except ValueError:
                event = None
            if isinstance(event, dict) and {"source", "db", "tbl"} <= set(event):
                shard = f"{self.names.back(event['source'])}.{event['db']}.{event['tbl']}"
                image = event.get("after") or event.get("before") or "{}"
                values = json.loads(image) if isinstance(image, str) else image
            else:
                shard, values = str(self.names.back(r["topic"][len(self.run_id) + 1 :])), {}
            found.append(SeenDeadLetter(shard, r["reason"], dict(values or {})))
        return tuple(found)

    def delta_matches_coordinator(self, seen: Observation) -> list[str]:
        if seen.schema is None:
            return []
        # The run's last observation read the table's columns with its rows.
        if not self.delta_columns:
            df = read_target(self.s.spark, self.settings, self.target)
            if df is None:
                return []
            self.delta_columns = [f.name for f in df.schema.fields]
        delta_cols = self.delta_columns
        if sorted(c.lower() for c in delta_cols) != sorted(c.key for c in seen.schema.columns):
            return [f"Delta columns {delta_cols} differ from the target schema {seen.columns()}"]
        return []


class _Group:
    """Files side by side in one streaming query (see the module docstring)."""

    def __init__(self, session: SparkScenarioSession, scenarios: list[Scenario]) -> None:
        self.s = session
        self.run_id = "g" + uuid.uuid4().hex[:8]
        self.root = session.workdir / self.run_id
        self._tags: dict[int, str] = {}
        self.runs = [_Run(session, scenario, self) for scenario in scenarios]
        self.settings = _settings(
            session.broker.bootstrap,
            self.root,
            f"{self.run_id}_.*",
            [run.route() for run in self.runs],
            {str(run.target): run.target_settings() for run in self.runs},
            [m for run in self.runs for m in run.names.moves(run.scenario)],
            session.sink,
        )
        for run in self.runs:
            run.settings = self.settings

    def tag(self, scenario: Scenario) -> str:
        """The file's prefix: fixed width, so that no file's prefix starts another's."""
        return self._tags.setdefault(id(scenario), f"m{len(self._tags):03d}_")

    def run(self) -> list[ScenarioResult]:
        """Rounds: every file to its next observation point, then one query for all."""
        outcome: dict[int, ScenarioResult] = {}
        steps = {i: run.rounds() for i, run in enumerate(self.runs)}
        while steps:
            for i in list(steps):
                try:
                    next(steps[i])
                except StopIteration:
                    result = self.runs[i].result
                    assert result is not None
                    outcome[i] = result
                    del steps[i]
                except Exception as e:  # this file fails (see _failed); the others go on
                    outcome[i] = _failed("spark", self.runs[i].scenario, e)
                    self.runs[i].close_producers()
                    del steps[i]
            waiting = [self.runs[i] for i in steps if self.runs[i].error is None]
            if waiting:
                for run in waiting:
                    run.flush()
                error = _catch_up(self.s.spark, self.settings)
                if error is not None:
                    for run in waiting:
                        run.error = f"{error} (the query shared by {len(self.runs)} files)"
        return [outcome[i] for i in range(len(self.runs))]


def _settings(
    bootstrap: str,
    root: Path,
    pattern: str,
    routes: list[RouteSettings],
    targets: dict[str, TargetSettings],
    moves: list[MoveSettings] | None = None,
    sink: dict[str, Any] | None = None,
) -> Settings:
    return Settings(
        moves=moves or [],
        kafka=KafkaSettings(bootstrap=bootstrap),
        sources=[SourceSettings(format="debezium", pattern=pattern)],
        routes=routes,
        targets=targets,
        sink=SinkSettings(path=str(root / "lake"), **(sink or {})),
        checkpoint=str(root / "checkpoint"),
    )


def read_target(spark: Any, settings: Settings, target: TargetId) -> Any:
    """The target's table as a DataFrame, whatever the sink; None when it is not there."""
    if settings.sink.kind == "jdbc":
        from streaming.storage.sinks import sink_of

        sink: Any = sink_of(spark, settings, "scenario-reader")
        if not sink.columns(target):
            return None
        return sink.read(target)
    path = settings.table_path(target)
    return spark.read.format("delta").load(path) if Path(path).exists() else None


def _catch_up(spark: Any, settings: Settings) -> str | None:
    """One ``AvailableNow`` run of the job over everything produced so far; the error it
    stopped with, if any."""
    from pyspark.errors import StreamingQueryException

    from streaming.job import build_query

    query, _ = build_query(spark, settings, available_now=True)
    try:
        query.awaitTermination()
    except StreamingQueryException as e:
        # The job stopped (a strict conflict, ...): what the file's `error` expects.
        # Anything else (the JVM gone, ...) is not a result and fails the run.
        return _root_message(e)
    exc = query.exception()
    return _root_message(exc) if exc is not None else None


def _root_message(e: BaseException) -> str:
    text = str(e)
    for marker in ("ConflictError: ", "ShardMergeError: ", "SinkError: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else type(e).__name__


def run_spark_files(scenarios: list[Scenario], sink: str = "delta") -> Iterator[ScenarioResult]:
    """The files on the spark engine, the target written by ``sink``: ``delta``, or a
    local ``mariadb`` or ``postgresql`` server started for the run (the JDBC sink)."""
    with contextlib.ExitStack() as stack:
        settings = None
        if sink != "delta":
            from devkit import downstream_local

            work = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            settings = stack.enter_context(downstream_local.sink_settings(sink, work / "db"))
        session = stack.enter_context(SparkScenarioSession(sink=settings))
        yield from session.run_files(scenarios)


def run_in_session(
    session: SparkScenarioSession, scenarios: list[Scenario], engine: str
) -> Iterator[ScenarioResult]:
    """Each file in turn, alone; a file the engine cannot run is a failed result, not the
    end.

    Any error of one file (a server refusing a statement, a client error, a bug of the
    engine) is that file's failure, with the error's type and message in its JSON and the
    traceback on stderr; the next file runs as usual. Only an interrupt ends the run."""
    for scenario in scenarios:
        kind = session.sink_kind
        if not scenario.runs_on(engine, kind):  # the file's `engines` or `sinks` leave it out
            yield skipped(scenario, engine, kind)
            continue
        yield _guarded(engine, scenario, functools.partial(session.run, scenario))


def _guarded(engine: str, scenario: Scenario, run: Callable[[], ScenarioResult]) -> ScenarioResult:
    try:
        return run()
    except Exception as e:  # the file fails, reported with its error; the run goes on
        return _failed(engine, scenario, e)


def _guarded_group(
    engine: str, scenarios: list[Scenario], session: SparkScenarioSession
) -> list[ScenarioResult]:
    try:
        return session.run_together(scenarios)
    except Exception as e:  # the group's shared work failed (its query): each file fails
        return [_failed(engine, s, e) for s in scenarios]


def _failed(engine: str, scenario: Scenario, e: Exception) -> ScenarioResult:
    """A file the engine failed on: its error's type and message in its JSON, the
    traceback on stderr."""
    text = str(e) if isinstance(e, ShardMergeError) else f"{type(e).__name__}: {e}"
    print(f"    {scenario.path}: the engine failed on this file:", file=sys.stderr)
    traceback.print_exception(e, file=sys.stderr)
    output = {"name": scenario.name, "ok": False, "engine": engine, "error": text,
              "failures": [f"engine error: {text}"]}  # fmt: skip
    return ScenarioResult(scenario.name, engine, False, output)
