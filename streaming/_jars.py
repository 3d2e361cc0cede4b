"""Internal: where the JVM jars copied by ``scripts/fetch-jars`` live.

The jars are not in git (they are ~70 MB and come from Maven Central); a fresh clone gets
them with ``scripts/fetch-jars``. Both the local Kafka broker and the SparkSession read
them from here, so a missing folder gives one error that says what to run.
"""

from __future__ import annotations

from pathlib import Path

from shardmerge.errors import ShardMergeError

__all__ = ["REPO_ROOT", "JarsMissing", "jars"]

REPO_ROOT = Path(__file__).resolve().parents[1]
JARS_DIR = REPO_ROOT / ".jars"


class JarsMissing(ShardMergeError):
    """The jars folder is empty or absent: run ``scripts/fetch-jars`` (needs Java + Maven)."""


def jars(kind: str) -> list[Path]:
    """The jar files of ``.jars/<kind>/`` (``kafka`` or ``spark``), sorted by name."""
    folder = JARS_DIR / kind
    found = sorted(folder.glob("*.jar"))
    if not found:
        raise JarsMissing(
            f"no jars in {folder}: run scripts/fetch-jars from {REPO_ROOT} "
            "(it copies them from Maven Central with mvn; needs Java and Maven)"
        )
    return found
