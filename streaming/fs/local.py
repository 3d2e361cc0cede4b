"""Internal: the small-file interface of :class:`streaming.fs.hadoop.HadoopFs` on the local
filesystem, in plain Python: ``shardmerge locks`` and ``unlock`` read and write a local
checkpoint's state in milliseconds, without starting a JVM.

Only for ``file:`` URIs and plain paths (:func:`local_path`); every other scheme goes
through Hadoop's filesystems in a Spark session. Writes are as durable as the job's own:
a new file (never an existing name), synced, and its folder entry synced.
"""

from __future__ import annotations

import contextlib
import os
from urllib.parse import unquote, urlsplit

__all__ = ["LocalFs", "local_path", "sync_folder", "write_synced"]


def local_path(uri: str) -> str | None:
    """The local path of a ``file:`` URI or a plain absolute or relative path; None for
    any other scheme (``s3a://``, ``hdfs://``, ...)."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            return None  # file://host/...: another machine's disk
        return unquote(parts.path)
    if parts.scheme == "" or (len(parts.scheme) == 1 and os.name == "nt"):
        return uri
    return None


def write_synced(path: str, data: bytes, mode: int = 0o644) -> None:
    """Write a new file (fails if ``path`` exists) and sync it to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(folder: str) -> None:
    """Sync a folder's entries (a new name in it survives a crash)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalFs:
    def _local(self, uri: str) -> str:
        path = local_path(uri)
        if path is None:
            raise ValueError(f"{uri} is not on the local filesystem")
        return path

    def exists(self, uri: str) -> bool:
        return os.path.exists(self._local(uri))

    def is_file(self, uri: str) -> bool:
        return os.path.isfile(self._local(uri))

    def names(self, folder: str) -> list[str]:
        """The file names in ``folder`` (none when it does not exist yet)."""
        path = self._local(folder)
        if not os.path.isdir(path):
            return []
        return sorted(e.name for e in os.scandir(path) if e.is_file())

    def read(self, uri: str) -> bytes:
        with open(self._local(uri), "rb") as f:
            return f.read()

    def create(self, uri: str, data: bytes) -> bool:
        """Write a new file (fails if it exists), synced with its folder entry."""
        path = self._local(uri)
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, exist_ok=True)
        write_synced(path, data)
        sync_folder(folder)
        return True

    def delete(self, uri: str) -> None:
        # as Hadoop's delete: a file already gone is not an error
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._local(uri))
