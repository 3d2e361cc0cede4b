"""Spark settings for the local session from the environment, and the test suite's set.

No pyspark import here: the tests' ``conftest`` reads this before any session exists.
"""

from __future__ import annotations

import os

__all__ = ["ENV_CONF", "SMALL_BATCH_CONF", "env_conf"]

ENV_CONF = "SHARDMERGE_SPARK_CONF"

# For sessions whose batches hold tens of rows (the test suite): expressions interpreted,
# not compiled. A batch of a few rows runs some forty Spark jobs, each of whose plans
# Spark would turn into Java source, compile with Janino and then hand to the JVM's JIT
# compilers as new classes: profiled on a scenario file, Janino took 16% of the driver's
# work and the JIT's C2 compiler 38% of all CPU, and with these settings scenario files ran
# ~30% faster. Spark's interpreted and generated expressions give the same results (Spark
# tests both); for large batches generated code is faster, so the job's default stays.
SMALL_BATCH_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def env_conf(text: str | None = None) -> dict[str, str]:
    """The settings of ``SHARDMERGE_SPARK_CONF`` (or ``text``): ``key=value`` entries
    separated by whitespace. An entry without ``=`` or with an empty key is an error that
    names it."""
    text = os.environ.get(ENV_CONF, "") if text is None else text
    conf: dict[str, str] = {}
    for entry in text.split():
        key, sep, value = entry.partition("=")
        if not sep or not key:
            raise ValueError(f"{ENV_CONF}: {entry!r} is not key=value")
        conf[key] = value
    return conf
