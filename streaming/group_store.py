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
- Hadoop filesystems (``hdfs://``, ``s3a://``, ``abfss://``): not yet (docs/status.md);
  a store that cannot create a file only if it is absent must be refused, which
  :func:`probe` checks before a job joins a group.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any, Protocol

from shardmerge.errors import ShardMergeError
from streaming.hadoop_fs import join
from streaming.local_fs import local_path, sync_folder, write_synced

__all__ = ["GroupStore", "GroupStoreError", "LocalRecords", "Records", "group_store", "probe"]

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

    def names(self, folder: str) -> list[str]:
        path = self._path(folder)
        if not os.path.isdir(path):
            return []
        return sorted(
            e.name for e in os.scandir(path) if e.is_file() and not e.name.startswith(".")
        )


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

    def claim_next(self, folder: str, value: dict[str, Any], attempts: int = 1000) -> int:
        """Put ``value`` under the first free number of ``folder``; its number.

        A writer that loses a number to another tries the next one; ``attempts`` bounds
        the tries (a store that keeps refusing is an error, not a loop)."""
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

    def append(self, record: dict[str, Any]) -> int:
        """Append a record to the group log; its sequence number."""
        return self.claim_next("log", record)

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


def group_store(root: str) -> GroupStore:
    """The group store at ``root``: local paths and ``file:`` URIs only for now."""
    if local_path(root) is None:
        raise GroupStoreError(
            f"the group store at {root}: only the local filesystem is supported yet; "
            "HDFS and object stores need a Hadoop backend with create-if-absent "
            "(docs/status.md)"
        )
    return GroupStore(LocalRecords(), root)


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
