"""Control events (DDL, TRUNCATE): their one order, and source positions.

A position is ``[binlog file, position, row in event, commit time ms, Kafka offset]``;
the order key ``_okey`` of a row is the same five values as a Spark struct, so a position
read on the driver and a row's key compare the same way (:data:`ORDER_KEY`,
:func:`position_of`, :func:`okey_position`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from coordinator.ids import ShardId
from schemas.changes import (
    AlterTable,
    CreateTable,
    DropDatabase,
    DropTable,
    RenameTable,
    TruncateTable,
)
from schemas.ddl import parse_ddl
from schemas.errors import DDLError
from streaming.sql.quoting import ident, string

__all__ = [
    "OKEY_TYPE",
    "ORDER_KEY",
    "as_dict",
    "commit_seconds",
    "commit_time",
    "control_sql",
    "in_global_order",
    "join_split_renames",
    "okey_position",
    "okey_sql",
    "position_of",
    "table_level",
    "touched",
    "upstream_origin",
]

ORDER_KEY = (
    "named_struct('f', coalesce(pos_file, ''), 'p', coalesce(pos, -1L), "
    "'r', coalesce(pos_row, -1), 't', coalesce(ts_ms, 0L), 'o', offset)"
)
# The Spark type of ORDER_KEY, for positions shipped to the executors in a small table.
OKEY_TYPE = "struct<f:string,p:bigint,r:int,t:bigint,o:bigint>"


def commit_seconds(position: Any) -> float | None:
    """The upstream commit time (unix seconds) of a position, if it has one."""
    if isinstance(position, list | tuple) and len(position) >= 4 and position[3]:
        return float(position[3]) / 1000
    return None


def position_of(row: Any) -> list[Any]:
    """A JSON-able position that orders like ORDER_KEY."""
    return [
        row["pos_file"] or "",
        row["pos"] if row["pos"] is not None else -1,
        row["pos_row"] if row["pos_row"] is not None else -1,
        row["ts_ms"] or 0,
        row["offset"],
    ]


def upstream_origin(row: Any) -> list[Any] | None:
    """Where and when a control event happened in its upstream's own log: binlog file,
    position, row and commit time (the Kafka offset left out: a re-sent event has a new
    one). ``None`` when the format carries no binlog position (canal-json): such events
    are never recognised as sent again (``Coordinator.resent``)."""
    file, pos, pos_row, ts_ms, _offset = position_of(row)
    return [file, pos, pos_row, ts_ms] if file and pos >= 0 else None


def okey_position(okey: Any) -> list[Any]:
    """The position of an ``_okey`` struct read back on the driver."""
    return [okey["f"], okey["p"], okey["r"], okey["t"], okey["o"]]


def okey_value(position: Any) -> tuple[Any, ...] | None:
    """A position as a value of :data:`OKEY_TYPE` for ``createDataFrame`` (None stays)."""
    if position is None:
        return None
    f, p, r, t, o = position
    return (str(f), int(p), int(r), int(t), int(o))


def okey_sql(position: Any) -> str:
    """A position as a Spark SQL literal of :data:`OKEY_TYPE` (comparable with
    :data:`ORDER_KEY`)."""
    f, p, r, t, o = okey_value(position)  # type: ignore[misc]
    return (
        f"named_struct('f', {string(f)}, 'p', CAST({p} AS BIGINT), 'r', CAST({r} AS INT), "
        f"'t', CAST({t} AS BIGINT), 'o', CAST({o} AS BIGINT))"
    )


def control_sql(r: Any) -> str:
    """The statement of a control event (a TRUNCATE event carries no text)."""
    return str(r["ddl"]) if r["op"] == "ddl" else f"TRUNCATE TABLE {ident(r['tbl'])}"


_RENAME = re.compile(r"^\s*RENAME\s+TABLES?\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)


def as_dict(r: Any) -> dict[str, Any]:
    """A control event (a collected Row, or already a dict) as a dict of its columns."""
    return r if isinstance(r, dict) else dict(r.asDict())


def join_split_renames(controls: list[Any]) -> list[Any]:
    """Put back together a ``RENAME TABLE a TO b, c TO d`` that the CDC tool split.

    Debezium writes one schema-change event per pair of a multi-table RENAME, all with the
    statement's binlog position. The pairs are one atomic statement (gh-ost's cut-over
    swaps the shadow table in with it), and coordination must see them as one: apart, the
    first pair renames the shard away and the second brings in a table it does not know.
    Two statements never share a binlog position, so the events of one position make one
    statement again, in their (Kafka offset) order."""
    out: list[Any] = []
    for r in sorted(controls, key=lambda r: (r["source"], *position_of(r)[:3], r["offset"])):
        prev = out[-1] if out else None
        pairs = _RENAME.match(r["ddl"] or "") if r["op"] == "ddl" else None
        if (
            pairs is not None
            and prev is not None
            and prev["op"] == "ddl"
            and _RENAME.match(prev["ddl"] or "")
            and prev["source"] == r["source"]
            and r["pos"] is not None
            and r["pos"] >= 0
            and (prev["pos_file"], prev["pos"]) == (r["pos_file"], r["pos"])
        ):
            out[-1] = {**as_dict(prev), "ddl": f"{prev['ddl'].rstrip()}, {pairs.group(1)}"}
            continue
        out.append(r)
    return out


def commit_time(r: Any) -> int:
    """When a control event happened, for ordering across sources.

    A snapshot's DDL (Debezium's CREATE TABLE of a table that existed when capture began)
    describes a state older than any binlog event after it, yet carries the time the
    snapshot *read* it, to the millisecond, while binlog events carry their commit time in
    whole seconds (MySQL and MariaDB binlogs): a DDL committed right after another source's
    snapshot could sort before it, and find that source's tables not yet registered. A
    snapshot's DDL counts as time 0: it comes first, before the binlog events of every
    source (within its own source, positions keep the order anyway)."""
    return 0 if r["snapshot"] else r["ts_ms"] or 0


def in_global_order(controls: list[Any]) -> list[Any]:
    """Control events by commit time across sources, and by binlog position within one
    source (a commit time may repeat or step back; the position never does)."""
    slots = sorted(
        controls, key=lambda r: (commit_time(r), r["source"], *position_of(r)[:3], r["offset"])
    )
    by_source: dict[str, list[Any]] = {}
    for r in sorted(controls, key=lambda r: (*position_of(r)[:3], r["offset"])):
        by_source.setdefault(r["source"], []).append(r)
    return [by_source[r["source"]].pop(0) for r in slots]


def table_level(r: Any) -> bool:
    """Whether a control event creates, renames or drops tables (or cannot be parsed):
    such a statement changes which rows are whose."""
    if r["op"] != "ddl" or not r["ddl"]:
        return False
    try:
        changes = parse_ddl(r["ddl"])
    except DDLError:
        return True
    return any(not isinstance(c, AlterTable | TruncateTable) for c in changes)


def touched(r: Any, known: Iterable[ShardId]) -> list[ShardId]:
    """Every table a control event changes: its own, and each table a multi-table
    statement names (both names of each RENAME pair, every table of a DROP; for a DROP
    DATABASE, the ``known`` tables of that database: only then is ``known`` walked)."""
    own = ShardId(r["source"], r["db"], r["tbl"])
    if r["op"] != "ddl" or not r["ddl"]:
        return [own]
    try:
        changes = parse_ddl(r["ddl"])
    except DDLError:
        return [own]
    out = [own]
    for change in changes:
        names = []
        if isinstance(change, RenameTable):
            names = [change.old, change.new]
        elif isinstance(change, DropTable | AlterTable | TruncateTable | CreateTable):
            names = [change.table]
        elif isinstance(change, DropDatabase):
            out += [s for s in known if s.source == own.source and s.db == change.name]
        out += [ShardId(own.source, n.db or own.db, n.table) for n in names]
    return list(dict.fromkeys(out))
