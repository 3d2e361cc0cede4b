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
