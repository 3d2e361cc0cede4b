"""Two jobs writing one Delta table as a group, a shard's rows ahead of its DDL: the
``ahead`` case of ``scripts/group-test`` at the CI's size (job ``a`` in the suite's
session, job ``b`` a ``shardmerge run`` process of its own). A module of its own, so that
the suite's two workers can run it beside ``test_group_jobs.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.grouptest import run_case

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_two_jobs_agree_on_rows_ahead_of_their_ddl(kafka, spark, tmp_path: Path) -> None:
    # gb's ALTERs reach Kafka only once job b found its shards' rows ahead of them: b
    # appends an `ahead` record (issue 41), the rows wait for their DDL and replay, and
    # both members' replicas, folded from the one log, end equal.
    r = run_case("ahead", kafka.bootstrap, tmp_path, spark, shards=4, rows=60,
                 deadline_s=300, in_process=True)  # fmt: skip
    assert (r.lost, r.extra, r.duplicated, r.stopped) == (0, 0, 0, []), r.lines()
    assert r.rows == r.expected > 0
    assert r.ahead > 0, r.lines()
    assert r.replicas_equal is True, r.lines()
    assert r.ddl_runs == {"ADD COLUMNS note": 1, "RENAME COLUMN memo": 1,
                          "CHANGE COLUMN amount": 1}, r.lines()  # fmt: skip
