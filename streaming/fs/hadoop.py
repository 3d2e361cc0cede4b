"""Internal: small files on any filesystem Spark can write, through Hadoop's FileSystem API.

The job keeps its own state (streaming/storage/state_store.py) next to Spark's checkpoint, which
may be ``file:``, ``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``... Going through the
``FileSystem`` of the running Spark session's JVM means every scheme (and every
credential, endpoint or option) the submitter configured for Spark works here too, with
no second client to configure. Paths are URI strings: ``pathlib`` would turn
``s3a://bucket/cp`` into ``s3a:/bucket/cp``.

Errors from the JVM (``Py4JJavaError``) are not caught here: an unreadable state fails the
batch, and Spark runs it again.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # settings join URIs without importing pyspark
    from pyspark.sql import SparkSession

__all__ = ["HadoopFs", "join"]


def join(base: str, *parts: str) -> str:
    """``base`` with ``parts`` appended as path segments (URI-safe: no pathlib)."""
    out = base.rstrip("/")
    for part in parts:
        out += "/" + part.strip("/")
    return out


class HadoopFs:
    """The Hadoop FileSystem that holds ``root`` (a URI), as the Spark session sees it."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm = spark._jvm
        if jvm is None:  # Spark Connect: no JVM in this process
            raise RuntimeError("the state store needs a classic SparkSession with a JVM")
        self._jvm: Any = jvm
        # The session's Hadoop conf: spark.hadoop.* plus the session's fs.* settings, as
        # Spark and Delta use it for the same paths.
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        fs = self._path(root).getFileSystem(conf)
        if str(fs.getScheme()) == "file":
            # Hadoop's local filesystem checksums through a stream that cannot hsync: a
            # machine crash could leave a commit marker next to an empty state file. The
            # raw local filesystem under it syncs (and the files need no .crc beside them).
            fs = fs.getRawFileSystem()
        self._fs: Any = fs

    def _path(self, uri: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(uri)

    def exists(self, uri: str) -> bool:
        return bool(self._fs.exists(self._path(uri)))

    def is_file(self, uri: str) -> bool:
        path = self._path(uri)
        return bool(self._fs.exists(path)) and bool(self._fs.isFile(path))

    def names(self, folder: str) -> list[str]:
        """The file names in ``folder`` (none when it does not exist yet)."""
        path = self._path(folder)
        if not self._fs.exists(path):
            return []
        return sorted(s.getPath().getName() for s in self._fs.listStatus(path) if s.isFile())

    def read(self, uri: str) -> bytes:
        stream = self._fs.open(self._path(uri))
        try:
            data: bytes = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return data

    def create(self, uri: str, data: bytes) -> bool:
        """Write a new file; fails if ``uri`` exists (names are never reused). Returns
        whether the bytes were synced to disk.

        The bytes are durable when this returns: ``hsync`` where the stream offers it
        (HDFS, ``file:``), and on object stores the object exists only once ``close`` has
        uploaded all of it."""
        stream = self._fs.create(self._path(uri), False)
        synced = False
        try:
            stream.write(bytearray(data))
            if stream.hasCapability("hsync"):
                stream.hsync()
                synced = True
        finally:
            stream.close()
        return synced

    def create_new(self, uri: str, data: bytes) -> bool:
        """Put-if-absent (the group store's one write): ``data`` under ``uri`` only if
        nothing is there; False when another writer has the name. ``s3a://``: one
        conditional PUT (``If-None-Match: *``, S3A's ``fs.option.create.conditional.
        overwrite``); other filesystems: a temporary file renamed under the name (atomic,
        and refused when the name exists, on HDFS and ABFS with a hierarchical namespace)."""
        from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

        path = self._path(uri)
        if str(self._fs.getScheme()) == "s3a":
            try:
                # S3A checks the name first (a name taken before is refused here), then
                # the PUT on close carries If-None-Match: * (a race lost is refused there).
                builder = self._fs.createFile(path).overwrite(False)
                stream = builder.must(CONDITIONAL_CREATE, True).build()
                stream.write(bytearray(data))
                stream.close()  # the PUT: only now is the object created, if absent
            except Py4JJavaError as e:
                if _lost_the_name(e):
                    return False
                raise
            return True
        tmp = join(uri.rsplit("/", 1)[0], f".tmp-{uuid.uuid4().hex}")
        self.create(tmp, data)
        renamed = False
        try:
            renamed = bool(self._fs.rename(self._path(tmp), path))  # false: the name exists
        finally:
            if not renamed:
                self.delete(tmp)
        return renamed

    def delete(self, uri: str) -> None:
        self._fs.delete(self._path(uri), False)

    def replace(self, uri: str, data: bytes) -> None:
        """Write ``data`` under ``uri``, replacing what is there. ``s3a://``: one PUT (the
        object is replaced whole); elsewhere a temporary file renamed over the name (the
        name is absent for a moment between the delete and the rename)."""
        if str(self._fs.getScheme()) == "s3a":
            stream = self._fs.create(self._path(uri), True)
            try:
                stream.write(bytearray(data))
            finally:
                stream.close()
            return
        tmp = join(uri.rsplit("/", 1)[0], f".tmp-{uuid.uuid4().hex}")
        self.create(tmp, data)
        self._fs.delete(self._path(uri), False)
        if not self._fs.rename(self._path(tmp), self._path(uri)):
            self.delete(tmp)
            raise OSError(f"{uri}: the new record could not be renamed into place")


CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite"


def _lost_the_name(e: Any) -> bool:
    """Whether a failed create lost to another writer: the name existed already
    (FileAlreadyExistsException), or S3 refused the conditional PUT (412 Precondition
    Failed, which S3A raises as RemoteFileChangedException)."""
    java = e.java_exception
    while java is not None:
        name = java.getClass().getName()
        if name.endswith(("RemoteFileChangedException", "FileAlreadyExistsException")):
            return True
        java = java.getCause()
    return False
