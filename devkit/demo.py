"""``shardmerge demo``: the embedded default, end to end on this machine.

Starts a local Kafka broker, writes a sharded Debezium workload (8 shards of
``shop.orders`` by default) during which two DDLs roll out shard by shard (an ADD COLUMN,
then a RENAME COLUMN), runs the streaming job on it, prints progress and every change of
lock stage, and ends with a summary, the path of the Delta table to inspect and a check
of that table against the shards' own final rows (the oracle the kill -9 test uses; exit
status 1 when they differ). The producer is closed before the broker stops.

The job's dashboard, ``/metrics`` and operator API are served while it runs (the URL is
printed), and after the workload is done until Ctrl-C, so the rollout and the final state
can be looked at; ``--exit`` stops at once instead.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from streaming.config import (
    KafkaSettings,
    OpsSettings,
    RouteSettings,
    Settings,
    SinkSettings,
    SourceSettings,
    TargetSettings,
)

__all__ = ["cli_main"]

ROOT = Path(__file__).resolve().parents[1]
# Each statement starts at its fraction of the workload on the first shard and reaches the
# last one ROLLOUT_SPAN later, the way an operator runs it shard after shard: at the
# default size and rate each rollout spans about 30 s, several micro-batches. The ADD COLUMN joins
# the shards' schemas at once (optimistic); the rename is a conflicting DDL, so every shard
# that ran it is held, its rows kept in the stash, until the last shard runs it too.
DDL_ROLLOUT = {
    0.1: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)",
    0.5: "ALTER TABLE {table} CHANGE note memo VARCHAR(64)",
}
ROLLOUT_SPAN = 0.3


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def send_paced(producer: Any, events: list[Any], rate: int) -> int:
    """``send_workload`` at about ``rate`` events per second (0: as fast as it goes)."""
    from devkit.producer import send_workload

    if rate <= 0:
        return send_workload(producer, events)
    step = max(1, rate // 10)
    start = time.monotonic()
    for i in range(0, len(events), step):
        send_workload(producer, events[i : i + step])
        ahead = start + (i + step) / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    return len(events)


def cli_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="shardmerge demo", description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rows", type=int, default=12_500, help="row changes per shard")
    parser.add_argument("--workdir", default=str(ROOT / ".state" / "demo"))
    parser.add_argument("--mode", choices=["optimistic", "pessimistic"], default="optimistic")
    parser.add_argument("--trigger", default="2 seconds", help="micro-batch interval")
    parser.add_argument("--max-offsets", type=int, default=25_000, help="records per batch")
    parser.add_argument(
        "--rate",
        type=int,
        default=1_000,
        help="row changes and DDL written per second once the job runs, as a live upstream "
        "would (0: at once); above what the job keeps up with, the rollouts resolve in fewer "
        "batches",
    )
    parser.add_argument(
        "--port", type=int, default=9464, help="dashboard port on 127.0.0.1 (0: any free one)"
    )
    parser.add_argument(
        "--exit", action="store_true", help="stop when the workload is done (no serving)"
    )
    parser.add_argument(
        "--screenshot",
        metavar="PNG",
        help="save a picture of the dashboard when the rename first holds half the shards "
        "(headless Chromium: scripts/install-chromium)",
    )
    args = parser.parse_args(argv)

    from devkit import kafka_local
    from devkit.producer import DebeziumProducer
    from devkit.workload import Oracle, sharded_workload
    from streaming.job import build_query
    from streaming.ops.running import start_ops
    from streaming.runtime.spark_session import build_spark
    from streaming.storage.state_store import StateStore

    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    say(f"demo: working in {work}")
    started = time.time()
    with kafka_local.running("demo", work / "kafka") as broker:
        say(f"demo: Kafka broker on {broker.bootstrap} (log {broker.log_path})")
        settings = Settings(
            kafka=KafkaSettings(
                bootstrap=broker.bootstrap, max_offsets_per_trigger=args.max_offsets
            ),
            # The schema-change topic `shop` is read ahead of the data (Debezium's default):
            # a row never waits for a DDL already written. The workload is written at
            # `--rate`, so the rollout spreads over micro-batches and the lock's stages show
            # as they change; only rows a lock holds go through the stash.
            sources=[SourceSettings(format="debezium", pattern=r"shop(\..*)?")],
            routes=[RouteSettings(target="shop.orders", table="orders_*")],
            targets={"shop.orders": TargetSettings(mode=args.mode)},
            sink=SinkSettings(path=str(work / "lake")),
            checkpoint=str(work / "checkpoint"),
            trigger_interval=args.trigger,
            ops=OpsSettings(port=args.port),
        )
        producer = DebeziumProducer(broker.bootstrap, "shop")
        events = list(
            sharded_workload(args.shards, args.rows, ddl_at=DDL_ROLLOUT, stagger=ROLLOUT_SPAN)
        )
        oracle = Oracle()
        for ev in events:
            oracle.take(ev)
        total = {"n": 0, "done": False, "error": None}
        # The shards' CREATE TABLEs first (they make the topics), the rest once the job ran
        # its first batch: an upstream that is live while the job runs. A workload written
        # before the job starts would be read with every shard's DDL already in hand (the
        # schema-change topic is read ahead), and the rollouts would resolve in a batch.
        creates, rest = events[: args.shards], events[args.shards :]
        first_batch = threading.Event()

        def produce() -> None:
            try:
                total["n"] = send_paced(producer, creates, 0)
                first_batch.wait()
                total["n"] += send_paced(producer, rest, args.rate)
                producer.close()  # flushed, and no client left to outlive the broker
            except Exception as e:
                total["error"] = e
            total["done"] = True

        thread = threading.Thread(target=produce, name="demo-producer", daemon=True)
        thread.start()
        say(f"demo: {args.shards} shards x {args.rows:,} row changes, written at "
            f"{args.rate:,} a second once the job runs; DDL rollout, shard after shard: "
            f"{', '.join(DDL_ROLLOUT.values())}")  # fmt: skip
        time.sleep(3)
        spark = build_spark("shardmerge-demo")
        query, processor = build_query(spark, settings)
        say("demo: streaming job started (Spark Structured Streaming, foreachBatch)")
        try:
            ops = start_ops(spark, processor, query)
        except OSError as e:  # the port is taken (another demo?): any free one will do
            say(f"demo: port {args.port} is not free ({e}); the dashboard takes another")
            ops = start_ops(spark, processor, query, OpsSettings(port=0))
        say(f"demo: dashboard {ops.page}  (metrics {ops.url}metrics)")
        store = StateStore(spark, settings.checkpoint)
        last_batch, last_lock, idle = -1, None, 0
        picture = args.screenshot  # taken once, when the rename holds half the shards
        try:
            while True:
                time.sleep(1)
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                latest = store.latest()
                if latest is not None and latest[0] != last_batch:
                    first_batch.set()
                    last_batch, data = latest
                    last_lock = _report(data, last_lock, producer.sent)
                    if picture and 2 * len(last_lock[1]) >= args.shards:
                        _screenshot(ops.page, picture)
                        picture = None
                status = query.status
                caught_up = not status["isDataAvailable"] and not status["isTriggerActive"]
                idle = idle + 1 if total["done"] and caught_up else 0
                if idle >= 3:
                    break
            if total["error"] is not None:
                raise RuntimeError(f"the producer failed: {total['error']}")
            if args.exit:
                query.stop()  # first, so that the summary is the last thing printed
            same = _summary(
                spark, settings, store, total["n"], time.time() - started,
                dict(processor.observer.totals), oracle.rows,
            )  # fmt: skip
            if not args.exit:
                _serve(query, ops.page)
        finally:
            ops.stop()
            query.stop()
        spark.stop()
    return 0 if same else 1


def _screenshot(page: str, path: str) -> None:
    """The dashboard at ``page`` as a PNG at ``path``, taken in headless Chromium once the
    page shows a held shard. A failure is said and the demo goes on."""
    try:
        from selenium.webdriver.support.ui import WebDriverWait

        from devkit.browser import headless_chromium

        with headless_chromium(1400, 1700) as driver:
            driver.get(page)
            WebDriverWait(driver, 30).until(
                lambda d: d.execute_script("return !!document.querySelector('tr[data-shard]')")
            )
            driver.execute_script("document.getElementById('locks').scrollIntoView()")
            driver.save_screenshot(path)
        say(f"           dashboard picture saved: {path}")
    except Exception as e:  # the picture is an extra: the demo's check still decides
        say(f"demo: no dashboard picture ({type(e).__name__}: {e})")


def _serve(query: Any, url: str) -> None:
    """Keep the job (and its dashboard) running until Ctrl-C: operator commands from the
    page still apply, at the next micro-batch that new records start."""
    say("")
    say(f"demo: the dashboard keeps serving at {url} -- Ctrl-C to stop (--exit: no serving)")
    try:
        while query.exception() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        say("demo: stopping")
        return
    raise RuntimeError(str(query.exception()))


def _report(data: dict[str, Any], last: tuple[Any, ...] | None, sent: int) -> tuple[Any, ...]:
    """One line per micro-batch; the lock's story whenever its stage or its held shards
    change: which statement it waits on, how many shards ran it, which are held."""
    stats = data["stats"]
    lock = data["locks"][0] if data["locks"] else {"stage": "none", "blocked": [], "shards": 0}
    blocked = lock["blocked"]
    say(
        f"batch {stats['batch']:>4}: {stats['events']:>7,} events, {stats['written']:>7,} "
        f"written, {stats['held']:>6,} held, {stats['replayed']:>6,} replayed | lock "
        f"{lock['stage']}, {len(blocked)} shard(s) held | produced {sent:,}"
    )
    for ddl in stats["downstream_ddl"]:
        say(f"           downstream DDL: {ddl}")
    now = (lock["stage"], tuple(blocked))
    if now != last:
        say(f"           {_lock_story(lock, last)}")
    return now


def _lock_story(lock: dict[str, Any], last: tuple[Any, ...] | None) -> str:
    stage, blocked, shards = lock["stage"], lock["blocked"], lock.get("shards", 0)
    if not blocked:
        if last is not None and last[1]:
            return f"lock {stage}: every shard ran it; the held rows were replayed in order"
        return f"lock {stage}: no shard held"
    pending = lock.get("pending_ddl") or []
    sql = pending[0]["sql"] if pending else "a DDL"
    names = ", ".join(s.split(".", 1)[-1] for s in blocked[:4])
    more = f" and {len(blocked) - 4} more" if len(blocked) > 4 else ""
    return (
        f"lock {stage}: {len(blocked)} of {shards} shards ran {sql!r} and are held "
        f"(their rows wait in the stash): {names}{more}"
    )


def _summary(
    spark: Any,
    settings: Settings,
    store: Any,
    produced: int,
    elapsed: float,
    totals: dict[str, int],
    oracle: dict[Any, dict[str, Any]],
) -> bool:
    """Prints the summary; whether the table equals the shards' final rows."""
    from coordinator.ids import TargetId
    from devkit.killtest import compare

    path = settings.table_path(TargetId("shop", "orders"))
    df = spark.read.format("delta").load(path)
    rows = df.count()
    dead = 0
    if Path(settings.dead_letters()).exists():
        dead = spark.read.format("delta").load(settings.dead_letters()).count()
    latest = store.latest()
    lock = latest[1]["locks"][0] if latest and latest[1]["locks"] else {}
    say("")
    say("demo: done")
    say(f"  produced        {produced:,} events in {elapsed:.0f} s (end to end)")
    say(f"  Delta table     {path}")
    say(f"  rows            {rows:,}")
    columns = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in df.schema.fields)
    say(f"  columns         {columns}")
    say(f"  lock            {lock.get('stage', 'none')}, held: {lock.get('blocked') or 'none'}")
    say(f"  dead letters    {dead}")
    say(
        f"  row traffic     {totals.get('written', 0):,} written, {totals.get('held', 0):,} "
        f"held in the stash, {totals.get('replayed', 0):,} replayed (over every batch)"
    )
    say(f"  inspect         pyspark: spark.read.format('delta').load('{path}')")
    check = compare(spark, settings.sink.path, oracle)
    if check.ok:
        say(f"  check           the table equals the shards' final rows ({check.expected:,} rows)")
        return True
    say(
        f"  check           FAILED: {check.rows:,} rows against {check.expected:,} expected, "
        f"{check.duplicated_keys} duplicated keys; missing {check.missing}, unexpected "
        f"{check.unexpected}"
    )
    return False
