"""Exactly once under kill -9: the harness shared by the CI test and ``scripts/kill-test``.

A DDL-heavy sharded workload (ADD COLUMN, then a column rename, then a DECIMAL widening,
rolled out shard by shard) is produced once. The job then runs as a separate process with
``--available-now`` and small micro-batches; each run is killed with SIGKILL at a named
point of the foreachBatch protocol (``streaming/faults.py``), and the next run restarts
from the checkpoint. A last run finishes. The Delta table must then equal the oracle, the
union of the shards' final rows: nothing lost, nothing duplicated.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DDL = {
    0.2: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)",
    0.45: "ALTER TABLE {table} CHANGE note memo VARCHAR(64)",
    0.7: "ALTER TABLE {table} MODIFY amount DECIMAL(12,2) NOT NULL",
}
# The CI subset: each a point where a restart finds work half done downstream (rows
# merged, a DDL applied, a release's rows merged). The state saved but the batch not
# committed (after_state) is CI's in tests/integration/test_checkpoint_identity.py (a
# batch run again after Spark's commit of it was lost) and the fault suite's run-again
# cases, without a cold JVM of its own. `scripts/kill-test` runs every point (POINTS) at
# its 1st and 2nd occurrence.
CI_POINTS = [
    "after_rows:3",
    "after_ddl:2",
    "after_release:1",
]


@dataclass
class Report:
    runs: list[tuple[str, int, float]] = field(default_factory=list)
    rows: int = 0
    expected: int = 0
    missing: list[Any] = field(default_factory=list)
    unexpected: list[Any] = field(default_factory=list)
    duplicated_keys: int = 0

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected and not self.duplicated_keys


def produce(
    bootstrap: str,
    source: str,
    shards: int,
    rows: int,
    pause: Callable[[], None] | None = None,
) -> dict[Any, dict[str, Any]]:
    """Write the workload; return the oracle: final rows by primary key.

    ``pause`` is called once, with everything before it flushed, right before the first
    ALTER of a second shard: the shard that ran the first ALTER has rows after it, and a
    pessimistic job run then holds them in its stash until the rest is produced."""
    from devkit.producer import DebeziumProducer
    from devkit.workload import Oracle, sharded_workload

    producer = DebeziumProducer(bootstrap, source)
    oracle = Oracle()
    first_alter: tuple[str, str] | None = None
    for ev in sharded_workload(shards, rows, ddl_at=DDL, seed=7):
        oracle.take(ev)
        if ev.kind == "row":
            producer.row(ev.db, ev.table, ev.op, ev.before, ev.after, ev.schema)  # type: ignore[arg-type]
        else:
            if pause is not None and (ev.statement or "").lstrip()[:5].upper() == "ALTER":
                if first_alter is None:
                    first_alter = (ev.db, ev.table)
                elif first_alter != (ev.db, ev.table):
                    producer.flush()
                    pause()
                    pause = None
            producer.ddl(ev.db, ev.table, ev.statement or "", ev.schema)
    producer.close()
    return oracle.rows


def produce_move(bootstrap: str, source: str, shards: int, rows: int) -> dict[Any, dict[str, Any]]:
    """Write the move workload (``devkit.workload.moving_workload``: shard 0 moves while a
    pessimistic ADD COLUMN holds its rows, so the switch runs in the batch that releases
    them); return the oracle: the merged table's final rows by primary key."""
    from devkit.producer import DebeziumProducer, send_workload
    from devkit.workload import Oracle, WorkloadEvent, moving_workload

    oracle = Oracle()

    def events() -> Iterator[WorkloadEvent]:
        for ev, shown in moving_workload(shards, rows, seed=7):
            if shown:
                oracle.take(ev)
            yield ev

    producer = DebeziumProducer(bootstrap, source)
    send_workload(producer, events())
    producer.close()
    return oracle.rows


def move_settings(source: str) -> str:
    """The ``moves:`` settings of the move workload."""
    from devkit.workload import MOVE_FROM, MOVE_ID, MOVE_TO

    return (
        f"moves:\n  - {{id: {MOVE_ID}, from: {source}.{'.'.join(MOVE_FROM)}, "
        f"to: {source}.{'.'.join(MOVE_TO)}}}\n"
    )


def write_config(
    path: Path,
    bootstrap: str,
    source: str,
    lake: str,
    checkpoint: str,
    max_offsets: int,
    mode: str = "optimistic",
    read_ahead: bool = False,
    ddl_grace_ms: int | None = None,
    extra: str = "",
    sink: dict[str, Any] | None = None,
) -> None:
    # The schema-change topic shares the rate limit here (read_schema_ahead: false): DDLs
    # then spread over many micro-batches and every protocol point, DDL and release
    # included, is reached in many runs. Read ahead, all DDL comes in the first batch.
    path.write_text(
        f"""kafka:
  bootstrap: "{bootstrap}"
  max_offsets_per_trigger: {max_offsets}
sources:
  - format: debezium
    pattern: '{source}(\\..*)?'
    read_schema_ahead: {str(read_ahead).lower()}
routes:
  - target: shop.orders
    table: 'orders_*'
targets:
  shop.orders: {{mode: {mode}}}
sink: {json.dumps({"path": lake, **{k: v for k, v in (sink or {}).items() if k != "password"}})}
checkpoint: "{checkpoint}"
{"" if ddl_grace_ms is None else f"ddl_grace_ms: {ddl_grace_ms}"}
{extra}
# any free port: other jobs on the machine may hold the default; the token the job makes
# stays beside its config (a killed job cannot remove it)
ops: {{port: 0, generated_token_file: "{path.parent / "ops-token"}"}}
"""
    )


def run_job(
    config: Path, crash_at: str | None, log: Path, extra_env: dict[str, str] | None = None
) -> int:
    env = dict(os.environ, **(extra_env or {}))
    env.pop("SHARDMERGE_CRASH_AT", None)
    if crash_at:
        env["SHARDMERGE_CRASH_AT"] = crash_at
    with open(log, "ab") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "streaming.job", "--config", str(config), "--available-now"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
    return proc.returncode


class InProcessJob:
    """The job (``shardmerge run --available-now``) on a thread of this process, in its
    Spark session: the same settings, restart policy, faults and log lines as a process of
    its own, without a cold JVM per run (about a minute on a 2-core machine). The CI tests
    use it (the kill test for its last run, after the killed ones); ``scripts/fault-suite``
    and ``scripts/kill-test`` run processes.
    Mimics the part of ``Popen`` the cases use: ``poll``, ``wait``, ``kill``, ``returncode``
    (0 finished, 2 stopped with a ``shardmerge: ...`` line in the log, 1 any other error)."""

    def __init__(
        self, config: Path, log: Path, env: dict[str, str], spark: Any, available_now: bool = True
    ) -> None:
        if "SHARDMERGE_CRASH_AT" in env:
            raise ValueError("a kill needs a process of its own")
        self.config, self.log, self.env, self.spark = config, log, env, spark
        self.available_now = available_now
        self.returncode: int | None = None
        self._thread = threading.Thread(target=self._main, name="faultsuite-job", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        import logging
        import traceback

        from shardmerge.errors import ShardMergeError
        from shardmerge.printable import PrintableFormatter
        from streaming import faults
        from streaming.config import load_settings
        from streaming.job import run
        from streaming.runtime import supervise

        logger = logging.getLogger("shardmerge")
        handler = logging.FileHandler(self.log)
        handler.setFormatter(PrintableFormatter())  # the job's own log lines
        level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        code = 1
        try:
            settings = load_settings(self.config, environ={**os.environ, **self.env})
            supervise.RESTARTS.ran_fine()  # a run before this one may have stopped
            with faults.armed(storage=self.env.get("SHARDMERGE_STORAGE_FAULT")):
                run(settings, available_now=self.available_now, spark=self.spark)
            code = 0
        except ShardMergeError as e:  # what the command line prints, and its exit code
            handler.stream.write(f"shardmerge: {e}\n")
            code = 2
        except BaseException:  # the case fails on the exit code; the log has the traceback
            handler.stream.write(traceback.format_exc())
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
            handler.close()
            self.returncode = code

    def poll(self) -> int | None:
        return None if self._thread.is_alive() else self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired("in-process job", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """Stop the job's query (the run then ends as if finished)."""
        for query in self.spark.streams.active:
            if query.name == "shardmerge":
                query.stop()


def canon(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if hasattr(value, "hour") else value.isoformat()
    return value


def compare(
    spark: Any, lake: str, oracle: dict[Any, dict[str, Any]], sink: dict[str, Any] | None = None
) -> Report:
    """The table ``shop.orders`` against the oracle: the Delta table ``LAKE/shop/orders``
    (``lake``: a URI), or with ``sink`` (JDBC sink settings) the database's table."""
    report = Report(expected=len(oracle))
    if sink:
        from coordinator.ids import TargetId
        from streaming.storage.jdbc_sink import JdbcSink

        jdbc = JdbcSink(spark, "killtest-reader", sink["url"], sink["dialect"],
                        sink.get("user"), sink.get("password"))  # fmt: skip
        df = jdbc.read(TargetId("shop", "orders"))
    else:
        df = spark.read.format("delta").load(f"{lake.rstrip('/')}/shop/orders")
    columns = [f.name for f in df.schema.fields]
    got = [r.asDict() for r in df.collect()]
    report.rows = len(got)
    ids = [r["id"] for r in got]
    report.duplicated_keys = len(ids) - len(set(ids))

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        lowered = {k.lower(): v for k, v in row.items()}
        return tuple((c, canon(lowered.get(c.lower()))) for c in sorted(columns))

    have = {key(r) for r in got}
    want = {key(r) for r in oracle.values()}
    report.missing = sorted(want - have, key=str)[:5]
    report.unexpected = sorted(have - want, key=str)[:5]
    if len(want - have) or len(have - want):
        report.missing.append(f"{len(want - have)} missing in all")
        report.unexpected.append(f"{len(have - want)} unexpected in all")
    return report


def kill_test(
    bootstrap: str, work: Path, points: list[str], *, shards: int = 4, rows: int = 400,
    max_offsets: int = 300, spark: Any = None, source: str = "kt",
    storage: str | None = None, extra_env: dict[str, str] | None = None,
    finish_in: Any = None, workload: str = "ddl", sink: dict[str, Any] | None = None,
    append_min_rows: int | None = None,
) -> Report:  # fmt: skip
    """``storage``: a URI under which lake and checkpoint go (default: ``work``), e.g. a
    bucket; ``extra_env`` reaches the job (e.g. ``PYSPARK_SUBMIT_ARGS`` with S3A conf).
    ``finish_in``: a Spark session to run the last (not killed) run in, on a thread
    (:class:`InProcessJob`), instead of a process: the CI test's, to spare a cold JVM.
    ``workload``: ``ddl`` (:data:`DDL` rolled out, optimistic) or ``move`` (a move whose
    switch waits for a pessimistic lock holding rows of its old home: ``produce_move``).
    ``sink``: JDBC sink settings (``devkit.downstream_local.sink_settings``) to write the
    target to a database instead of Delta; its password reaches the job by environment.
    ``append_min_rows``: the append path of new keys on, with this ``sink.append_min_rows``
    (0: from the second batch on, so kills fall between a MERGE and its append)."""
    if sink and sink.get("password"):
        extra_env = {**(extra_env or {}), "SHARDMERGE__SINK__PASSWORD": str(sink["password"])}
    work.mkdir(parents=True, exist_ok=True)
    config = work / "job.yaml"
    base = (storage or str(work)).rstrip("/")
    lake = f"{base}/lake"
    job_sink = dict(sink or {})
    if append_min_rows is not None:
        # the split of a batch that also updates: its appends and MERGE in two commits
        job_sink.update(append_new_keys=True, append_min_rows=append_min_rows, append_mixed=True)
    if workload == "move":
        oracle = produce_move(bootstrap, source, shards, rows)
        write_config(config, bootstrap, source, lake, f"{base}/checkpoint", max_offsets,
                     mode="pessimistic", extra=move_settings(source), sink=job_sink)  # fmt: skip
    else:
        oracle = produce(bootstrap, source, shards, rows)
        write_config(config, bootstrap, source, lake, f"{base}/checkpoint", max_offsets,
                     sink=job_sink)  # fmt: skip
    report = Report()
    log = work / "job.log"
    for point in [*points, None]:
        started = time.time()
        if point is None and finish_in is not None:
            code = InProcessJob(config, log, extra_env or {}, finish_in).wait()
        else:
            code = run_job(config, point, log, extra_env)
        report.runs.append((point or "(no crash)", code, time.time() - started))
        print(f"  run crash_at={point or '-':18} exit {code:>3} in {time.time() - started:5.1f}s",
              file=sys.stderr, flush=True)  # fmt: skip
        if point is None and code != 0:
            raise RuntimeError(f"the final run failed with exit {code}; see {log}")
    if spark is None:
        from streaming.runtime.spark_session import build_spark

        spark = build_spark("shardmerge-killtest")
    final = compare(spark, lake, oracle, sink)
    final.runs = report.runs
    return final


def checkpoint_every(commits: int) -> dict[str, str]:
    """The job's environment for Delta checkpoints every ``commits`` commits of the tables
    it creates (``SHARDMERGE_SPARK_CONF``, added to what this process has there)."""
    from streaming.runtime.session_conf import ENV_CONF

    key = "spark.databricks.delta.properties.defaults.checkpointInterval"
    return {ENV_CONF: f"{os.environ.get(ENV_CONF, '')} {key}={commits}".strip()}


def on_object_store(stack: contextlib.ExitStack, state: Path) -> tuple[str, dict[str, str], Any]:
    """A local S3 store for the run: a new bucket, the job's S3A settings (through
    ``PYSPARK_SUBMIT_ARGS``, as a launcher would give them) and a session to compare with."""
    import uuid

    from devkit import objectstore
    from streaming.runtime.spark_session import build_spark

    store = stack.enter_context(objectstore.running("killtest", state))
    bucket = store.create_bucket(f"killtest-{uuid.uuid4().hex[:12]}")
    conf = {f"spark.hadoop.{k}": v for k, v in store.hadoop_conf().items()}
    args = " ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in conf.items())
    spark = build_spark("shardmerge-killtest", extra_conf=conf)
    return bucket, {"PYSPARK_SUBMIT_ARGS": f"{args} pyspark-shell"}, spark


def main() -> int:
    from devkit import kafka_local
    from streaming.faults import (
        APPEND_POINTS,
        CHECKPOINT_POINTS,
        JDBC_POINTS,
        MOVE_POINTS,
        POINTS,
    )

    parser = argparse.ArgumentParser(description="kill -9 the job at many points, check the table")
    parser.add_argument("--points", type=int, default=20, help="number of kills")
    parser.add_argument("--rows", type=int, default=1500, help="row changes per shard")
    parser.add_argument("--shards", type=int, default=8, help="shard tables")
    parser.add_argument("--workdir", default=str(ROOT / ".state" / "killtest"))
    parser.add_argument(
        "--storage",
        choices=["local", "s3"],
        default="local",
        help="where lake and checkpoint go: the workdir, or a bucket on a local S3 store",
    )
    parser.add_argument(
        "--workload",
        choices=["ddl", "move"],
        default="ddl",
        help="ddl: three DDLs rolled out shard by shard (optimistic); move: shard 0 moves "
        "while a pessimistic ADD COLUMN holds its rows, the switch in the batch that releases "
        "them (kills also right after the switch)",
    )
    parser.add_argument(
        "--sink",
        choices=["delta", "mariadb", "postgresql"],
        default="delta",
        help="where the target is written: Delta, or a local MariaDB or PostgreSQL server "
        "(the JDBC sink; its kill point jdbc_staged joins the cycle)",
    )
    parser.add_argument(
        "--append-min-rows",
        type=int,
        default=None,
        metavar="N",
        help="the append path of new keys on, with this sink.append_min_rows (0: from the "
        "second batch on; its kill point after_append joins the cycle); default: off",
    )
    parser.add_argument(
        "--checkpoint-interval",
        type=int,
        default=3,
        metavar="N",
        help="Delta checkpoints every N commits of each table the job creates (Delta's "
        "default: 10), so that kills inside a checkpoint (delta_checkpoint) come often",
    )
    parser.add_argument(
        "--at",
        action="append",
        metavar="POINT:N",
        help="kill at these points, in this order, instead of --points (repeatable)",
    )
    args = parser.parse_args()
    work = Path(args.workdir)
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    # Every protocol point in turn, at its first or second occurrence in a run: a run that
    # starts late in the workload may not reach a point a third time (it would then finish
    # without being killed; the report counts the kills that happened).
    every = POINTS + CHECKPOINT_POINTS + (MOVE_POINTS if args.workload == "move" else ())
    every += JDBC_POINTS if args.sink != "delta" else ()
    every += APPEND_POINTS if args.append_min_rows is not None else ()
    points = args.at or [
        # the switch runs once per run of its batch: its first occurrence
        f"{p}:{1 if p in MOVE_POINTS else 1 + (i // len(every)) % 2}"
        for i, p in ((i, every[i % len(every)]) for i in range(args.points))
    ]
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(kafka_local.running("killtest", work / "kafka"))
        storage, extra_env, spark = None, None, None
        sink = None
        if args.sink != "delta":
            from devkit import downstream_local

            sink = stack.enter_context(downstream_local.sink_settings(args.sink, work / "db"))
        if args.storage == "s3":
            storage, extra_env, spark = on_object_store(stack, work / "s3")
            print(f"lake and checkpoint under {storage}", file=sys.stderr, flush=True)
        extra_env = {**(extra_env or {}), **checkpoint_every(args.checkpoint_interval)}
        report = kill_test(
            broker.bootstrap, work / "job", points, shards=args.shards, rows=args.rows,
            max_offsets=250, storage=storage, extra_env=extra_env, spark=spark,
            workload=args.workload, sink=sink, append_min_rows=args.append_min_rows,
        )  # fmt: skip
    killed = sum(1 for _, code, _ in report.runs if code == -9)
    print(f"kills: {killed} of {len(points)} runs died by SIGKILL (others finished first)")
    print(f"rows: {report.rows} in the table, {report.expected} expected (oracle)")
    print(f"missing: {report.missing or 0}; unexpected: {report.unexpected or 0}; "
          f"duplicated keys: {report.duplicated_keys}")  # fmt: skip
    print("OK: zero lost, zero duplicated" if report.ok else "FAILED")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
