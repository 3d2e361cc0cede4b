"""Rate of the Debezium JSON producer: a sharded workload pushed to a local broker.

Starts a throw-away broker (``devkit.kafka_local``) in a temp dir, then sends
``--shards`` x ``--rows`` row changes (plus their tombstones and the DDL), and prints
records/s for building only (no Kafka), then for ``shardmerge produce`` (building and
sending, flush included).

    .venv/bin/python benchmarks/producer_rate.py [--shards 16] [--rows 62500] [--schemas-enable]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
import uuid

from devkit.debezium_build import DebeziumBuilder
from devkit.kafka_local import running
from devkit.producer import cli_main
from devkit.workload import sharded_workload

DDL = {0.3: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--rows", type=int, default=62_500)
    parser.add_argument("--schemas-enable", action="store_true")
    args = parser.parse_args()

    builder = DebeziumBuilder("bench", schemas_enable=args.schemas_enable)
    start, n = time.monotonic(), 0
    for ev in sharded_workload(args.shards, args.rows, ddl_at=DDL):
        if ev.kind == "row":
            n += len(builder.row(ev.db, ev.table, ev.op, ev.before, ev.after, ev.schema))
        else:
            builder.ddl(ev.db, ev.table, ev.statement or "", ev.schema)
            n += 1
    built = time.monotonic() - start

    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(f"build only (no Kafka): {n:,} records in {built:.1f}s = {n / built:,.0f} records/s")
    with tempfile.TemporaryDirectory() as tmp, running("bench", tmp) as broker:
        argv = ["--bootstrap", broker.bootstrap, "--source", f"bench{uuid.uuid4().hex[:8]}",
                "--shards", str(args.shards), "--rows", str(args.rows)]  # fmt: skip
        argv += [f"--ddl={f}:{sql}" for f, sql in DDL.items()]
        argv += ["--schemas-enable"] if args.schemas_enable else []
        print("build + send + flush (shardmerge produce):", flush=True)
        cli_main(argv)


if __name__ == "__main__":
    main()
