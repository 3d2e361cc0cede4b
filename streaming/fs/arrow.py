"""Internal: the small-file interface of :class:`streaming.fs.hadoop.HadoopFs` on object
stores, through pyarrow's filesystems: ``shardmerge locks`` and ``unlock`` read and write a
checkpoint on S3 (``s3a://``, ``s3://``), Google Cloud Storage (``gs://``) or Azure
(``abfs://``, ``abfss://``) without starting a JVM.

Credentials and endpoints are those of each cloud's own SDK chain (for S3: the
``AWS_*`` environment variables, ``~/.aws``, an instance profile; ``AWS_ENDPOINT_URL`` for
an S3-compatible store), and, for S3, the ``spark.hadoop.fs.s3a.*`` settings of
``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``), so a machine set
up for ``spark-submit`` needs nothing more. HDFS and any other scheme stay with Hadoop's
own filesystems in a Spark session (``streaming.cli.verbs``).

The CLI writes only names nobody else writes (a command's id, a withdrawal of it), so a
``create`` that checks the name is free and then uploads keeps the store's rule (a name is
written once); an object exists only once its upload completed.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ARROW_SCHEMES", "ArrowFs", "s3a_settings"]

ARROW_SCHEMES = ("s3a", "s3", "gs", "gcs", "abfs", "abfss")
_PROPERTY = re.compile(r"^([^#!\s=:]+)\s*[=:\s]\s*(.*)$")


def s3a_settings(conf_dir: str | None = None) -> dict[str, str]:
    """The ``fs.s3a.*`` settings of ``spark-defaults.conf`` (keys without ``spark.hadoop.``)."""
    folder = (
        conf_dir
        or os.environ.get("SPARK_CONF_DIR")
        or (
            os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None
        )
    )
    if folder is None:
        return {}
    path = os.path.join(folder, "spark-defaults.conf")  # a local file, not a data URI
    if not os.path.isfile(path):
        return {}
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            # java.util.Properties: "key value", "key=value" or "key: value"
            m = _PROPERTY.match(line.strip())
            if m and m.group(1).startswith("spark.hadoop.fs.s3a."):
                out[m.group(1)[len("spark.hadoop.") :]] = m.group(2).strip()
    return out


def _s3(conf: dict[str, str]) -> Any:
    from pyarrow import fs

    options: dict[str, Any] = {}
    if conf.get("fs.s3a.access.key") and conf.get("fs.s3a.secret.key"):
        options["access_key"] = conf["fs.s3a.access.key"]
        options["secret_key"] = conf["fs.s3a.secret.key"]
        if conf.get("fs.s3a.session.token"):
            options["session_token"] = conf["fs.s3a.session.token"]
    region = conf.get("fs.s3a.endpoint.region") or os.environ.get("AWS_REGION")
    if region:
        options["region"] = region
    endpoint = conf.get("fs.s3a.endpoint") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
        options["endpoint_override"] = parts.netloc
        ssl = conf.get("fs.s3a.connection.ssl.enabled", "true").lower() != "false"
        options["scheme"] = parts.scheme or ("https" if ssl else "http")
    options["force_virtual_addressing"] = conf.get("fs.s3a.path.style.access") == "false"
    return fs.S3FileSystem(**options)


class ArrowFs:
    def __init__(self, root: str, conf: dict[str, str] | None = None) -> None:
        """The filesystem that holds ``root`` (a URI whose scheme is in ARROW_SCHEMES)."""
        from pyarrow import fs

        scheme = urlsplit(root).scheme.lower()
        if scheme not in ARROW_SCHEMES:
            raise ValueError(f"{root}: pyarrow reaches {', '.join(ARROW_SCHEMES)} only")
        self.scheme = scheme
        self._pa = fs
        if scheme in ("s3a", "s3"):
            self._fs = _s3(s3a_settings() if conf is None else conf)
        else:
            self._fs, _ = fs.FileSystem.from_uri(root)

    def _path(self, uri: str) -> str:
        parts = urlsplit(uri)
        if parts.scheme.lower() != self.scheme:
            raise ValueError(f"{uri} is not on this {self.scheme}:// filesystem")
        if self.scheme in ("abfs", "abfss"):  # container@account.dfs.core.windows.net/path
            return parts.netloc.split("@", 1)[0] + parts.path
        return parts.netloc + parts.path

    def _info(self, uri: str) -> Any:
        return self._fs.get_file_info(self._path(uri))

    def exists(self, uri: str) -> bool:
        return bool(self._info(uri).type != self._pa.FileType.NotFound)

    def is_file(self, uri: str) -> bool:
        return bool(self._info(uri).type == self._pa.FileType.File)

    def names(self, folder: str) -> list[str]:
        """The file names in ``folder`` (none when it does not exist yet)."""
        selector = self._pa.FileSelector(self._path(folder), allow_not_found=True)
        infos = self._fs.get_file_info(selector)
        return sorted(i.base_name for i in infos if i.type == self._pa.FileType.File)

    def read(self, uri: str) -> bytes:
        with self._fs.open_input_stream(self._path(uri)) as f:
            data: bytes = f.read()
        return data

    def create(self, uri: str, data: bytes) -> bool:
        """Write a new object (fails if the name is taken). Not synced in the filesystem
        sense: an object store shows the object once its upload completed."""
        if self.exists(uri):
            raise FileExistsError(uri)
        with self._fs.open_output_stream(self._path(uri)) as f:
            f.write(data)
        return False

    def delete(self, uri: str) -> None:
        # as Hadoop's delete: a file already gone is not an error
        if self.exists(uri):
            self._fs.delete_file(self._path(uri))
