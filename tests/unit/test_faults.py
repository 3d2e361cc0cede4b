"""streaming.faults.raise_point: raises the n-th time its point is reached, and only then."""

from __future__ import annotations

import pytest

from streaming.faults import RAISE_POINTS, InjectedFault, raise_point, reset_raise_counts


def test_raises_at_the_nth_visit_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDMERGE_RAISE_AT", "stash_read:2")
    reset_raise_counts()
    raise_point("stash_read")
    raise_point("after_rows")  # another point: not counted
    with pytest.raises(InjectedFault, match="stash_read"):
        raise_point("stash_read")
    raise_point("stash_read")  # the retry goes through


def test_unset_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHARDMERGE_RAISE_AT", raising=False)
    reset_raise_counts()
    for point in RAISE_POINTS:
        raise_point(point)
