"""The fast path against the exact path: the same records through the job twice, once as
it runs and once with the fast path switched off, and the two targets compared row by row.

    .venv/bin/python benchmarks/fast_path_check.py [--events 200000] [--max-offsets 50000]
        [--steady] [--mode optimistic]

Produces the workload of ``pipeline_throughput.py`` (an ADD COLUMN and a column rename
rolled out shard by shard, read ahead of the rows; ``--steady``: rows only) to a local
broker, runs the streaming job on it with each path, and prints each run's time, its
target writes on the fast path, and the rows each table has that the other lacks
(``exceptAll`` both ways). Exits 1 when the tables differ, or when the run meant to use
the fast path never took it (nothing would have been compared). A soak of the fast
path's judgement, not a CI test: the suite checks the same rules on small batches. The
times are no comparison: the first run also warms the JVM up.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline_throughput import produce_workload, run_job, settings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--max-offsets", type=int, default=50_000)
    parser.add_argument("--steady", action="store_true", help="no DDL rollout: rows only")
    parser.add_argument("--mode", choices=("optimistic", "pessimistic"), default="optimistic")
    args = parser.parse_args()
    from coordinator.ids import TargetId
    from devkit import kafka_local
    from streaming.batch.protocol import writer
    from streaming.runtime.spark_session import build_spark

    work = Path(tempfile.mkdtemp(prefix="shardmerge-fastcheck-"))
    as_built = writer.Writer.fast_targets

    def never(self: Any, planner: Any, plan: Any) -> set[Any]:
        return set()

    try:
        with kafka_local.running("bench", work / "kafka") as broker:
            produce_workload(broker.bootstrap, args.shards, args.events, args.steady)
            spark = build_spark("shardmerge-fast-path-check")
            tables = {}
            fast_writes = 0
            for name, rule in (("fast path on", as_built), ("fast path off", never)):
                writer.Writer.fast_targets = rule  # type: ignore[method-assign]
                s = settings(broker.bootstrap, "bench", work / name.replace(" ", "-"),
                             args.mode, args.max_offsets)  # fmt: skip
                secs, processor = run_job(spark, s)
                table = spark.read.format("delta").load(s.table_path(TargetId("shop", "orders")))
                tables[name] = table
                writes = processor.observer.totals["fast_path"]
                fast_writes = fast_writes or writes
                print(f"{name}: {secs:.1f} s, {writes} target writes on the fast path, "
                      f"{table.count():,} rows")  # fmt: skip
            on, off = tables["fast path on"], tables["fast path off"]
            only_on, only_off = on.exceptAll(off).count(), off.exceptAll(on).count()
            print(f"rows only with the fast path: {only_on}; only without it: {only_off}")
            spark.stop()
    finally:
        writer.Writer.fast_targets = as_built  # type: ignore[method-assign]
        shutil.rmtree(work, ignore_errors=True)
    if only_on or only_off:
        print("DIFFERENT: the fast path wrote other rows than the exact path")
        return 1
    if not fast_writes:
        print("NOT COMPARED: no batch took the fast path")
        return 1
    print("same rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
