"""Exactly once: kill -9 the job at three points of a DDL-heavy workload (where a restart
finds work half done downstream), restart each time, and compare the Delta table with the
shards' final rows. ``scripts/kill-test`` covers every protocol point."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.killtest import CI_POINTS, kill_test

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_kill_at_three_points_loses_and_duplicates_nothing(kafka, spark, tmp_path: Path):
    # Each kill in a process of its own; the last run (from the last kill's checkpoint) in
    # the suite's session, which has never seen this checkpoint: a cold JVM fewer.
    report = kill_test(
        kafka.bootstrap, tmp_path, CI_POINTS, spark=spark, source="ktci", finish_in=spark
    )
    killed = [point for point, code, _ in report.runs if code == -9]
    assert set(killed) == set(CI_POINTS), report.runs
    assert report.rows == report.expected
    assert report.missing == [] and report.unexpected == []
    assert report.duplicated_keys == 0
