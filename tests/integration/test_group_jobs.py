"""Two jobs writing one Delta table as a group: the CI subset of ``scripts/group-test``
(its ``rollout`` case, smaller, with job ``a`` in the suite's session and job ``b`` a
``shardmerge run`` process of its own). The script runs the other cases: a job stopped
past its lease, the owner killed between its ALTER and its record, two owners racing."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.grouptest import run_case

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_two_jobs_roll_a_ddl_out_over_one_table(kafka, spark, tmp_path: Path) -> None:
    r = run_case("rollout", kafka.bootstrap, tmp_path, spark, shards=4, rows=60,
                 deadline_s=300, in_process=True)  # fmt: skip
    assert (r.lost, r.extra, r.duplicated) == (0, 0, 0), r.lines()
    assert r.rows == r.expected > 0
    # every downstream change ran once, by the owner, whichever job's shards decided it
    assert r.ddl_runs == {"ADD COLUMNS note": 1, "RENAME COLUMN memo": 1,
                          "CHANGE COLUMN amount": 1}, r.lines()  # fmt: skip
    assert r.terms == ["0:a@0"]
