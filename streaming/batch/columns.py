"""The columns a micro-batch adds to its frames, declared once with their meaning.

The batch's rows travel from the decode to the MERGE as one working frame: the event
columns (``streaming.source.contract.EVENT_SCHEMA``) plus the columns below, each added by one
step and read by later ones, in several modules. Small per-batch tables built on the
driver (``streaming.sql.local_frame``) are joined to it under prefixed names that cannot
clash with the event's, and dropped after the join. Every such name used in the modules
that build the batch's frames is declared here (``tests/unit/test_columns.py`` reads
their SQL and column names and fails on one that is not, or on a declaration nothing
uses). The parse's own columns (``streaming.source.decode``) are listed too; the format
modules' scratch columns (``streaming.source._decode``) live and die inside one expression
chain and are not.
"""

from __future__ import annotations

__all__ = ["COLUMNS", "PREFIXES"]

# name -> (which frame, what it holds)
COLUMNS: dict[str, tuple[str, str]] = {
    # --- the parse (streaming.source.decode): a row per Kafka record, kept for the batch ---
    "_j": ("parse", "the record's JSON envelope, parsed with the format's schema"),
    "_v": ("parse", "the record's value as text"),
    "_corrupt": ("parse", "the record's text when it is not JSON (from_json's corrupt column)"),
    "_tomb": ("parse", "a Debezium tombstone or null payload: no event, no dead letter"),
    "_reason": (
        "parse; projection",
        "in the parse: why the record is a dead letter (NULL: it decoded). In the "
        "projection: why the row is ahead of a DDL its shard has not run (NULL: it is not)",
    ),
    "_events": ("parse", "the record's events (NULL for a dead letter)"),
    # --- the working frame: a row per event, from the decode on ---
    "_okey": (
        "working",
        "the event's position as one comparable struct (streaming.source.control.ORDER_KEY: "
        "binlog file, position, row, commit ms, Kafka offset)",
    ),
    "_keys": ("step 4 aggregate", "the column names an after image names, as it names them"),
    "_cut": ("working (strict stop)", "the position of the first control event touching the shard"),
    # the plan's columns, joined per shard segment (streaming.batch.plan.PLAN_COLUMNS)
    "_act": ("plan", "what the segment's route does with the rows: write, hold, drop, unknown"),
    "_target": ("working", "the target table the row's segment routes to"),
    "_version": ("working", "its shard's table version (kept with a held row in the stash)"),
    "_project": (
        "working",
        "project the image onto the target's columns as they are, not as the row's shard "
        "had them (rows before their shard's last ALTER, replays that a release projects)",
    ),
    "_hold_from": ("working", "the position from which the shard's rows are held (NULL: none)"),
    "_drop_before": ("working", "the shard's last TRUNCATE in the batch: rows before it are gone"),
    "_renames": (
        "working",
        "the column renames of the shard after the row's position (position, old -> new), "
        "applied to the row's image in order",
    ),
    "_last_alter": ("working", "the position of the shard's last ALTER of the batch"),
    "_moved": (
        "working",
        "whether a split move moves the row's key (its keys predicate over the row's image; "
        "NULL for every row when no split move is under way: streaming.batch.moves)",
    ),
    "_pmoved": (
        "plan",
        "a segment of a split move's old side that covers only the rows whose key moves "
        "(true) or stays (false); NULL: every row of its range",
    ),
    "_fate": (
        "working",
        "what the batch does with the row (streaming.batch.writer.FATE): write, hold, drop, "
        "gone (truncated), replay, unknown",
    ),
    # the projection (streaming.batch.rows.project_actions)
    "_after": (
        "plan; projection",
        "in the plan: the position after which the segment starts (NULL: the batch's "
        "start); in the projection: the after image as a map, names lower-cased and renamed",
    ),
    "_before": ("projection", "the before image as a map, names lower-cased and renamed"),
    "_change": (
        "projection",
        "one change an event makes to the target (a: 'u' or 'd', img: the image, sub: its "
        "place): an upsert of its after image, a delete of its before image, both (two "
        "rows) when an update changes the key",
    ),
    "_c_": ("projection", "prefix: _c_<column> is the column's projected value"),
    "_action": ("projection", "the change's action in the MERGE: 'u' upsert, 'd' delete"),
    "_sub": ("projection", "the change's place within its event (the upsert after the delete)"),
    "_unfit": ("projection", "why a value does not fit its column (the row is a dead letter)"),
    "_rn": ("MERGE source", "the change's rank among its key's changes (1: the winner)"),
    "_rep": ("summary", "the row stands for its event in the counts (one change per event)"),
    "_wait": ("working", "the position from which its shard waits for a DDL"),
    # --- small driver tables, joined and dropped ---
    "_ps": ("plan table", "the segment's shard: source"),
    "_pd": ("plan table", "the segment's shard: database"),
    "_pt": ("plan table", "the segment's shard: table"),
    "_upto": ("plan table", "the position up to which the segment runs (NULL: the batch's end)"),
    "_rtarget": ("release table", "the released shard's target"),
    "_rs": ("release table", "the released shard: source"),
    "_rd": ("release table", "the released shard: database"),
    "_rt": ("release table", "the released shard: table"),
    "_rversion": ("release table", "the table version whose held rows replay"),
    "_until": ("release table", "replay the held rows before this position (NULL: all)"),
    "_rproject": ("release table", "project the replayed rows (see _project)"),
    "_ms": ("rename table", "the renamed shard's old name: source"),
    "_md": ("rename table", "the renamed shard's old name: database"),
    "_mt": ("rename table", "the renamed shard's old name: table"),
    "_mfrom": ("rename table", "the rows after this position (an earlier rename of the name)"),
    "_mat": ("rename table", "and before this one (the rename) take the new name"),
    "_mkeys": ("rename table", "a split move's re-home: only rows whose key moves (_moved) follow"),
    "_ns": ("rename table", "the shard's name at the end of the batch: source"),
    "_nd": ("rename table", "the shard's name at the end of the batch: database"),
    "_nt": ("rename table", "the shard's name at the end of the batch: table"),
    "_dt": ("control dead letters", "a control event that is a dead letter: its topic"),
    "_dp": ("control dead letters", "its Kafka partition"),
    "_do": ("control dead letters", "its Kafka offset"),
    "_free": (
        "new keys",
        "the winner's key is outside every island of its prefix: not in the table "
        "(streaming.batch.new_keys; appended, or a delete of nothing)",
    ),
    "_b": ("new keys", "the bucket of an upserted key (NULL for a delete)"),
    "_np": ("islands table", "prefix: _np<i> is the i-th extract column of the key, as text"),
    "_nlo": ("islands table", "the lowest key of the prefix's island"),
    "_nhi": ("islands table", "the highest key of the prefix's island"),
    "_shard_has": ("row fit", "the columns the row's shard has now"),
    "_shard_needs": (
        "row fit",
        "the columns a full image of the shard names (NOT NULL, not generated)",
    ),
}

# Names that only ever begin a column name (``_c_<column>``).
PREFIXES = ("_c_", "_np")
