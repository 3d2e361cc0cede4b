"""One driver per checkpoint: each run of the job claims an epoch, and a run that finds a
newer epoch stops.

Two ``shardmerge run`` processes on one checkpoint (a job started twice by mistake, a
scheduler that starts a new driver while the old one still runs) would both decide and
write. Spark notices two queries on one checkpoint only inside one session. So each run,
when it starts, claims the next number under ``CHECKPOINT/shardmerge/epochs/``
(put-if-absent, ``streaming.storage.group_store``: two runs starting at once get two numbers), and
every batch, before anything else, lists that folder: a number above its own means a newer
run of the job exists, and this one stops with :class:`Superseded`, a permanent error
(``streaming.runtime.supervise``) that names the newer run. The newer run goes on; a batch the
older one was writing is run again by it from the same offsets (exactly once as always).

Where the checkpoint's filesystem offers no create-if-absent the job trusts (``gs://``,
for one), epochs are off and the job logs once that a second driver would not be noticed.
A claim that fails (a store error) is tried again, :data:`CLAIM_ATTEMPTS` times with
backoff; one that still fails stops the run before its first batch (:class:`Unclaimed`:
the job is not run unguarded because its store was away for a moment; a scheduler or the
operator starts it again). A store that never takes a conditional create (some
S3-compatible servers) needs ``one_driver_check: false``, said in the error. Each claim removes
all but the newest :data:`KEEP` epochs, so the folder every batch lists stays small
however often the job restarts (only the newest number matters to the check).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from shardmerge.errors import ShardMergeError
from streaming.fs.hadoop import join
from streaming.storage.group_store import GroupStore, GroupStoreError, group_store

__all__ = ["FOLDER", "Epochs", "Superseded", "Unclaimed"]

log = logging.getLogger("shardmerge.epochs")

FOLDER = "epochs"
KEEP = 10  # epochs kept (the newest; the check needs only the newest one)
CLAIM_ATTEMPTS = 3
CLAIM_BACKOFF_S = 1.0  # then 2 s


class Superseded(ShardMergeError):
    """A newer run of the job claimed the checkpoint: this run stops (permanent)."""


class Unclaimed(ShardMergeError):
    """This run could not claim an epoch of its checkpoint: it does not start (a second
    run on the checkpoint would go unnoticed)."""


class Epochs:
    """This run's epoch of a checkpoint (None: epochs are off for its filesystem)."""

    def __init__(self, store: GroupStore | None, epoch: int | None, checkpoint: str) -> None:
        self.store = store
        self.epoch = epoch
        self.checkpoint = checkpoint

    @classmethod
    def claim(cls, checkpoint: str, spark: Any = None, **about: Any) -> Epochs:
        """Claim the next epoch of ``checkpoint`` for this run (``about``: more to record,
        e.g. the job's app id)."""
        try:
            store = group_store(join(checkpoint, "shardmerge"), spark)
        except GroupStoreError as e:
            log.warning(
                "checkpoint %s: a second run of this job on it would not be noticed: %s",
                checkpoint, e,
            )  # fmt: skip
            return cls(None, None, checkpoint)
        record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **about,
        }
        from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

        for attempt in range(1, CLAIM_ATTEMPTS + 1):
            try:
                epoch = store.claim_next(FOLDER, record)
                break
            except (Py4JJavaError, OSError) as e:
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
                if attempt < CLAIM_ATTEMPTS:
                    log.warning(
                        "checkpoint %s: claiming an epoch failed (attempt %d of %d): %s",
                        checkpoint, attempt, CLAIM_ATTEMPTS, why,
                    )  # fmt: skip
                    time.sleep(CLAIM_BACKOFF_S * 2 ** (attempt - 1))
                    continue
                # Down for longer, or a store that refuses the conditional create (an
                # S3-compatible server that does not take If-None-Match): the run does not
                # start unguarded; the error says how to run without the check.
                raise Unclaimed(
                    f"checkpoint {checkpoint}: could not claim an epoch in {CLAIM_ATTEMPTS} "
                    f"attempts ({why}), so a second run of this job on the checkpoint would "
                    "not be noticed: this run does not start. Start it again once the store "
                    "answers; if the store never takes a conditional create (an S3-compatible "
                    "server without If-None-Match), set one_driver_check: false"
                ) from e
        log.info("checkpoint %s: this run is epoch %d", checkpoint, epoch)
        try:
            pruned = store.prune(FOLDER, KEEP)
        except (Py4JJavaError, OSError) as e:  # the next claim prunes them
            log.warning("checkpoint %s: old epochs not removed this time: %s", checkpoint, e)
        else:
            if pruned:
                log.info("checkpoint %s: %d old epoch(s) removed", checkpoint, pruned)
        return cls(store, epoch, checkpoint)

    def check(self) -> None:
        """Raise :class:`Superseded` when a newer run claimed the checkpoint."""
        if self.store is None or self.epoch is None:
            return
        newest = max(self.store.numbers(FOLDER), default=self.epoch)
        if newest <= self.epoch:
            return
        record = self.store.read_numbered(FOLDER, newest) or {}
        who = ", ".join(f"{k} {record[k]}" for k in ("host", "pid", "started") if k in record)
        raise Superseded(
            f"Superseded: another run of this job claimed checkpoint {self.checkpoint} "
            f"(epoch {newest}: {who or 'no details'}); this run (epoch {self.epoch}) stops so "
            "that one run writes. If the other run is the mistake, stop it and start this "
            "job again: it claims a newer epoch and goes on from the last committed batch"
        )
