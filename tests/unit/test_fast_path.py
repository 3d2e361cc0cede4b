"""The fast path's rules (streaming.batch.writer), positions compared as the projection compares
them (file, offset, row, time, record). Where a set of named columns is judged: at the
start of every stretch in which its rows' renamed columns and projection do not change.
Segments without rows: a segment that ends before its shard's first row of the batch does
not keep the shard off the fast path."""

from __future__ import annotations

import pytest

from coordinator.ids import ShardId
from streaming.batch.plan import Segment
from streaming.batch.writer import _judged_at, _may_have_rows

F1 = "mysql-bin.000001"
F2 = "mysql-bin.000002"
RENAME = [F2, 400, 0, 1_000, 7]
ALTER = [F2, 450, 0, 1_100, 8]


@pytest.mark.parametrize(
    ("first", "last", "points", "at"),
    [
        # no rename, no ALTER: the first and last position
        ([F2, 500, 0, 2_000, 9], [F2, 900, 0, 3_000, 12], [None], [[F2, 500, 0, 2_000, 9], [F2, 900, 0, 3_000, 12]]),
        # one row: judged once
        ([F2, 500, 0, 2_000, 9], [F2, 500, 0, 2_000, 9], [None], [[F2, 500, 0, 2_000, 9]]),
        # a rename and an ALTER inside the range: each is a stretch of its own, in order
        ([F2, 300, 0, 900, 3], [F2, 900, 0, 3_000, 12], [ALTER, RENAME], [[F2, 300, 0, 900, 3], RENAME, ALTER, [F2, 900, 0, 3_000, 12]]),
        # a rename after every row of the set (all renamed) or before every one (none)
        ([F2, 100, 0, 500, 1], [F2, 200, 0, 600, 2], [RENAME], [[F2, 100, 0, 500, 1], [F2, 200, 0, 600, 2]]),
        ([F2, 500, 0, 2_000, 9], [F2, 900, 0, 3_000, 12], [RENAME], [[F2, 500, 0, 2_000, 9], [F2, 900, 0, 3_000, 12]]),
        # a rename at the set's first row does not rename it: no stretch of its own
        (RENAME, [F2, 900, 0, 3_000, 12], [RENAME], [RENAME, [F2, 900, 0, 3_000, 12]]),
        # a rename at the last row: the last row is not renamed; its stretch starts there
        ([F2, 300, 0, 900, 3], RENAME, [RENAME], [[F2, 300, 0, 900, 3], RENAME]),
        # an earlier binlog file sorts first
        ([F1, 900, 0, 2_000, 9], [F2, 900, 0, 3_000, 12], [RENAME], [[F1, 900, 0, 2_000, 9], RENAME, [F2, 900, 0, 3_000, 12]]),
        # a position not fully known: the exact path judges
        ([None, 500, 0, 2_000, 9], [F2, 900, 0, 3_000, 12], [RENAME], None),
        ([F2, 300, 0, 900, 3], [F2, 900, 0, 3_000, 12], [[None, 400, 0, 1_000, 7]], None),
    ],
)  # fmt: skip
def test_a_set_of_named_columns_is_judged_at_the_start_of_every_stretch(
    first: list[object], last: list[object], points: list[object], at: list[object] | None
) -> None:
    assert _judged_at(first, last, points) == at


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


def test_the_name_an_image_repeats_is_found_case_insensitively() -> None:
    from streaming.batch.protocol import _repeated

    assert _repeated(("id", "a", "ID")) == "ID"
    assert _repeated(("user_id", "id", "user_id", "a", "a")) == "user_id"
    with pytest.raises(ValueError, match="no name is repeated"):
        _repeated(("id", "a"))


def test_the_plan_ends_its_renames_with_a_rename_of_nothing_at_the_latest():
    from streaming.batch.plan import _renames_frame

    later = [F2, 900, 0, 3_000, 12]
    frame = _renames_frame(((later, (("B", "c"),)), (RENAME, (("a", "b"),)), (None, (("x", "y"),))))
    # in order, lower-cased, an unknown position left out; the last: nothing, at the latest
    assert frame == [
        (tuple(later), {"b": "c"}),
        (tuple(RENAME), {"a": "b"}),
        (tuple(later), {}),
    ]
    assert _renames_frame(()) == []
