"""The write slots of one micro-batch: the transaction versions of its Delta writes.

Every Delta write of a batch (DDL fills and type changes, a TRUNCATE's DELETE, a MERGE, the
stash and dead-letter appends, the stash delete, a rename's re-home) carries the
transaction ``(app id, version)`` of the job's checkpoint, and Delta skips a write whose
version its table already recorded for that app id (``streaming.storage.delta_sink.txn``). A
batch's versions are ``batch * PER_BATCH + slot``, slots numbered from 1 in the order they
are taken.

The rule that makes a re-run exact: **a batch run again takes the same slots for the same
writes**. So a slot is taken at a fixed place of the protocol, whether its write then
happens or not (a MERGE with no rows, an append of nothing), and the order depends only
on the saved state and the batch's control events, never on its rows. A write that
happened in the first run is then skipped by Delta in the second, and one that did not
happen runs. :class:`Slots` is the one ledger of them: it hands them out and keeps what
each was taken for (logged at debug level when the batch ends).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from shardmerge.errors import ShardMergeError

__all__ = ["PER_BATCH", "Slots", "SlotsExhausted"]

log = logging.getLogger("shardmerge.slots")

# Slots per batch: versions of batch N are N * PER_BATCH + 1 ... N * PER_BATCH + PER_BATCH - 1.
PER_BATCH = 1_000_000


class SlotsExhausted(ShardMergeError):
    """A batch needed more write slots than a batch has: its versions would reach the
    next batch's."""


class Slots:
    """The ledger of one batch's write slots (see the module docstring)."""

    def __init__(self, batch: int) -> None:
        if batch < 0:
            raise ValueError(f"a batch id is not negative: {batch}")
        self.batch = batch
        self.taken: list[str] = []  # what slot i + 1 was taken for

    def take(self, what: str = "write") -> int:
        """The transaction version of the next slot, taken for ``what`` (a few words)."""
        slot = len(self.taken) + 1
        if slot >= PER_BATCH:
            raise SlotsExhausted(
                f"batch {self.batch} needs more than {PER_BATCH - 1} Delta writes; its "
                "transaction versions would reach the next batch's. Lower "
                "kafka.max_offsets_per_trigger so that fewer DDL statements fall in one batch"
            )
        self.taken.append(what)
        return self.batch * PER_BATCH + slot

    def taker(self, what: str) -> Callable[[], int]:
        """A function of no arguments that takes a slot for ``what`` (for code that takes
        its slots itself, such as ``DeltaSink.alter``)."""
        return functools.partial(self.take, what)

    def log(self) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "batch %d took %d write slots: %s",
                self.batch,
                len(self.taken),
                ", ".join(f"{i}={w}" for i, w in enumerate(self.taken, 1)),
            )
