"""Durable state of the job next to Spark's checkpoint, on any filesystem Spark can write.

Layout under ``CHECKPOINT/shardmerge/`` (a URI: ``file:``, ``hdfs://``, ``s3a://``, ...):

- ``app/<seq>``: the checkpoint's id, created with it. Every Delta write carries it as
  ``txnAppId``, so a re-run batch is skipped by Delta while a new checkpoint (new id) is
  never mistaken for one that already wrote.
- ``state/<batch>-<seq>``: the coordinator after batch ``<batch>`` (written last in a
  batch). A batch starts from the newest state of an *earlier* batch, so a batch that Spark
  runs again starts from the same state as the first time.
- ``intent/<batch>-<seq>``: the operator commands a batch applies, fixed before it writes
  anything, so a re-run applies exactly the same ones.
- ``commands/<time>-<id>``: commands from ``shardmerge unlock``, waiting for the next batch.
  A command stays until a state records it as applied.
- ``cancelled/<id>``: a queued command withdrawn (``shardmerge unlock --cancel ID``): no
  batch applies it from then on, not even one whose intent had fixed it (a batch that
  Spark runs again after a failure). The next batch forgets the command; the withdrawal
  is pruned once no kept intent names it.
- ``failed/<seq>``: what the coordinator saw when a batch stopped the job.

**How a half-written record is never read, on every filesystem.** Object stores have no
atomic rename, so nothing here is ever renamed or overwritten. A record ``NAME`` is two
files written in order: ``NAME.json`` (the data, created new: never an existing name),
then the empty marker ``NAME.ok``. A reader lists the folder and reads only names that
have a marker; a marker is created after the data file's ``close`` returned, and every
store Spark supports (HDFS, local, S3 since its 2020 strong consistency, ABFS, GCS) shows
a closed file whole to the next reader. A writer that dies between the two leaves a data
file without marker: never read, removed by pruning; the re-run writes the next ``seq``.
Deleting a record removes the marker first, so a reader never sees a marker without data.

Pruning: after each state, the states of all but the newest ``KEEP`` batches and their
intents are deleted, with superseded attempts and leftovers of dead writers.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from coordinator.commands import OperatorCommand, parse_command
from coordinator.moves import MoveCommand
from shardmerge.errors import ShardMergeError
from streaming.fs.arrow import ARROW_SCHEMES, ArrowFs
from streaming.fs.hadoop import HadoopFs, join
from streaming.fs.local import LocalFs, local_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["StateStore", "StateStoreError"]

KEEP = 20  # newest batch states kept (for `shardmerge locks` and inspection)
_DATA, _MARK = ".json", ".ok"
_BATCH_SEQ = re.compile(r"^(\d{12})-(\d{6})$")


class StateStoreError(ShardMergeError):
    """The state under the checkpoint cannot be used as it is; the message says why."""


class StateStore:
    def __init__(self, spark: SparkSession | None, checkpoint: str) -> None:
        """The state store of ``checkpoint``, through ``spark``'s Hadoop filesystems; with
        no session (the operator CLI), a local checkpoint is read and written in plain
        Python (``streaming.fs.local``), one on S3, GCS or Azure through pyarrow
        (``streaming.fs.arrow``); any other raises :class:`StateStoreError`."""
        self.root = join(checkpoint, "shardmerge")
        self.fs: HadoopFs | LocalFs | ArrowFs
        if spark is not None:
            self.fs = HadoopFs(spark, self.root)
        elif local_path(self.root) is not None:
            self.fs = LocalFs()
        elif urlsplit(self.root).scheme.lower() in ARROW_SCHEMES:
            self.fs = ArrowFs(self.root)
        else:
            raise StateStoreError(
                f"{checkpoint}: only local, S3, GCS and Azure checkpoints are read without a "
                "Spark session"
            )

    def uri(self, *parts: str) -> str:
        """A location under ``CHECKPOINT/shardmerge/`` (the stash lives there too)."""
        return join(self.root, *parts)

    # --- records: write-once files + commit markers --------------------------------------

    def _names(self, folder: str) -> tuple[list[str], set[str]]:
        """(committed record names sorted, every name with a data or marker file)."""
        files = self.fs.names(self.uri(folder))
        data = {f[: -len(_DATA)] for f in files if f.endswith(_DATA)}
        marks = {f[: -len(_MARK)] for f in files if f.endswith(_MARK)}
        if folder == "state" and any(not _BATCH_SEQ.match(n) for n in data):
            raise StateStoreError(
                f"{self.uri(folder)} holds states of an earlier shardmerge layout; start the "
                "job with a new checkpoint (the lake is safe: a new checkpoint writes "
                "under its own id, nothing is skipped)"
            )
        return sorted(data & marks), data | marks

    def _put(self, folder: str, name: str, record: Any) -> None:
        base = self.uri(folder, name)
        # Compact: with indent, json falls back to its pure-Python encoder, several times
        # slower on the state of thousands of shards, and the file is nearly twice the size.
        # No default=: a value JSON cannot hold is an error, never its str().
        try:
            data = json.dumps(record).encode()
        except (TypeError, ValueError) as e:
            raise StateStoreError(f"cannot write {folder}/{name}: {e}") from e
        self.fs.create(base + _DATA, data)
        self.fs.create(base + _MARK, b"")

    def _get(self, folder: str, name: str) -> Any:
        """A committed record. Its commit marker says it was written whole: a data file
        that is empty or not JSON (a storage that lost it, a hand edit) is an error that
        names it, never read as "no state"."""
        uri = self.uri(folder, name) + _DATA
        data = self.fs.read(uri)
        try:
            if not data.strip():
                raise ValueError("the file is empty")
            return json.loads(data)
        except ValueError as e:
            raise StateStoreError(
                f"{uri} has a commit marker but cannot be read ({e}): the storage lost or "
                "changed it after it was written. Restore it from a backup, or remove it "
                f"and its marker ({self.uri(folder, name) + _MARK}): the job then starts "
                "again from the record before it, and the writes it finds done are skipped"
            ) from e

    def _drop(self, folder: str, name: str) -> None:
        base = self.uri(folder, name)
        self.fs.delete(base + _MARK)
        self.fs.delete(base + _DATA)

    def _next(self, folder: str, prefix: str) -> str:
        """A fresh name ``prefix-<seq>``: one past every attempt seen, committed or not."""
        _, seen = self._names(folder)
        used = [int(n.rsplit("-", 1)[1]) for n in seen if n.startswith(prefix + "-")]
        return f"{prefix}-{max(used, default=0) + 1:06d}"

    # --- the checkpoint's id ----------------------------------------------------------------

    def app_id(self) -> str:
        """The id of this checkpoint, created the first time it is asked for."""
        committed, _ = self._names("app")
        if not committed:
            name = self._next("app", "id")
            self._put("app", name, {"app_id": f"shardmerge-{uuid.uuid4().hex}"})
            committed = [name]
        app_id: str = self._get("app", committed[0])["app_id"]  # the first one, forever
        return app_id

    # --- coordinator state --------------------------------------------------------------

    def _states(self) -> dict[int, str]:
        """batch -> its newest committed state record."""
        committed, _ = self._names("state")
        return {int(n[:12]): n for n in committed}  # sorted: the last attempt wins

    def load_before(self, batch: int) -> dict[str, Any] | None:
        """The state saved by the newest batch before ``batch`` (None for a fresh job)."""
        states = self._states()
        earlier = [b for b in states if b < batch]
        if not earlier:
            return None
        data: dict[str, Any] = self._get("state", states[max(earlier)])
        return data

    def latest(self) -> tuple[int, dict[str, Any]] | None:
        states = self._states()
        if not states:
            return None
        batch = max(states)
        return batch, self._get("state", states[batch])

    def save(self, batch: int, data: dict[str, Any]) -> None:
        self._put("state", self._next("state", f"{batch:012d}"), data)
        _, failures = self._names("failed")
        for name in failures:
            self._drop("failed", name)
        self._prune()

    def _prune(self) -> None:
        states = self._states()
        kept = sorted(states)[-KEEP:]
        keep_names = {states[b] for b in kept}
        cutoff = kept[0]
        _, seen = self._names("state")
        for name in seen:
            # older batches, superseded attempts and dead writers' halves of kept ones
            if int(name[:12]) < cutoff or (int(name[:12]) <= kept[-1] and name not in keep_names):
                self._drop("state", name)
        _, intents = self._names("intent")
        for name in intents:
            if int(name[:12]) < cutoff:
                self._drop("intent", name)
        self._prune_cancelled()

    def _prune_cancelled(self) -> None:
        """A withdrawal is kept while a kept intent names its command: a batch that runs
        again must leave out what its first run left out."""
        cancelled = self.cancelled()
        if not cancelled:
            return
        named = {c["id"] for c in self._queued()}
        committed, _ = self._names("intent")
        for name in committed:
            named.update(c["id"] for c in self._get("intent", name))
        for command_id in cancelled - named:
            self._drop("cancelled", command_id)

    def save_failure(self, data: dict[str, Any]) -> None:
        """What the coordinator saw when a batch stopped the job (a strict conflict): for
        ``shardmerge locks`` and the operator. The batch itself runs again from the state
        before it."""
        self._put("failed", self._next("failed", "failure"), data)

    def failure(self) -> dict[str, Any] | None:
        committed, _ = self._names("failed")
        if not committed:
            return None
        data: dict[str, Any] = self._get("failed", committed[-1])
        return data

    # --- operator commands ---------------------------------------------------------------

    def submit(self, command: OperatorCommand | MoveCommand) -> str:
        """Queue ``command``: stored as its value (``command``), with its words for
        display; a batch reads the value (``command_of``)."""
        command_id = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        record = {"id": command_id, "command": command.to_json(), "words": command.words()}
        self._put("commands", command_id, record)
        return command_id

    def inbox(self) -> list[dict[str, Any]]:
        """The queued commands, oldest first, less those withdrawn."""
        cancelled = self.cancelled()
        return [c for c in self._queued() if c["id"] not in cancelled]

    def _queued(self) -> list[dict[str, Any]]:
        committed, _ = self._names("commands")
        return [self._get("commands", name) for name in committed]

    def cancelled(self) -> set[str]:
        committed, _ = self._names("cancelled")
        return set(committed)

    def cancel(self, command_id: str) -> str | None:
        """Withdraw a queued command; the reason it cannot be, or None once withdrawn.

        A batch running at this moment may already have fixed the command in its intent
        and applied it; a withdrawal only keeps the batches that start (or run again)
        after it from applying it."""
        if command_id not in {c["id"] for c in self._queued()}:
            return (
                f"no queued command {command_id}: it was applied by a batch already, or "
                "never queued (shardmerge locks lists the commands still waiting)"
            )
        if command_id not in self.cancelled():
            self._put("cancelled", command_id, {"id": command_id})
        return None

    def intent(self, batch: int, applied: set[str]) -> list[dict[str, Any]]:
        """The commands batch ``batch`` applies: fixed the first time the batch runs, less
        those withdrawn since (``cancel``)."""
        prefix = f"{batch:012d}"
        committed, _ = self._names("intent")
        mine = [n for n in committed if n.startswith(prefix + "-")]
        if mine:
            fixed: list[dict[str, Any]] = self._get("intent", mine[0])
            cancelled = self.cancelled()
            return [c for c in fixed if c["id"] not in cancelled]
        chosen = [c for c in self.inbox() if c["id"] not in applied]
        self._put("intent", self._next("intent", prefix), chosen)
        return chosen

    def forget_commands(self, applied: set[str]) -> None:
        """Remove the commands a saved state records as applied, and withdrawn ones (their
        withdrawals stay while an intent names them: ``_prune_cancelled``)."""
        cancelled = self.cancelled()
        for c in self._queued():
            if c["id"] in applied or c["id"] in cancelled:
                self._drop("commands", c["id"])


def command_of(record: dict[str, Any]) -> OperatorCommand | MoveCommand:
    """The command an inbox or intent record holds: its value (an unlock command, or a
    move's), or (a record queued before commands were stored as values) its words."""
    if "command" in record:
        if "move" in record["command"]:
            return MoveCommand.from_json(record["command"])
        return OperatorCommand.from_json(record["command"])
    return parse_command(str(record["words"]))
