"""The fast path's rules (streaming.writer). Late column renames: a shard's rows take
it only when every one of them comes after every rename it would otherwise go through,
compared as the projection compares positions (file, offset, row, time, record). Segments
without rows: a segment that ends before its shard's first row of the batch does not keep
the shard off the fast path."""

from __future__ import annotations

import pytest

from coordinator.ids import ShardId
from streaming.plan import Segment
from streaming.writer import _after_renames, _may_have_rows

RENAME = (("mysql-bin.000002", 400, 0, 1_000, 7), (("a", "b"),))


@pytest.mark.parametrize(
    ("first", "renames", "fast"),
    [
        (["mysql-bin.000002", 500, 0, 2_000, 9], (), True),  # no rename at all
        (["mysql-bin.000002", 500, 0, 2_000, 9], (RENAME,), True),  # after it
        (["mysql-bin.000002", 300, 0, 900, 3], (RENAME,), False),  # before it: renamed
        (["mysql-bin.000001", 900, 0, 2_000, 9], (RENAME,), False),  # an earlier file
        (["mysql-bin.000002", 400, 0, 1_000, 7], (RENAME,), False),  # the rename's own place
        (None, (RENAME,), False),  # no rows known
        ([None, 500, 0, 2_000, 9], (RENAME,), False),  # a position without a file
        (["mysql-bin.000002", 500, 0, 2_000, 9], ((None, (("a", "b"),)),), False),
    ],
)
def test_rows_take_the_fast_path_only_after_every_late_rename(
    first: list[object] | None, renames: tuple[object, ...], fast: bool
) -> None:
    assert _after_renames(first, renames) is fast


CREATE_AT = ("mysql-bin.000002", 400, 0, 1_000, 7)


@pytest.mark.parametrize(
    ("first", "upto", "rows"),
    [
        (["mysql-bin.000002", 500, 0, 2_000, 9], CREATE_AT, False),  # rows after the CREATE
        (["mysql-bin.000002", 400, 0, 1_000, 7], CREATE_AT, True),  # a row at its place
        (["mysql-bin.000002", 300, 0, 900, 3], CREATE_AT, True),  # a row before it
        (["mysql-bin.000001", 900, 0, 2_000, 9], CREATE_AT, True),  # an earlier file
        (["mysql-bin.000002", 500, 0, 2_000, 9], None, True),  # the open segment
        (None, CREATE_AT, True),  # no rows known: counted
        ([None, 500, 0, 2_000, 9], CREATE_AT, True),  # a position without a file
        (["mysql-bin.000002", 500, 0, 2_000, 9], (None, 400, 0, 1_000, 7), True),
    ],
)
def test_a_segment_that_ends_before_the_shards_first_row_has_none(
    first: list[object] | None, upto: tuple[object, ...] | None, rows: bool
) -> None:
    seg = Segment(ShardId("s", "db", "t"), None, upto, None)  # type: ignore[arg-type]
    assert _may_have_rows(seg, first) is rows
