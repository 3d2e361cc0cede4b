"""One run writes per checkpoint (streaming/storage/epochs.py): each run claims an epoch, and an
older run stops at its next batch with a message naming the newer one."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.storage.epochs import Epochs, Superseded


def test_a_newer_run_stops_the_older_one(tmp_path: Path) -> None:
    checkpoint = (tmp_path / "ckpt").as_uri()
    first = Epochs.claim(checkpoint, app_id="a1")
    first.check()  # alone: goes on
    second = Epochs.claim(checkpoint, app_id="a1")
    assert (first.epoch, second.epoch) == (0, 1)
    second.check()
    with pytest.raises(Superseded, match=r"epoch 1: host .*, pid \d+, started .*epoch 0\)"):
        first.check()
    third = Epochs.claim(str(tmp_path / "ckpt"))  # a plain path is the same checkpoint
    assert third.epoch == 2
    with pytest.raises(Superseded, match="epoch 2"):
        second.check()


def test_a_filesystem_without_create_if_absent_turns_epochs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    off = Epochs.claim("gs://bucket/ckpt")
    assert off.epoch is None
    off.check()  # never stops
    assert "would not be noticed" in caplog.text


def test_old_epochs_are_pruned_and_the_newest_still_stops_the_older_runs(tmp_path: Path) -> None:
    from streaming.storage import epochs
    from streaming.storage.group_store import group_store

    checkpoint = (tmp_path / "ckpt").as_uri()
    runs = [Epochs.claim(checkpoint) for _ in range(epochs.KEEP + 5)]
    assert [r.epoch for r in runs] == list(range(epochs.KEEP + 5))
    store = group_store(f"{checkpoint}/shardmerge")
    assert store.numbers(epochs.FOLDER) == list(range(5, epochs.KEEP + 5))
    runs[-1].check()
    for old in (runs[0], runs[-2]):  # its own record pruned or not: the newest stops it
        with pytest.raises(Superseded, match=f"epoch {epochs.KEEP + 4}"):
            old.check()


def test_a_claim_that_fails_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from streaming.storage import epochs
    from streaming.storage.group_store import GroupStore

    real = GroupStore.claim_next
    failures = iter([OSError("store down for a moment")])

    def flaky(self: GroupStore, folder: str, value: dict, attempts: int = 1000) -> int:
        for e in failures:
            raise e
        return real(self, folder, value, attempts)

    monkeypatch.setattr(GroupStore, "claim_next", flaky)
    monkeypatch.setattr(epochs, "CLAIM_BACKOFF_S", 0.01)
    run = Epochs.claim((tmp_path / "ckpt").as_uri())
    assert run.epoch == 0  # detection stays on
    assert "(attempt 1 of 3): store down for a moment" in caplog.text
    failures = iter([OSError("down")] * epochs.CLAIM_ATTEMPTS)
    # still failing: the run does not start unguarded, and the error says what to do
    with pytest.raises(epochs.Unclaimed, match="could not claim an epoch in 3 attempts") as e:
        Epochs.claim((tmp_path / "ckpt2").as_uri())
    assert "one_driver_check: false" in str(e.value)
