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
