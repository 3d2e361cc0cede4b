"""What a declared move costs the streaming job: a table of ``--rows`` rows moves to
another server while its old side takes writes.

    .venv/bin/python benchmarks/move_cost.py [--rows 200000] [--writes 2000] [--chunks 8]

One local broker, one Spark session, the job with AvailableNow (each phase's events are
produced first, then one run of the job reads them). Upstream (sources ``s3`` and ``s9``,
Debezium JSON, the copy tool of the scenario language):

0. *load*: ``s3.db_3.orders_7`` gets ``--rows`` rows;
1. *copy*, in ``--chunks`` rounds: the copy tool inserts a chunk of the rows into
   ``s9.db_9.orders_23`` while ``s3`` takes ``--writes`` updates and inserts, and ends each
   round with a heartbeat row on both sources;
2. *catch-up and freeze*: the copy catches up, the ``frozen`` marker, then ``s3``'s cleanup
   (``--writes`` deletes of moved keys: never applied);
3. *switch*: the ``switched`` marker, then ``--writes`` application writes on ``s9``.

Measured: wall time of each phase's job run; the stash's rows after each run (rows waiting
for the watermark, the cleanup kept until the switch, ``s9``'s writes queued before it);
the switch: its batch's wall time, and the Delta commits it made on the target (the
re-home UPDATE: one) besides the batch's MERGE; the rows against the oracle (the upstream
model's tables: every key once, with ``s9``'s values and extract value after the switch).

``--rerun-switch``: after the switch, Spark's commit of the job's last batch is deleted
and the job runs again, so that batch (the switch's) runs a second time, as after a crash
between its writes and its commit: the rows are compared with the oracle again.

Baseline, in the same run: the same events read by a job *without* ``moves:`` (a moved
table is a new shard there): its phase times, and its rows against the same oracle (the
copy written a second time, the cleanup deleting rows that live on ``s9``). Prints a
Markdown table; docs/benchmarks.md keeps the latest run.
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

from pipeline_throughput import run_job

from coordinator.ids import ShardId
from coordinator.moves import MoveSettings
from coordinator.scenario.moving import CopyTool
from coordinator.scenario.upstream import RowEvent, Upstream
from schemas.ddl import parse_create_table
from streaming.config import (
    ExtractSettings,
    KafkaSettings,
    RouteSettings,
    Settings,
    SinkSettings,
    SourceSettings,
    TargetSettings,
)

FROM = ShardId("s3", "db_3", "orders_7")
TO = ShardId("s9", "db_9", "orders_23")
TABLE = "CREATE TABLE {t} (id BIGINT PRIMARY KEY, amount INT, note VARCHAR(32))"
MOVE = MoveSettings.model_validate({"id": "m1", "from": str(FROM), "to": str(TO)})


class Upstreams:
    """The upstream model and a producer per source: every change goes to both."""

    def __init__(self, bootstrap: str, namespace: str) -> None:
        from devkit.producer import DebeziumProducer

        self.up = Upstream()
        self.producers = {
            s: DebeziumProducer(bootstrap, s, topic_namespace=namespace) for s in ("s3", "s9")
        }
        self.tool = CopyTool(self.up, self.sql, self.send)

    def sql(self, shard: ShardId, text: str) -> None:
        table = self.up.tables.get(shard)
        self.producers[shard.source].ddl(
            shard.db, shard.table, text, table.schema if table else None
        )

    def create(self, shard: ShardId) -> None:
        text = TABLE.format(t=shard.table)
        self.up.create(shard, parse_create_table(text))
        self.sql(shard, text)

    def send(self, e: RowEvent) -> None:
        op: Literal["c", "u", "d"] = "c" if e.op == "insert" else "u" if e.op == "update" else "d"
        self.producers[e.shard.source].row(
            e.shard.db, e.shard.table, op, e.before, e.after, e.schema
        )

    def flush(self) -> None:
        for p in self.producers.values():
            p.flush()


def settings(root: Path, bootstrap: str, namespace: str, moves: bool) -> Settings:
    return Settings(
        kafka=KafkaSettings(bootstrap=bootstrap),
        sources=[SourceSettings(format="debezium", pattern=f"{namespace}.*")],
        routes=[
            RouteSettings(
                target="shop.orders",
                table="orders_*",
                extract=ExtractSettings(source_column="_source"),
            )
        ],
        targets={"shop.orders": TargetSettings(mode="optimistic")},
        sink=SinkSettings(path=str(root / "lake")),
        checkpoint=str(root / "checkpoint"),
        moves=[MOVE] if moves else [],
    )


def produce(u: Upstreams, rows: int, writes: int, chunks: int, rng: random.Random) -> list[Any]:
    """The phases' producers, each a function that produces its events (run in order,
    the job reading after each)."""
    up = u.up

    def load() -> None:
        u.create(FROM)
        for i in range(rows):
            u.send(up.insert(FROM, {"id": i, "amount": i % 1000, "note": "v0"}))

    def side_writes(n: int) -> None:
        keys = list(up.table(FROM).rows)
        for _ in range(n):
            if rng.random() < 0.8:
                (key,) = rng.choice(keys)
                u.send(up.update(FROM, {"id": key}, {"amount": rng.randrange(10**6)}))
            else:
                u.send(up.insert(FROM, {"id": rows + rng.randrange(10**9), "amount": 1}))

    def copy_round(k: int) -> Any:
        def run() -> None:
            if k == 0:
                u.create(TO)
            # the copier's chunk: `to`'s inserts of a slice of from's keys
            keys = sorted(up.table(FROM).rows)
            have = up.table(TO).rows
            for key in keys[k * len(keys) // chunks : (k + 1) * len(keys) // chunks]:
                if key not in have:
                    u.send(up.insert(TO, dict(up.table(FROM).rows[key])))
            side_writes(writes // chunks)
            u.tool.marker(MOVE.move(), "heartbeat")

        return run

    def freeze() -> None:
        u.tool.copy(MOVE.move())  # the catch-up: inserts, updates and deletes on `to`
        u.tool.marker(MOVE.move(), "frozen")
        for (key,) in rng.sample(sorted(up.table(FROM).rows), writes):  # the cleanup
            u.send(up.delete(FROM, {"id": key}))

    def switch() -> None:
        u.tool.marker(MOVE.move(), "switched")
        keys = sorted(up.table(TO).rows)
        for (key,) in rng.sample(keys, writes):
            u.send(up.update(TO, {"id": key}, {"note": "after"}))

    return (
        [("load", load)]
        + [(f"copy {k + 1}/{chunks}", copy_round(k)) for k in range(chunks)]
        + [("catch-up, freeze, cleanup", freeze), ("switch", switch)]
    )


def oracle(up: Upstream) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The rows the target must end with: every key once, as its home (``to``, after the
    switch) has it, under ``to``'s extract value. What the cleanup left on ``from`` is no
    row of the target any more."""
    return {(r["id"], TO.source): (r["amount"], r["note"]) for r in up.table(TO).rows.values()}


def compare(spark: Any, s: Settings, want: dict[Any, Any]) -> dict[str, int]:
    from coordinator.ids import TargetId

    df = spark.read.format("delta").load(s.table_path(TargetId("shop", "orders")))
    have: dict[Any, Any] = {}
    dup = 0
    for r in df.collect():
        key = (r["id"], r["_source"])
        dup += key in have
        have[key] = (r["amount"], r["note"])
    lost = sum(1 for k in want if k not in have)
    extra = sum(1 for k in have if k not in want)
    wrong = sum(1 for k, v in want.items() if k in have and have[k] != v)
    return {"rows": len(have), "lost": lost, "extra": extra, "wrong": wrong, "dup": dup}


def rerun(s: Settings) -> None:
    """Delete Spark's commit of the job's last batch: its next run runs it again."""
    commits = Path(s.checkpoint) / "spark" / "commits"
    last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)


def stash_rows(spark: Any, processor: Any) -> int:
    from streaming.storage.delta_sink import delta_table_at

    path = processor.stash_path
    return spark.read.format("delta").load(path).count() if delta_table_at(spark, path) else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the moved table")
    parser.add_argument("--writes", type=int, default=2_000, help="writes per phase")
    parser.add_argument("--chunks", type=int, default=8, help="rounds of the copy")
    parser.add_argument(
        "--rerun-switch", action="store_true", help="run the switch's batch again (see above)"
    )
    args = parser.parse_args()
    # The moves' log (each switch says so): a re-run switch batch shows a second switch.
    logging.basicConfig(format="%(name)s: %(message)s")
    logging.getLogger("shardmerge.moves").setLevel(logging.INFO)
    from delta.tables import DeltaTable

    from coordinator.ids import TargetId
    from devkit import kafka_local
    from streaming.runtime.spark_session import build_spark

    work = Path(tempfile.mkdtemp(prefix="shardmerge-move-"))
    results: dict[bool, dict[str, Any]] = {}
    again: dict[str, Any] | None
    try:
        with kafka_local.running("move", work / "kafka") as broker:
            spark = build_spark("shardmerge-move-cost")
            # A warm-up run (its own topics and tables), so that neither measured run
            # pays the JVM's and Spark's first-use costs.
            warm = Upstreams(broker.bootstrap, "warm_")
            for _, run in produce(warm, 2_000, 100, 1, random.Random(1))[:2]:
                run()
            warm.flush()
            run_job(spark, settings(work / "warm", broker.bootstrap, "warm_", True))
            warm.producers.clear()
            for moves in (True, False):
                ns = f"mv{int(moves)}_"
                s = settings(work / ns, broker.bootstrap, ns, moves)
                u = Upstreams(broker.bootstrap, ns)
                phases = produce(u, args.rows, args.writes, args.chunks, random.Random(7))
                times: list[tuple[str, float, int]] = []
                switch_commits: list[str] = []
                for name, run in phases:
                    run()
                    u.flush()
                    path = s.table_path(TargetId("shop", "orders"))
                    before = (
                        DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
                        if name == "switch"
                        else None
                    )
                    seconds, processor = run_job(spark, s)
                    times.append((name, seconds, stash_rows(spark, processor)))
                    print(f"{'move' if moves else 'no move'}: {name}: {seconds:.1f} s", flush=True)
                    if before is not None:
                        history = DeltaTable.forPath(spark, path).history()
                        switch_commits = [
                            r["operation"] for r in history.collect() if r["version"] > before
                        ]
                u.producers.clear()
                again = None
                if moves and args.rerun_switch:
                    path = s.table_path(TargetId("shop", "orders"))
                    last = DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
                    rerun(s)
                    seconds, _ = run_job(spark, s)
                    again = {**compare(spark, s, oracle(u.up))}
                    again["commits"] = [  # the re-run's writes were done: Delta skips them
                        r["operation"]
                        for r in DeltaTable.forPath(spark, path).history().collect()
                        if r["version"] > last
                    ]
                    print(f"the switch's batch run again: {seconds:.1f} s, {again}", flush=True)
                results[moves] = {
                    "again": again,
                    "times": times,
                    "commits": switch_commits,
                    "rows": compare(spark, s, oracle(u.up)),
                }
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"rows {args.rows:,}, writes per phase {args.writes:,}, copy rounds {args.chunks}")
    print()
    print("| phase | with `moves:` (s) | stash rows after | without `moves:` (s) |")
    print("|---|---:|---:|---:|")
    for (name, with_s, stash), (_, without_s, _) in zip(
        results[True]["times"], results[False]["times"], strict=True
    ):
        print(f"| {name} | {with_s:.1f} | {stash:,} | {without_s:.1f} |")
    peak = max(stash for _, _, stash in results[True]["times"])
    print()
    print(f"peak stash rows with `moves:`: {peak:,}")
    print(f"the switch run's commits on the target: {results[True]['commits']}")
    again = results[True]["again"]
    if again is not None:
        print(f"with `moves:`, after the switch's batch ran again: {again}")
    for moves in (True, False):
        r = results[moves]["rows"]
        print(
            f"{'with' if moves else 'without'} `moves:` against the oracle: rows {r['rows']:,}, "
            f"lost {r['lost']:,}, extra {r['extra']:,}, wrong values {r['wrong']:,}, "
            f"duplicated {r['dup']:,}"
        )


if __name__ == "__main__":
    main()
