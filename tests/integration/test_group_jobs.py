"""Two jobs writing one Delta table as a group: the CI subset of ``scripts/group-test``
(its ``stop`` case, smaller, with job ``a`` in the suite's session and job ``b`` a
``shardmerge run`` process of its own). The case rolls the three DDLs out over both jobs,
as the ``rollout`` case does, with job ``b`` stopped past its lease right after its first
batch appended its join (issue 40). The script runs the other cases and stop points: the
owner killed between its ALTER and its record, two owners racing."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.grouptest import LEASE_S, run_case

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_two_jobs_roll_ddl_out_with_one_stopped_past_its_lease(
    kafka, spark, tmp_path: Path
) -> None:
    # b stops inside its first batch right after appending its join; a decides the ADD
    # COLUMN at once (its first batch holds all its DDLs at this size) and, as the owner,
    # runs it without b once b's lease ran out. b's batch runs again without appending
    # its join again: it must plan at the table's version, not be fenced until its restart
    # policy stops it for good.
    r = run_case("stop", kafka.bootstrap, tmp_path, spark, shards=4, rows=60,
                 deadline_s=300, in_process=True, pause_at="join",
                 pause_max_s=LEASE_S + 12)  # fmt: skip
    assert (r.lost, r.extra, r.duplicated, r.stopped) == (0, 0, 0, []), r.lines()
    assert r.compared and r.rows == r.expected > 0, r.lines()
    # every downstream change ran once, by the owner, whichever job's shards decided it
    assert r.ddl_runs == {"ADD COLUMNS note": 1, "RENAME COLUMN memo": 1,
                          "CHANGE COLUMN amount": 1}, r.lines()  # fmt: skip
    assert r.terms == ["0:a@0"]
    # the owner compacted the log while it ran (snapshot_every 5): the rows above are
    # what both members wrote through it
    assert r.snapshots, r.lines()
    # b went on with the table past the version its stopped batch planned for
    assert any(n.startswith("b continued") and "the table at v2" in n for n in r.notes), r.lines()


def test_rows_ahead_of_their_ddl_wait_through_the_log_and_replicas_agree(
    kafka, spark, tmp_path: Path
) -> None:
    # gb's ALTERs reach Kafka only once job b found its shards' rows ahead of them: b's
    # write step appends an `ahead` record (issue 41: the rows ahead of a DDL go through the
    # Coordination port, in a group as a log record, never changing a replica outside the
    # log); the rows wait in b's stash until the ALTERs arrive, then replay. Both members'
    # saved replicas must then be equal.
    r = run_case("ahead", kafka.bootstrap, tmp_path, spark, shards=4, rows=60,
                 deadline_s=300, in_process=True)  # fmt: skip
    assert (r.lost, r.extra, r.duplicated, r.stopped) == (0, 0, 0, []), r.lines()
    assert r.compared and r.rows == r.expected > 0, r.lines()
    assert r.ddl_runs == {"ADD COLUMNS note": 1, "RENAME COLUMN memo": 1,
                          "CHANGE COLUMN amount": 1}, r.lines()  # fmt: skip
    assert r.ahead > 0, r.lines()
    assert r.replicas_equal is True, r.lines()
