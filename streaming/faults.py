"""Fault injection for the reliability tests, at named points of the foreachBatch protocol.

``SHARDMERGE_CRASH_AT=point:n`` kills the process (``kill -9``, no cleanup, no flush) the
n-th time it reaches ``point`` (n counts from 1).

``SHARDMERGE_STORAGE_FAULT=point:n:seconds:path`` takes a folder away the n-th time the
process reaches ``point``: the folder (a Delta table: the stash or a target) is renamed to
``path.away`` and a plain *file* takes its place until the query has failed on it
(:func:`storage_fault_noticed`), then ``seconds`` more (at most two minutes in all); then
the folder comes back. :func:`armed` sets the same for a job run inside a test's process.
Every read and write of the table fails meanwhile, also for root (who ignores
permission bits) and also for a write that would otherwise create a fresh table at a
missing path. The batch then fails and the query's restart policy has to ride it out.

``SHARDMERGE_RAISE_AT=point:n`` makes :func:`raise_point` raise :class:`InjectedFault` the
n-th time this process reaches ``point`` (one of :data:`RAISE_POINTS`): a transient
failure of a Spark/Delta call, which must fail the batch (Spark runs it again), never be
read as "nothing there". It is read at each call, so a test can set it in-process.

Unset, :func:`crash_point` costs two dictionary lookups. Points are listed in
:data:`POINTS`; ``streaming/batch/protocol.py`` places them between the protocol's steps.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator

__all__ = [
    "APPEND_POINTS",
    "CHECKPOINT_POINTS",
    "GROUP_POINTS",
    "MOVE_POINTS",
    "POINTS",
    "RAISE_POINTS",
    "InjectedFault",
    "armed",
    "crash_point",
    "raise_point",
    "reset_raise_counts",
    "storage_fault_noticed",
]

POINTS = (
    "after_decode",  # dead letters written, nothing else
    "after_rows",  # a target's MERGE done (DDL, TRUNCATE's DELETE and MERGE)
    "after_ddl",  # a control event decided, its DDL run downstream
    "after_release",  # stash append and dead letters done; replayed rows still stashed
    # a release's rows merged, new keys appended; the stash delete, the batch's last write,
    # next (reached only when a batch releases)
    "before_stash_delete",
    "before_state",  # every write done, state not saved
    "after_state",  # state saved, Spark's commit not yet written
)
# A declared move (streaming.batch.moves): its switch run, rows re-homed downstream, before the
# released and queued rows are written (scripts/kill-test --workload move).
MOVE_POINTS = ("after_switch",)
# The database sink (streaming.storage.jdbc_sink): a batch's rows staged by the executors,
# their transaction not begun (scripts/kill-test --sink mariadb|postgresql).
JDBC_POINTS = ("jdbc_staged",)
# A group member (streaming.group.member): the owner before its ALTER, and after it with the
# table's new version not recorded; a member right after it appended a record of a kind
# (``group_appended_join``, ``group_appended_ddl``, ...), entering its gate with its
# batch's records appended, and past its gate's last check, right before its write step.
GROUP_POINTS = ("group_before_alter", "group_after_alter", "group_appended_join",
                "group_appended_ddl", "group_gate", "group_gate_passed")  # fmt: skip
# The append of provably new keys (streaming.batch.new_keys): a target's rows appended, the
# batch's islands of keys not saved (scripts/kill-test --append-min-rows).
APPEND_POINTS = ("after_append",)
# Inside a Delta checkpoint: the n-th time the driver's JVM replaces a table's
# ``_last_checkpoint`` (the checkpoint file written, its pointer half written to a temporary
# file), the project's log store kills the job (jars/logstore: CrashPoint). Any table the job
# writes (target, stash, dead letters); scripts/kill-test makes checkpoints frequent.
CHECKPOINT_POINTS = ("delta_checkpoint",)
# Whether the stash exists, when a batch reads the held rows it releases; right after a
# batch's stash delete landed (the batch fails, and runs again with its writes landed).
RAISE_POINTS = ("stash_read", "after_stash_delete")
_seen: Counter[str] = Counter()
_raised: Counter[str] = Counter()
_crash = os.environ.get("SHARDMERGE_CRASH_AT")
# ``point:n``: the process stops itself (SIGSTOP) the n-th time it reaches ``point``, as a
# long pause would (scripts/group-test continues it).
_pause = os.environ.get("SHARDMERGE_PAUSE_AT")
_storage = os.environ.get("SHARDMERGE_STORAGE_FAULT")
log = logging.getLogger("shardmerge.faults")


def crash_point(name: str) -> None:
    if _crash is None and _storage is None and _pause is None:
        return
    _seen[name] += 1
    if _pause is not None:
        point, _, count = _pause.partition(":")
        if point == name and _seen[name] == int(count or 1):
            log.warning("fault: pausing (SIGSTOP) at %s (thread %s)", _pause,
                        threading.current_thread().name)  # fmt: skip
            os.kill(os.getpid(), signal.SIGSTOP)
    if _crash is not None:
        point, _, count = _crash.partition(":")
        if point == name and _seen[name] == int(count or 1):
            os.kill(os.getpid(), signal.SIGKILL)
    if _storage is not None:
        point, count, seconds, path = _storage.split(":", 3)
        if point == name and _seen[name] == int(count):
            _take_away(path, float(seconds))


# A storage fault lasts until the query has failed on it, then ``seconds`` more: a fixed
# window could close before the job next touches the path (on a loaded machine the next
# access may come many seconds later) and the fault would go unnoticed. Never longer than
# this, noticed or not.
_STORAGE_FAULT_MAX_S = 120.0
_pending: list[threading.Timer] = []  # restores to start when the query fails
_pending_lock = threading.Lock()


def _take_away(path: str, seconds: float) -> None:
    away = path.rstrip("/") + ".away"
    os.rename(path, away)
    with open(path, "w") as fh:
        fh.write("storage fault injected by SHARDMERGE_STORAGE_FAULT\n")
    log.warning("storage fault: %s is a file until the query fails, then %.0fs", path, seconds)
    done = threading.Lock()

    def restore() -> None:
        if not done.acquire(blocking=False):
            return  # restored already
        os.remove(path)
        os.rename(away, path)
        log.warning("storage fault: %s is back", path)

    # Not daemons: the process waits for the folder to come back before it exits.
    threading.Timer(_STORAGE_FAULT_MAX_S, restore).start()
    with _pending_lock:
        _pending.append(threading.Timer(seconds, restore))


def storage_fault_noticed() -> None:
    """The query failed: a storage fault in place ends its ``seconds`` from now (called by
    the restart policy, ``streaming.runtime.supervise``; nothing when no fault is armed)."""
    with _pending_lock:
        timers = list(_pending)
        _pending.clear()
    for timer in timers:
        timer.start()


class InjectedFault(RuntimeError):
    """The failure ``SHARDMERGE_RAISE_AT`` asked for (deliberately not a ShardMergeError:
    it stands for an I/O or Spark error, which nothing may catch and carry on)."""


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


@contextlib.contextmanager
def armed(*, storage: str | None = None) -> Iterator[None]:
    """A storage fault (``SHARDMERGE_STORAGE_FAULT``'s form) for a job run inside the
    caller's process (a test harness), points counted from zero; disarmed after."""
    global _storage
    before = _storage
    _storage = storage
    _seen.clear()
    try:
        yield
    finally:
        _storage = before
        _seen.clear()


def reset_raise_counts() -> None:
    """Count :func:`raise_point` visits from zero again (a test arming a new fault)."""
    _raised.clear()
