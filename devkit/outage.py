"""A broker outage under a running job: does the job read again when the broker is back?

A continuous job (a processing-time trigger) reads half of a sharded workload; the broker
stops for ``--away`` seconds and starts again on the same address with its data; the other
half is produced. The harness prints when each batch ran (from the job's state) and when
the Delta table equals the oracle again, or that it never did within ``--deadline``.

``scripts/broker-outage [--shards 4] [--rows 400] [--away 20] [--deadline 120]``
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["main", "outage"]


def _send(producer: Any, events: list[Any], oracle: Any) -> None:
    from devkit.producer import send_workload

    for ev in events:
        oracle.take(ev)
    send_workload(producer, events)
    producer.flush()


def outage(
    shards: int = 4,
    rows: int = 400,
    away: float = 20.0,
    deadline: float = 120.0,
    max_offsets: int = 10_000,
    stop_after: int | None = None,
    spark: Any = None,
    base: Path | None = None,
    broker: Any = None,
    process: bool = False,
) -> dict[str, Any]:
    """``stop_after``: stop the broker once that many batches completed (the job still
    reading), instead of once the first half is in the table. ``spark``: the session to
    run the job in (default: a local one, stopped at the end); ``base``: the folder for
    the broker, lake and checkpoint (default: a new temporary one); ``broker``: a
    ``devkit.faultsuite.Broker`` to stop and start (default: one of its own, stopped at
    the end); ``process``: the job as a process of its own (``python -m streaming.job``, as
    ``shardmerge run``), the harness reading its table from its own session."""
    import subprocess
    import sys

    from devkit.faultsuite import Broker
    from devkit.killtest import DDL, compare, write_config
    from devkit.producer import DebeziumProducer
    from devkit.workload import Oracle, sharded_workload
    from streaming.config import load_settings
    from streaming.job import run
    from streaming.runtime.spark_session import MANY_TABLES_CONF, build_spark
    from streaming.storage.state_store import StateStore

    base = base or Path(tempfile.mkdtemp(prefix="shardmerge-outage-"))
    own_broker = broker is None
    if own_broker:
        broker = Broker(base / "kafka", "outage")
    source = f"outage{uuid.uuid4().hex[:6]}"
    events = list(sharded_workload(shards, rows, ddl_at=DDL, seed=11))
    half = len(events) // 2
    oracle = Oracle()
    # One producer across the outage, as one connector: its binlog positions go on (a new
    # one would start them again, as a server whose binlog was reset).
    producer = DebeziumProducer(broker.bootstrap, source)
    _send(producer, events[:half], oracle)
    lake, checkpoint = (base / "lake").as_uri(), (base / "checkpoint").as_uri()
    config = base / "job.yaml"
    write_config(config, broker.bootstrap, source, lake, checkpoint, max_offsets, read_ahead=True)
    with open(config, "a") as f:
        f.write('trigger_interval: "2 seconds"\n')
    settings = load_settings(config)
    own = spark is None
    if own:
        spark = build_spark("shardmerge-outage", extra_conf=MANY_TABLES_CONF)
    failure: list[BaseException] = []

    def job() -> None:
        try:
            run(settings, spark=spark)
        except BaseException as e:  # reported by the harness, not swallowed
            failure.append(e)

    proc: subprocess.Popen[bytes] | None = None
    thread = threading.Thread(target=job, name="outage-job", daemon=True)
    if process:
        log = open(base / "job.log", "ab")  # noqa: SIM115 - closed with the process below
        proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.job", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        print(f"outage: the job runs as process {proc.pid} (log {base / 'job.log'})")
    else:
        thread.start()
    store = StateStore(spark, checkpoint)

    def exact() -> bool:
        if failure:
            raise RuntimeError(f"the job failed: {failure[0]!r}")
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the job process ended with {proc.returncode}")
        try:
            report = compare(spark, lake, oracle.rows)
        except Exception as e:  # no table yet: not equal
            if "is not a Delta table" in str(e) or "PATH_NOT_FOUND" in str(e):
                return False
            raise
        return report.ok

    def wait(what: str, limit: float) -> float | None:
        started = time.monotonic()
        while time.monotonic() - started < limit:
            if exact():
                return time.monotonic() - started
            time.sleep(1)
        print(f"outage: {what}: not equal to the oracle after {limit:.0f} s")
        return None

    if stop_after is None:
        first = wait("first half", deadline)
    else:
        started = time.monotonic()
        while (store.latest() or (-1,))[0] < stop_after - 1:
            if failure or time.monotonic() - started > deadline:
                raise RuntimeError(f"no batch {stop_after - 1} within {deadline} s: {failure}")
            time.sleep(0.2)
        first = None
    latest = store.latest()
    before = latest[0] if latest else None
    print(f"outage: first half exact after {first} s, batch {before}; stopping the broker")
    address = broker.bootstrap
    broker.stop()
    time.sleep(away)
    broker.start()
    if broker.bootstrap != address:
        raise RuntimeError(f"the broker came back on {broker.bootstrap}, not {address}")
    print(f"outage: broker back on {broker.bootstrap} after {away:.0f} s")
    back = time.monotonic()
    _send(producer, events[half:], oracle)
    producer.close()
    second = wait("second half", deadline)
    latest = store.latest()
    result = {
        "first_half_s": first,
        "second_half_s": second,
        "since_back_s": None if second is None else time.monotonic() - back,
        "batch_before": before,
        "batch_after": latest[0] if latest else None,
        "job_failed": repr(failure[0]) if failure else None,
    }
    print(f"outage: {result}")
    if proc is not None:
        proc.terminate()
        proc.wait(60)
    for q in spark.streams.active:
        q.stop()
    if thread.is_alive():
        thread.join(timeout=60)
    if own_broker:
        broker.stop()
    if own:
        spark.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="broker-outage", description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--away", type=float, default=20.0)
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--max-offsets", type=int, default=10_000)
    parser.add_argument(
        "--stop-after", type=int, help="stop the broker after this many batches (mid-read)"
    )
    parser.add_argument(
        "--process", action="store_true", help="run the job as a process of its own"
    )
    args = parser.parse_args(argv)
    from shardmerge.printable import setup_logging

    setup_logging()
    result = outage(
        args.shards,
        args.rows,
        args.away,
        args.deadline,
        args.max_offsets,
        args.stop_after,
        process=args.process,
    )
    return 0 if result["second_half_s"] is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
