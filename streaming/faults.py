"""Fault injection for the exactly-once tests: die, or fail, at a named point.

``SHARDMERGE_CRASH_AT=point:n`` kills the process (``kill -9``, no cleanup, no flush) the
n-th time it reaches ``point`` (n counts from 1). Unset, :func:`crash_point` costs one
dictionary lookup. Points are listed in :data:`POINTS`; ``streaming/batch.py`` places them
between the steps of the foreachBatch protocol.

``SHARDMERGE_RAISE_AT=point:n`` makes :func:`raise_point` raise :class:`InjectedFault` the
n-th time this process reaches ``point`` (one of :data:`RAISE_POINTS`): a transient
failure of a Spark/Delta call, which must fail the batch (Spark runs it again), never be
read as "nothing there". It is read at each call, so a test can set it in-process.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

__all__ = [
    "POINTS",
    "RAISE_POINTS",
    "InjectedFault",
    "crash_point",
    "raise_point",
    "reset_raise_counts",
]

POINTS = (
    "after_decode",  # dead letters written, nothing else
    "after_rows",  # a target's MERGE done (DDL, TRUNCATE's DELETE and MERGE)
    "after_ddl",  # a control event decided, its DDL run downstream
    "after_release",  # stash append and dead letters done; replayed rows still stashed
    "before_state",  # every write done, state not saved
    "after_state",  # state saved, Spark's commit not yet written
)
# Whether the stash exists, when a batch reads the held rows it releases.
RAISE_POINTS = ("stash_read",)
_seen: Counter[str] = Counter()
_raised: Counter[str] = Counter()
_target = os.environ.get("SHARDMERGE_CRASH_AT")


class InjectedFault(RuntimeError):
    """The failure ``SHARDMERGE_RAISE_AT`` asked for (deliberately not a ShardMergeError:
    it stands for an I/O or Spark error, which nothing may catch and carry on)."""


def crash_point(name: str) -> None:
    if _target is None:
        return
    point, _, count = _target.partition(":")
    if point != name:
        return
    _seen[name] += 1
    if _seen[name] == int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def raise_point(name: str) -> None:
    target = os.environ.get("SHARDMERGE_RAISE_AT")
    if target is None:
        return
    point, _, count = target.partition(":")
    if point != name:
        return
    _raised[name] += 1
    if _raised[name] == int(count or 1):
        raise InjectedFault(f"injected fault at {name} (SHARDMERGE_RAISE_AT={target})")


def reset_raise_counts() -> None:
    """Count :func:`raise_point` visits from zero again (a test arming a new fault)."""
    _raised.clear()
