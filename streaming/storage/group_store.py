"""The group store: write-once records shared by the jobs of a group (several jobs writing
one target; docs/groups.md).

Everything a group shares is built from one operation, **put-if-absent**: ``create_new``
writes a record under a name only if no record has that name, and tells the caller
whether it won. A numbered folder (the group log, a job's epochs, the owner's terms) takes
its next number with the same operation (``claim_next``): the first free number is tried,
and a writer that lost the race tries the next one, so every number has exactly one
record and no record is ever overwritten.

A record is visible whole or not at all: the local backend writes a temporary file,
syncs it, and links it under its name (``link`` fails when the name exists, and a name
never points at a partly written file).

Backends:
- ``file:`` and plain paths: :class:`LocalRecords` (this module), in plain Python.
- ``s3a://``: :class:`HadoopRecords`, one conditional PUT per record (``If-None-Match: *``,
  S3A's ``fs.option.create.conditional.overwrite``, Hadoop 3.4.2 and later): the store
  keeps the first object under a name and refuses the others (412), and an object is
  visible whole or not at all.
- ``hdfs://``, ``viewfs://``, ``abfs://``, ``abfss://``: :class:`HadoopRecords`, written to a
  temporary name and renamed under its own: their rename is atomic and fails when the
  name exists (HDFS; ABFS on a hierarchical-namespace account).
- Any other scheme is refused with the reason (``gs://``'s rename copies; ``s3://`` of
  other connectors has no conditional create). :func:`probe` checks a store before a job
  joins a group: a store that overwrites (an S3-compatible server that ignores
  ``If-None-Match``, an ABFS account without a hierarchical namespace) is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any, Protocol
from urllib.parse import urlsplit

from shardmerge.errors import ShardMergeError
from streaming.fs.hadoop import HadoopFs, join
from streaming.fs.local import local_path, sync_folder, write_synced

__all__ = [
    "GroupStore",
    "GroupStoreError",
    "HadoopRecords",
    "LocalRecords",
    "Records",
    "group_store",
    "probe",
]

SEQ_DIGITS = 12
_NUMBERED = re.compile(r"^(\d+)\.json$")
_TMP_PREFIX = ".tmp-"


class GroupStoreError(ShardMergeError):
    pass


class Records(Protocol):
    """Write-once files under URIs (the backend of a :class:`GroupStore`)."""

    def create_new(self, uri: str, data: bytes) -> bool:
        """Write ``data`` under ``uri`` if nothing is there; False if something is."""
        ...

    def read(self, uri: str) -> bytes | None:
        """The record under ``uri``, or None if there is none."""
        ...

    def names(self, folder: str) -> list[str]:
        """The record names in ``folder``, sorted (none when it does not exist)."""
        ...

    def replace(self, uri: str, data: bytes) -> None:
        """Write ``data`` under ``uri`` whatever is there: only for a record one writer
        owns (a member's heartbeat). A reader may find it absent for a moment."""
        ...

    def delete(self, uri: str) -> None:
        """Remove the record under ``uri`` (nothing when there is none): only for records
        nobody reads any more (an epoch older than the newest ones)."""
        ...


class LocalRecords:
    """Records on the local filesystem: written whole to a temporary file, synced, then
    linked under their name (atomic, and refused by the kernel when the name exists)."""

    def _path(self, uri: str) -> str:
        path = local_path(uri)
        if path is None:
            raise GroupStoreError(f"{uri} is not on the local filesystem")
        return path

    def create_new(self, uri: str, data: bytes) -> bool:
        path = self._path(uri)
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f"{_TMP_PREFIX}{uuid.uuid4().hex}")
        try:
            write_synced(tmp, data)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            sync_folder(folder)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):  # not created: nothing to remove
                os.remove(tmp)

    def read(self, uri: str) -> bytes | None:
        try:
            with open(self._path(uri), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def replace(self, uri: str, data: bytes) -> None:
        path = self._path(uri)
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f"{_TMP_PREFIX}{uuid.uuid4().hex}")
        write_synced(tmp, data)
        os.replace(tmp, path)  # atomic: a reader sees the old record or the new one

    def delete(self, uri: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._path(uri))

    def names(self, folder: str) -> list[str]:
        path = self._path(folder)
        if not os.path.isdir(path):
            return []
        return sorted(
            e.name for e in os.scandir(path) if e.is_file() and not e.name.startswith(".")
        )


RENAME_SCHEMES = ("hdfs", "viewfs", "abfs", "abfss")
HADOOP_SCHEMES = ("s3a", *RENAME_SCHEMES)


class HadoopRecords:
    """Records through a Spark session's Hadoop filesystems (``HadoopFs.create_new``:
    ``s3a://`` a conditional PUT, the :data:`RENAME_SCHEMES` a temporary file renamed)."""

    def __init__(self, fs: HadoopFs) -> None:
        self.fs = fs

    def create_new(self, uri: str, data: bytes) -> bool:
        return self.fs.create_new(uri, data)

    def read(self, uri: str) -> bytes | None:
        return self.fs.read(uri) if self.fs.exists(uri) else None

    def names(self, folder: str) -> list[str]:
        return [n for n in self.fs.names(folder) if not n.startswith(".")]

    def replace(self, uri: str, data: bytes) -> None:
        self.fs.replace(uri, data)

    def delete(self, uri: str) -> None:
        self.fs.delete(uri)


class GroupStore:
    """A group's records under ``root`` (``SINK/_shardmerge/groups/<group>``)."""

    def __init__(self, records: Records, root: str) -> None:
        self.records = records
        self.root = root

    def uri(self, *parts: str) -> str:
        return join(self.root, *parts)

    # --- single records ---------------------------------------------------------------------

    def create_new(self, name: str, value: dict[str, Any]) -> bool:
        """Put ``value`` under ``name`` (a path below the root) if it is absent."""
        return self.records.create_new(self.uri(name), _encode(value))

    def read(self, name: str) -> dict[str, Any] | None:
        data = self.records.read(self.uri(name))
        return None if data is None else _decode(data, self.uri(name))

    # --- numbered folders -------------------------------------------------------------------

    def numbers(self, folder: str) -> list[int]:
        """The numbers taken in ``folder``, ascending."""
        found = []
        for name in self.records.names(self.uri(folder)):
            m = _NUMBERED.match(name)
            if m is not None:
                found.append(int(m.group(1)))
        return sorted(found)

    def claim_next(
        self, folder: str, value: dict[str, Any], attempts: int = 1000, start: int | None = None
    ) -> int:
        """Put ``value`` under the first free number of ``folder``; its number.

        A writer that loses a number to another tries the next one; ``attempts`` bounds
        the tries (a store that keeps refusing is an error, not a loop). ``start``: the
        first number to try, when the caller knows every number below it is taken (a
        reader of the folder up to there), so that the folder need not be listed; unless
        the number after it is taken (``start`` is a gap: a record lost, which nobody may
        fill but an operator), then the folder is listed and the claim goes past its end."""
        if start is not None and self.records.read(self.uri(folder, _numbered(start + 1))) is None:
            n = start
        else:
            taken = self.numbers(folder)
            n = taken[-1] + 1 if taken else 0
        data = _encode(value)
        for _ in range(attempts):
            if self.records.create_new(self.uri(folder, _numbered(n)), data):
                return n
            n += 1
        raise GroupStoreError(
            f"no free number in {self.uri(folder)} after {attempts} attempts from {n - attempts}"
        )

    def prune(self, folder: str, keep: int) -> int:
        """Remove all but the newest ``keep`` numbered records of ``folder``; how many."""
        old = self.numbers(folder)[:-keep] if keep > 0 else self.numbers(folder)
        for n in old:
            self.records.delete(self.uri(folder, _numbered(n)))
        return len(old)

    def prune_below(self, folder: str, n: int) -> int:
        """Remove the numbered records of ``folder`` below ``n``, lowest first (a removal
        stopped half-way leaves the records from some number on, never a gap); how many."""
        old = [m for m in self.numbers(folder) if m < n]
        for m in old:
            self.records.delete(self.uri(folder, _numbered(m)))
        return len(old)

    def put(self, name: str, value: dict[str, Any]) -> None:
        """Write ``value`` under ``name``, replacing what is there (one writer's record)."""
        self.records.replace(self.uri(name), _encode(value))

    def read_numbered(self, folder: str, n: int) -> dict[str, Any] | None:
        return self.read(f"{folder}/{_numbered(n)}")

    def since(self, folder: str, after: int = -1) -> Iterator[tuple[int, dict[str, Any]]]:
        """The records of ``folder`` numbered above ``after``, in order, up to the first
        gap (a number a writer claimed is never empty, so a gap is one not written yet:
        nothing past it is read, and the order is the same for every reader)."""
        n = after + 1
        while True:
            value = self.read_numbered(folder, n)
            if value is None:
                return
            yield n, value
            n += 1

    # --- the group log ----------------------------------------------------------------------

    def append(self, record: dict[str, Any], start: int | None = None) -> int:
        """Append a record to the group log; its sequence number. ``start``: the first
        number not read yet by the caller (no listing of the log: see ``claim_next``)."""
        return self.claim_next("log", record, start=start)

    def log(self, after: int = -1) -> Iterator[tuple[int, dict[str, Any]]]:
        return self.since("log", after)


def _numbered(n: int) -> str:
    if n < 0:
        raise GroupStoreError(f"record number {n} is negative")
    return f"{n:0{SEQ_DIGITS}d}.json"


def _encode(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _decode(data: bytes, uri: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as e:
        raise GroupStoreError(f"record {uri} is not JSON: {e}") from e
    if not isinstance(value, dict):
        raise GroupStoreError(f"record {uri} is not a JSON object")
    return value


def group_store(root: str, spark: Any = None) -> GroupStore:
    """The group store at ``root``: the local filesystem in plain Python; ``s3a://``,
    ``hdfs://``, ``viewfs://`` and ``abfs[s]://`` through ``spark``'s Hadoop filesystems."""
    if local_path(root) is not None:
        return GroupStore(LocalRecords(), root)
    scheme = urlsplit(root).scheme.lower()
    if scheme not in HADOOP_SCHEMES:
        raise GroupStoreError(
            f"the group store at {root}: {scheme}:// offers no create-if-absent the job can "
            f"trust; use the local filesystem or one of {', '.join(HADOOP_SCHEMES)}"
        )
    if spark is None:
        raise GroupStoreError(f"the group store at {root} needs a Spark session")
    return GroupStore(HadoopRecords(HadoopFs(spark, root)), root)


def probe(store: GroupStore) -> None:
    """Refuse a store that does not create a record only if it is absent: a record
    created twice under one name must be refused the second time."""
    name = f"probe/{uuid.uuid4().hex}.json"
    first = store.create_new(name, {"probe": 1})
    second = store.create_new(name, {"probe": 2})
    kept = store.read(name)
    if not first or second or kept != {"probe": 1}:
        raise GroupStoreError(
            f"the group store at {store.root} cannot create a record only if it is absent "
            f"(first create {first}, second create {second}, kept {kept}); jobs of a group "
            "would overwrite each other's records"
        )
