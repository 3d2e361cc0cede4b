"""Exactly once: kill -9 the job at six points of a DDL-heavy workload, restart each time,
and compare the Delta table with the shards' final rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.killtest import CI_POINTS, kill_test

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_kill_at_six_points_loses_and_duplicates_nothing(kafka, spark, tmp_path: Path):
    report = kill_test(kafka.bootstrap, tmp_path, CI_POINTS, spark=spark, source="ktci")
    killed = [point for point, code, _ in report.runs if code == -9]
    assert len(set(p.split(":")[0] for p in killed)) >= 5, report.runs
    assert report.rows == report.expected
    assert report.missing == [] and report.unexpected == []
    assert report.duplicated_keys == 0


def test_kill_with_checkpoint_and_lake_on_an_object_store(kafka, spark, s3, bucket, tmp_path):
    """The same, with checkpoint, state, stash and lake in a bucket of the S3 API (no
    atomic rename): the S3A settings reach the job through Spark's conf, not its YAML."""
    conf = " ".join(f"--conf spark.hadoop.{k}={v}" for k, v in s3.hadoop_conf().items())
    points = ["after_rows:2", "after_release:1", "before_state:2", "after_state:1"]
    report = kill_test(
        kafka.bootstrap, tmp_path, points, spark=spark, source="kts3", storage=bucket,
        extra_env={"PYSPARK_SUBMIT_ARGS": f"{conf} pyspark-shell"},
    )  # fmt: skip
    assert [code for _, code, _ in report.runs].count(-9) >= 3, report.runs
    assert report.rows == report.expected
    assert report.missing == [] and report.unexpected == []
    assert report.duplicated_keys == 0
