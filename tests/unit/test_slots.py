"""The write slots of a batch (streaming.storage.slots): versions, order, the ledger, the bound."""

from __future__ import annotations

import logging

import pytest

from streaming.storage import slots as slots_module
from streaming.storage.slots import PER_BATCH, Slots, SlotsExhausted


def test_versions_are_the_batch_times_the_bound_plus_the_slot_in_order() -> None:
    s = Slots(7)
    assert [s.take("a"), s.take("b"), s.taker("c")()] == [
        7 * PER_BATCH + 1,
        7 * PER_BATCH + 2,
        7 * PER_BATCH + 3,
    ]
    assert s.taken == ["a", "b", "c"]


def test_a_rerun_taking_the_same_slots_gets_the_same_versions() -> None:
    first, again = Slots(3), Slots(3)
    plan = ["dead letters", "db.t: MERGE", "db.t: TRUNCATE", "stash append"]
    assert [first.take(w) for w in plan] == [again.take(w) for w in plan]


def test_batch_zero_and_the_next_batch_never_share_a_version() -> None:
    last_of_zero = Slots(0)
    last_of_zero.taken = ["w"] * (PER_BATCH - 2)
    top = last_of_zero.take()
    assert top == PER_BATCH - 1 < Slots(1).take()


def test_a_batch_past_its_slots_fails_instead_of_reaching_the_next_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slots_module, "PER_BATCH", 4)
    s = Slots(2)
    assert [s.take() for _ in range(3)] == [9, 10, 11]
    with pytest.raises(SlotsExhausted, match="batch 2 needs more than 3 Delta writes"):
        s.take()


def test_a_negative_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="-1"):
        Slots(-1)


def test_the_ledger_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    s = Slots(1)
    s.take("stash append")
    s.take("db.t: MERGE")
    with caplog.at_level(logging.DEBUG, logger="shardmerge.slots"):
        s.log()
    assert "batch 1 took 2 write slots: 1=stash append, 2=db.t: MERGE" in caplog.text
