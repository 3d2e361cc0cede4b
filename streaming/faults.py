"""Fault injection for the exactly-once tests: die with SIGKILL at a named point.

``SHARDMERGE_CRASH_AT=point:n`` kills the process (``kill -9``, no cleanup, no flush) the
n-th time it reaches ``point`` (n counts from 1). Unset, :func:`crash_point` costs one
dictionary lookup. Points are listed in :data:`POINTS`; ``streaming/batch.py`` places them
between the steps of the foreachBatch protocol.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

__all__ = ["POINTS", "crash_point"]

POINTS = (
    "after_decode",  # dead letters written, nothing else
    "after_rows",  # a target's MERGE done (DDL, TRUNCATE's DELETE and MERGE)
    "after_ddl",  # a control event decided, its DDL run downstream
    "after_release",  # stash append and dead letters done; replayed rows still stashed
    "before_state",  # every write done, state not saved
    "after_state",  # state saved, Spark's commit not yet written
)
_seen: Counter[str] = Counter()
_target = os.environ.get("SHARDMERGE_CRASH_AT")


def crash_point(name: str) -> None:
    if _target is None:
        return
    point, _, count = _target.partition(":")
    if point != name:
        return
    _seen[name] += 1
    if _seen[name] == int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
