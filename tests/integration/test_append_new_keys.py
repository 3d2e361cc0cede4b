"""The append path (streaming.batch.new_keys) on the streaming job: rows whose keys are
provably new are appended in their own Delta commit, the others MERGEd, and the table
holds exactly the workload's rows; a batch Spark runs again writes nothing twice."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from coordinator.ids import TargetId
from devkit.kafka_local import KafkaBroker
from streaming.config import (
    KafkaSettings,
    RouteSettings,
    Settings,
    SinkSettings,
    SourceSettings,
    TargetSettings,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(900)]

SHARDS, ROWS = 4, 250
TARGET = TargetId.parse("shop.orders")


def _commits(path: str) -> list[tuple[str, Any]]:
    out = []
    for f in sorted(Path(path, "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        out.append((info["operation"], next((a["txn"] for a in actions if "txn" in a), None)))
    return out


def test_new_keys_are_appended_and_the_table_is_exact(
    spark: SparkSession, kafka: KafkaBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.errors import StreamingQueryException

    from devkit.killtest import compare, produce
    from streaming.faults import reset_raise_counts
    from streaming.job import build_query

    # The kill -9 harness's workload (three DDLs rolled out shard by shard, a rename among
    # them), its DDL read at the rows' pace: shards are held and released, and released
    # rows replayed from the stash, over several batches.
    source = "append" + uuid.uuid4().hex[:8]
    oracle = produce(kafka.bootstrap, source, SHARDS, ROWS)
    lake = str(tmp_path / "lake")

    settings = Settings(
        kafka=KafkaSettings(bootstrap=kafka.bootstrap, max_offsets_per_trigger=250),
        sources=[
            SourceSettings(
                format="debezium",
                pattern=source + r"(\..*)?",
                schema_pattern=source,
                read_schema_ahead=False,
            )
        ],
        routes=[RouteSettings(target=str(TARGET), table="orders_*")],
        targets={str(TARGET): TargetSettings(mode="optimistic")},
        # every batch big enough: the islands are read after the first, appends follow;
        # a batch that also updates is split (its new keys appended, the rest MERGEd)
        sink=SinkSettings(path=lake, append_new_keys=True, append_min_rows=0, append_mixed=True),
        checkpoint=str(tmp_path / "checkpoint"),
    )
    # The first batch that replays held rows fails right after its stash delete landed
    # (as a process killed there would): run again, it no longer reads those rows from
    # the stash, and must still know their keys are in the table (its islands are read
    # from the table, not grown without them: the appends below would write them twice).
    monkeypatch.setenv("SHARDMERGE_RAISE_AT", "after_stash_delete:1")
    reset_raise_counts()
    query, _ = build_query(spark, settings, available_now=True)
    with pytest.raises(StreamingQueryException, match="after_stash_delete"):
        query.awaitTermination()
    monkeypatch.delenv("SHARDMERGE_RAISE_AT")
    query, processor = build_query(spark, settings, available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    last = processor.last_stats
    assert last is not None and last.batch >= 2

    path = settings.table_path(TARGET)
    commits = _commits(path)
    appends = [txn for op, txn in commits if op == "WRITE"]
    assert appends, f"no append among the target's commits: {commits}"
    assert all(txn is not None for txn in appends)  # each under its write slot
    assert processor.observer.target_rows[(str(TARGET), "appended")] > 0

    report = compare(spark, lake, oracle)
    assert report.ok, report
    assert report.rows == len(oracle)

    # The last batch run again (Spark's commit of it gone, as after a crash right after
    # the state was saved): its MERGE and its append are skipped, nothing is written twice.
    commits_dir = Path(settings.checkpoint, "spark", "commits")
    assert (commits_dir / str(last.batch)).exists()
    (commits_dir / str(last.batch)).unlink()
    (commits_dir / f".{last.batch}.crc").unlink(missing_ok=True)  # Hadoop's checksum of it
    before = len(commits)
    query, processor = build_query(spark, settings, available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    assert processor.last_stats is not None and processor.last_stats.batch == last.batch
    assert len(_commits(path)) == before
    again = compare(spark, lake, oracle)
    assert again.ok and again.rows == len(oracle), again
