"""Spark's offsets log as text: ``CHECKPOINT/spark/offsets/<batch>`` holds ``v1``, the
batch's metadata (JSON, ``batchTimestampMs`` among it), then a line per source of the
query; a Kafka source's line is ``{"topic": {"partition": next offset}}`` (``-`` before it
has any). Plain Python, no Spark: the job's caught-up and topic-id checks read it through
the session's filesystem, ``shardmerge lag`` without a JVM."""

from __future__ import annotations

import json

__all__ = ["kafka_offsets", "parse_offsets_log"]


def parse_offsets_log(text: str) -> tuple[int, list[str]]:
    """When Spark planned the batch (ms) and its sources' lines; ValueError when ``text``
    is not an offsets log."""
    lines = text.splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise ValueError(f"not a Spark offsets log (first lines {lines[:2]!r})")
    planned = int(json.loads(lines[1])["batchTimestampMs"])
    return planned, [line for line in lines[2:] if line.strip()]


def kafka_offsets(line: str) -> dict[tuple[str, int], int]:
    """A Kafka source's offsets from its line of the log; ValueError for another source's."""
    if line.strip() == "-":
        return {}  # the source had no offsets yet
    raw = json.loads(line)
    if not isinstance(raw, dict):
        raise ValueError(f"not the offsets of a Kafka source: {line[:200]!r}")
    return {
        (topic, int(p)): int(o)
        for topic, parts in raw.items()
        if isinstance(parts, dict)
        for p, o in parts.items()
    }
