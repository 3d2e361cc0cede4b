"""Internal: where the JVM jars of the *local* development session live.

Only the embedded default (``shardmerge demo``, the tests, ``shardmerge run`` without a
cluster) looks for jars here; under ``spark-submit`` the submitter ships them
(``--jars``/``--packages``, docs/cluster.md) and nothing is looked up.

The jars are not in git (they are ~70 MB and come from Maven Central); a checkout gets
them with ``scripts/fetch-jars`` into ``.jars/``. An installed wheel has no checkout:
``SHARDMERGE_JARS`` names a folder with ``spark/`` (and ``kafka/``) jar folders instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from shardmerge.errors import ShardMergeError

__all__ = ["REPO_ROOT", "JarsMissing", "jars", "jars_dir"]

REPO_ROOT = Path(__file__).resolve().parents[2]
JARS_DIR = REPO_ROOT / ".jars"
ENV = "SHARDMERGE_JARS"


class JarsMissing(ShardMergeError):
    """The jars folder is empty or absent: run ``scripts/fetch-jars`` (needs Java + Maven)
    in a checkout, or set ``SHARDMERGE_JARS``; on a cluster, use spark-submit."""


def jars_dir() -> Path:
    """``$SHARDMERGE_JARS`` if set, else the checkout's ``.jars/``."""
    override = os.environ.get(ENV)
    return Path(override) if override else JARS_DIR


def jars(kind: str) -> list[Path]:
    """The jar files of ``<jars>/<kind>/`` (``kafka`` or ``spark``), sorted by name."""
    folder = jars_dir() / kind
    found = sorted(folder.glob("*.jar"))
    if not found:
        raise JarsMissing(
            f"no jars in {folder}: in a checkout run scripts/fetch-jars (it copies them from "
            f"Maven Central with mvn; needs Java and Maven); else set {ENV} to a folder "
            "holding spark/*.jar, or submit the job with spark-submit (docs/cluster.md)"
        )
    return found
