"""The fast path's rule about late column renames (streaming.writer): a shard's rows take
it only when every one of them comes after every rename it would otherwise go through,
compared as the projection compares positions (file, offset, row, time, record)."""

from __future__ import annotations

import pytest

from streaming.writer import _after_renames

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
