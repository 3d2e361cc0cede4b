"""The fast path against the exact path: the same records through the job twice, once as
it runs and once with the fast path switched off, and the two targets compared row by row.
With ``--switch append``, the same for the append path of provably new keys
(``streaming.batch.new_keys``): on from the second batch (``append_min_rows: 0``) and off.

    .venv/bin/python benchmarks/fast_path_check.py [--events 200000] [--max-offsets 50000]
        [--steady] [--mode optimistic] [--switch fast-path|append]

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
    parser.add_argument(
        "--switch",
        choices=("fast-path", "append"),
        default="fast-path",
        help="what the second run switches off: the fast path, or the append of new keys",
    )
    args = parser.parse_args()
    from coordinator.ids import TargetId
    from devkit import kafka_local
    from streaming.batch import writer
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
            what = args.switch.replace("-", " ")
            runs: tuple[tuple[str, Any, dict[str, Any] | None], ...] = (
                (f"{what} on", as_built, None),
                (f"{what} off", never, None),
            )
            if args.switch == "append":
                runs = (
                    (f"{what} on", as_built, {"append_new_keys": True, "append_min_rows": 0}),
                    (f"{what} off", as_built, {"append_new_keys": False}),
                )
            for name, rule, sink in runs:
                writer.Writer.fast_targets = rule  # type: ignore[method-assign]
                s = settings(broker.bootstrap, "bench", work / name.replace(" ", "-"),
                             args.mode, args.max_offsets, sink)  # fmt: skip
                secs, processor = run_job(spark, s)
                table = spark.read.format("delta").load(s.table_path(TargetId("shop", "orders")))
                tables[name] = table
                if args.switch == "fast-path":
                    writes = processor.observer.totals["fast_path"]
                    said = f"{writes} target writes on the fast path"
                else:
                    writes = processor.observer.target_rows[("shop.orders", "appended")]
                    said = f"{writes:,} rows appended"
                fast_writes = fast_writes or writes
                print(f"{name}: {secs:.1f} s, {said}, {table.count():,} rows")
            on, off = tables[f"{what} on"], tables[f"{what} off"]
            only_on, only_off = on.exceptAll(off).count(), off.exceptAll(on).count()
            print(f"rows only with the {what}: {only_on}; only without it: {only_off}")
            spark.stop()
    finally:
        writer.Writer.fast_targets = as_built  # type: ignore[method-assign]
        shutil.rmtree(work, ignore_errors=True)
    if only_on or only_off:
        print(f"DIFFERENT: the {args.switch} run wrote other rows than the run without it")
        return 1
    if not fast_writes:
        print(f"NOT COMPARED: no batch took the {args.switch} path")
        return 1
    print("same rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
