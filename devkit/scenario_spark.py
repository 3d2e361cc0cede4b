"""The spark engine: scenario steps become Debezium JSON on a real Kafka broker, the real
streaming job runs with ``Trigger.AvailableNow`` whenever the file asks for an observation
or an operator acts, and the downstream is a real Delta table.

Each file gets its own topics (a run prefix before the connector's topic names), Delta
tables and checkpoint, so several files share one broker and one Spark session; source
names stay the file's own (``s1``), as Debezium's ``source.name``.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from coordinator.ids import ShardId, TargetId
from coordinator.scenario.model import Scenario, Step
from coordinator.scenario.observe import Observation, check, sorted_rows
from coordinator.scenario.runner import ScenarioResult, skipped
from coordinator.scenario.upstream import RowEvent, Upstream, UpstreamError
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
from streaming.state_store import StateStore

__all__ = ["SparkScenarioSession"]


class SparkScenarioSession:
    """One broker and one SparkSession for any number of scenario files."""

    def __init__(self, workdir: str | Path | None = None, broker: Any = None) -> None:
        self._stack = contextlib.ExitStack()
        self.workdir = Path(workdir or self._stack.enter_context(tempfile.TemporaryDirectory()))
        from devkit import kafka_local
        from streaming.spark_session import build_spark

        self.broker = broker or self._stack.enter_context(
            kafka_local.running("scenarios", self.workdir / "kafka")
        )
        self.spark = build_spark("shardmerge-scenarios")

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> SparkScenarioSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, scenario: Scenario) -> ScenarioResult:
        return _Run(self, scenario).run()


class _Run:
    def __init__(self, session: SparkScenarioSession, scenario: Scenario) -> None:
        from devkit.producer import DebeziumProducer

        self.s = session
        self.scenario = scenario
        self.run_id = "r" + uuid.uuid4().hex[:8]
        self.root = session.workdir / self.run_id
        self.target = TargetId.parse(scenario.target)
        self.settings = self.job_settings()
        self.upstream = Upstream()
        self.producers: dict[str, DebeziumProducer] = {}
        self.make_producer = lambda source: DebeziumProducer(
            session.broker.bootstrap, source, topic_namespace=f"{self.run_id}_"
        )
        self.error: str | None = None

    engine = "spark"

    def job_settings(
        self, pattern: str | None = None, routes: list[RouteSettings] | None = None
    ) -> Settings:
        """The job's settings for this file: its own topics, Delta tables and checkpoint."""
        scenario = self.scenario
        extract = ExtractSettings(**(scenario.extract.model_dump() if scenario.extract else {}))
        return Settings(
            kafka=KafkaSettings(bootstrap=self.s.broker.bootstrap),
            sources=[SourceSettings(format="debezium", pattern=pattern or f"{self.run_id}_.*")],
            routes=routes or [RouteSettings(target=scenario.target, extract=extract)],
            targets={
                scenario.target: TargetSettings(
                    mode=scenario.mode, strict=scenario.strict, policy=scenario.policy
                )
            },
            sink=SinkSettings(path=str(self.root / "lake")),
            checkpoint=str(self.root / "checkpoint"),
        )

    # --- names ---------------------------------------------------------------------------

    def producer(self, source: str) -> Any:
        if source not in self.producers:
            self.producers[source] = self.make_producer(source)
        return self.producers[source]

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> ScenarioResult:
        failures: list[str] = []
        invalid = False
        self.begin()
        for index, step in enumerate(self.scenario.steps):
            try:
                self.step(step)
            except UpstreamError as e:
                self.error = f"{self.scenario.path}: step {index + 1}: {e}"
                failures.append(f"invalid file: {self.error}")
                invalid = True
                break
            if step.expect is not None:
                # The Delta table is read only when the step checks rows (about a second).
                seen = self.observe(rows=step.expect.rows is not None)
                failures += check(step.expect, seen, f"step {index + 1}")
            if self.error is not None:
                break
        if self.error is None:
            self.catch_up()
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
        }
        for p in self.producers.values():
            p.flush()
        self.producers.clear()  # no client outlives the run (and retries a stopped broker)
        name = self.scenario.name
        return ScenarioResult(name, self.engine, not failures, output, invalid=invalid)

    def begin(self) -> None:
        """Create the file's initial shard tables upstream."""
        for name, sql in self.scenario.shards.items():
            shard = ShardId.parse(name)
            schema = parse_create_table(sql)
            self.upstream.create(shard, schema)
            self.producer(shard.source).ddl(shard.db, shard.table, sql, schema)

    def finish(self, seen: Observation) -> list[str]:
        """Checks an engine adds after the run (none here)."""
        return []

    def step(self, step: Step) -> None:
        kind = step.kind
        if kind == "operator":
            assert step.operator is not None
            self.catch_up()
            StateStore(self.s.spark, self.settings.checkpoint).submit(step.operator)
            self.heartbeat()
            return
        if kind == "expect":
            self.catch_up()
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
        for p in self.producers.values():
            p.flush()
        from pyspark.errors import StreamingQueryException

        from streaming.job import build_query

        query, _ = build_query(self.s.spark, self.settings, available_now=True)
        try:
            query.awaitTermination()
        except StreamingQueryException as e:
            # The job stopped (a strict conflict, ...): what the file's `error` expects.
            # Anything else (the JVM gone, ...) is not a result and fails the run.
            self.error = _root_message(e)
        else:
            exc = query.exception()
            if exc is not None:
                self.error = _root_message(exc)

    # --- observing -----------------------------------------------------------------------------

    def observe(self, rows: bool = True) -> Observation:
        """The job's saved state and, with ``rows``, the Delta table's rows."""
        store = StateStore(self.s.spark, self.settings.checkpoint)
        latest = store.latest()
        failed = store.failure()
        if failed is not None:
            latest = (failed["batch"], failed)
        if latest is None:
            return Observation(None, [], [], self.error)
        _, data = latest
        c = restore(data["coordinator"], self.settings.router(), self.settings.target_configs())
        t = c.targets.get(self.target)
        schema = t.downstream() if t else None
        found: list[dict[str, Any]] = []
        path = self.settings.table_path(self.target)
        if rows and schema is not None and Path(path).exists():
            df = self.s.spark.read.format("delta").load(path)
            found = [r.asDict() for r in df.collect()]
        locks = []
        for lock in data.get("locks", []):
            locks.append(
                {
                    "target": lock["target"],
                    "mode": lock["mode"],
                    "stage": lock["stage"],
                    "blocked": lock["blocked"],
                    "pending_ddl": [p["sql"] for p in lock["pending_ddl"]],
                    **({"conflict": lock["conflict"]} if lock.get("conflict") else {}),
                }
            )
        return Observation(schema, found, locks, self.error)

    def delta_matches_coordinator(self, seen: Observation) -> list[str]:
        path = self.settings.table_path(self.target)
        if seen.schema is None or not Path(path).exists():
            return []
        delta_cols = [f.name for f in self.s.spark.read.format("delta").load(path).schema.fields]
        if sorted(c.lower() for c in delta_cols) != sorted(c.key for c in seen.schema.columns):
            return [f"Delta columns {delta_cols} differ from the target schema {seen.columns()}"]
        return []


def _root_message(e: BaseException) -> str:
    text = str(e)
    for marker in ("ConflictError: ", "ShardMergeError: ", "SinkError: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else type(e).__name__


def run_spark_files(scenarios: list[Scenario]) -> Iterator[ScenarioResult]:
    with SparkScenarioSession() as session:
        yield from run_in_session(session, scenarios, "spark")


def run_in_session(
    session: SparkScenarioSession, scenarios: list[Scenario], engine: str
) -> Iterator[ScenarioResult]:
    """Each file in turn; a file the engine cannot run is a failed result, not the end.

    Any error of one file (a server refusing a statement, a client error, a bug of the
    engine) is that file's failure, with the error's type and message in its JSON and the
    traceback on stderr; the next file runs as usual. Only an interrupt ends the run."""
    for scenario in scenarios:
        if not scenario.runs_on(engine):  # the file's `engines` leave this one out
            yield skipped(scenario, engine)
            continue
        try:
            yield session.run(scenario)
        except Exception as e:  # the file fails, reported with its error; the run goes on
            text = str(e) if isinstance(e, ShardMergeError) else f"{type(e).__name__}: {e}"
            print(f"    {scenario.path}: the engine failed on this file:", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
            output = {"name": scenario.name, "ok": False, "engine": engine, "error": text,
                      "failures": [f"engine error: {text}"]}  # fmt: skip
            yield ScenarioResult(scenario.name, engine, False, output)
