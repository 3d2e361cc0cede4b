"""What ``shardmerge lag`` costs at thousands of partitions (target: under 2 s at 4,096).

    .venv/bin/python benchmarks/lag_cost.py [--layouts 4096x1 256x16 1x4096] [--records 1]

For each layout ``TOPICSxPARTITIONS`` (4,096 shard topics of one partition each, as
Debezium writes one topic per shard table; 256 topics of 16; one routed topic of 4,096),
a local broker gets the topics and ``--records`` records in every partition, a checkpoint
gets a Spark offsets log that has read half of the partitions to their end, and
``streaming.ops.lag.lag_report`` runs three times, as ``shardmerge lag`` does (a new
Kafka client each time: the metadata of every topic, one end-offsets request per broker,
the beginning offsets of the partitions the log does not name). Prints the wall time of
each run and, as the baseline of the same run, the time of the client's topic listing
alone (the least any lag view pays). Prints a Markdown table; docs/benchmarks.md keeps the
latest run.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _checkpoint(root: Path, read: dict[str, dict[str, int]]) -> None:
    spark = root / "spark"
    (spark / "offsets").mkdir(parents=True)
    (spark / "commits").mkdir(parents=True)
    meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000)})
    (spark / "offsets" / "0").write_text("\n".join(["v1", meta, json.dumps(read)]))
    (spark / "commits" / "0").write_text("v1\n{}")


def run_layout(bootstrap: str, topics: int, partitions: int, records: int, work: Path) -> dict:
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer

    from streaming.config import Settings
    from streaming.ops.lag import lag_report

    prefix = f"lag{topics}x{partitions}"
    names = (
        [f"{prefix}.db_{i // 16}.orders_{i % 16}" for i in range(topics)]
        if topics > 1
        else [f"{prefix}.orders"]
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    for i in range(0, len(names), 500):
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names[i : i + 500]])
        for f in futures.values():
            f.result(timeout=300)
    created = time.monotonic() - started
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    # A new topic's leader may not be known yet: what failed is sent again.
    todo = [(n, p) for n in names for p in range(partitions)]
    for _ in range(10):
        failed: list[tuple[str, int]] = []

        def report(err: object, msg: object, failed: list = failed) -> None:
            if err is not None:
                failed.append((msg.topic(), msg.partition()))  # type: ignore[attr-defined]

        for n, p in todo:
            for r in range(records):
                try:
                    producer.produce(n, b"{}", f"k{r}".encode(), partition=p, on_delivery=report)
                except KafkaException:  # not in the producer's metadata yet
                    failed.append((n, p))
            producer.poll(0)
        assert producer.flush(300) == 0
        todo = sorted(set(failed))
        if not todo:
            break
        time.sleep(1)
    if todo:
        raise SystemExit(f"{len(todo)} partitions never took their records, e.g. {todo[:3]}")
    # the job has read every other partition to its end
    read = {n: {str(p): records for p in range(0, partitions, 2)} for n in names}
    if partitions == 1:
        read = {n: {"0": records} for n in names[::2]}
    checkpoint = work / prefix
    _checkpoint(checkpoint, read)
    settings = Settings.model_validate(
        {
            "kafka": {"bootstrap": bootstrap},
            "sources": [{"format": "debezium", "pattern": f"{prefix}(\\..*)?"}],
            "routes": [{"target": "shop.orders", "db": "db_*", "table": "orders_*"}],
            "sink": {"path": str(work / "lake")},
            "checkpoint": str(checkpoint),
        }
    )
    runs = []
    for _ in range(3):
        t = time.monotonic()
        report = lag_report(settings)
        runs.append(time.monotonic() - t)
    t = time.monotonic()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    consumer.topics()
    consumer.close()
    listing = time.monotonic() - t
    behind = sum(p.behind for p in report.partitions)
    expected = topics * partitions * records // 2
    wrong = [p for p in report.partitions if p.behind != (0 if p.read is not None else records)]
    if wrong:
        print(f"{len(wrong)} partitions off, e.g. {wrong[:3]}", file=sys.stderr)
    return {
        "layout": f"{topics} x {partitions}",
        "partitions": len(report.partitions),
        "behind": behind,
        "expected": expected,
        "runs": runs,
        "listing": listing,
        "created": created,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", nargs="+", default=["4096x1", "256x16", "1x4096"])
    parser.add_argument("--records", type=int, default=1)
    args = parser.parse_args(argv)
    from devkit.kafka_local import running

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"open files: soft {soft}, hard {hard}", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, running("lagbench", Path(tmp) / "kafka") as kafka:
        for layout in args.layouts:
            topics, partitions = (int(x) for x in layout.split("x"))
            row = run_layout(kafka.bootstrap, topics, partitions, args.records, Path(tmp))
            print(row, file=sys.stderr)
            rows.append(row)
    print("| topics x partitions | partitions | records behind (expected) | lag runs: s | "
          "baseline: topic listing alone, s |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        runs = " / ".join(f"{x:.2f}" for x in r["runs"])
        print(f"| {r['layout']} | {r['partitions']:,} | {r['behind']:,} ({r['expected']:,}) "
              f"| {runs} | {r['listing']:.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
