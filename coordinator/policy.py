"""Schema-change policy: per target and per kind of DDL, what shardmerge does with it.

Internal module. Operators say per kind of statement (``add_column``, ``truncate_table``,
...) one of the words CDC tools use (DataWorks, Flink CDC's ``schema.change.behavior``):

- ``forward``: coordinated as always (the lock rules of the target's mode);
- ``ignore``: recorded, nothing downstream; the shard goes on, its rows projected onto the
  downstream columns (as after an operator ``skip``);
- ``warn``: as ``ignore``, and counted and logged;
- ``fail``: the shard is held and the lock goes to stage ``conflict`` naming the shard,
  statement, kind and policy; the operator resolves it (``skip``, ``exec``, ``replace``);
  it never stops the job, strict or not;
- ``keep`` (``drop_column`` only): the downstream keeps the column; the shard keeps it as
  nullable (a NOT NULL column without default becomes NULL), so its later rows write NULL
  or the column's default.

The policy is applied to each DDL before the lock rules, per ALTER specification: the
specifications left to ``forward`` (and ``keep``'s rewrites) are coordinated as one
statement; one ``fail`` holds the whole statement. :func:`alter_verdict` is pure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from schemas.changes import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    AlterTable,
    ChangeColumn,
    DropColumn,
    DropConstraint,
    DropIndex,
    DropPrimaryKey,
    ForeignKeyIndex,
    ModifyColumn,
    RenameColumn,
    RenameIndex,
    SetDefault,
    TableOptions,
)
from schemas.model import TableSchema, name_key

__all__ = [
    "ALLOWED",
    "KINDS",
    "WORDS",
    "AlterVerdict",
    "Policy",
    "PolicyNote",
    "alter_verdict",
    "partition_kind",
    "spec_kinds",
]

Word = Literal["forward", "ignore", "warn", "fail", "keep"]
WORDS: tuple[Word, ...] = ("forward", "ignore", "warn", "fail", "keep")

KINDS = (
    "add_column",
    "drop_column",
    "rename_column",
    "modify_column",
    "add_index",
    "drop_index",
    "create_table",
    "drop_table",
    "rename_table",
    "truncate_table",
    "truncate_partition",
    "drop_partition",
    "table_options",
)

_COMMON: tuple[Word, ...] = ("forward", "ignore", "warn", "fail")
# What each kind accepts. A DROP or RENAME TABLE takes the shard out of (or moves it in)
# its lock under `forward`, `ignore` and `warn` alike: shardmerge never drops or renames a
# downstream table, so `ignore` is what it does anyway. `fail` holds the shard until an
# operator takes the statement (Coordinator._hold_table).
ALLOWED: dict[str, tuple[Word, ...]] = {
    **{k: _COMMON for k in KINDS},
    "drop_column": ("forward", "ignore", "warn", "fail", "keep"),
}

# The strictest word decides a specification of several kinds (CHANGE renames and
# modifies), and a statement with one `fail` is held as a whole.
_RANK: dict[str, int] = {"forward": 0, "keep": 1, "ignore": 2, "warn": 3, "fail": 4}

_PARTITION = re.compile(r"\b(DROP|TRUNCATE)\s+PARTITION\b", re.IGNORECASE)


@dataclass(frozen=True)
class Policy:
    """A target's words per kind; a kind not named is ``forward``."""

    words: tuple[tuple[str, Word], ...] = ()

    @classmethod
    def of(cls, words: Mapping[str, Word] | None) -> Policy:
        return cls(tuple(sorted((k, w) for k, w in (words or {}).items() if w != "forward")))

    def word(self, kind: str) -> Word:
        for k, w in self.words:
            if k == kind:
                return w
        return "forward"

    def __bool__(self) -> bool:
        return bool(self.words)


@dataclass(frozen=True)
class PolicyNote:
    """A decision a policy other than ``forward`` took: kept for ``shardmerge locks``."""

    shard: str
    sql: str
    kind: str
    policy: str


def strictest(words: list[tuple[str, Word]]) -> tuple[str, Word]:
    """The (kind, word) that decides: the highest rank, the first of equals."""
    return max(words, key=lambda kw: _RANK[kw[1]])


def spec_kinds(spec: AlterSpec, schema: TableSchema) -> tuple[str, ...]:
    """The kinds of one ALTER specification, against the shard's schema before it."""
    match spec:
        case AddColumn():
            return ("add_column",)
        case DropColumn():
            return ("drop_column",)
        case ModifyColumn() | SetDefault():
            return ("modify_column",)
        case RenameColumn():
            return ("rename_column",)
        case ChangeColumn(old, column):
            if name_key(old) == column.key:
                return ("modify_column",)
            before = schema.column(old)
            if before is not None and before.renamed(column.name) == column:
                return ("rename_column",)
            return ("rename_column", "modify_column")
        case AddIndex() | AddPrimaryKey() | ForeignKeyIndex():
            return ("add_index",)
        case DropIndex() | DropPrimaryKey() | DropConstraint():
            return ("drop_index",)
        case RenameIndex():
            return ("drop_index", "add_index")
        case TableOptions():
            return ("table_options",)
    raise AssertionError(f"unclassified ALTER specification {spec!r}")


def partition_kind(sql: str) -> str | None:
    """``truncate_partition`` / ``drop_partition`` for such a statement (which the parser
    refuses: it deletes rows upstream without row events), else None."""
    m = _PARTITION.search(sql)
    return None if m is None else f"{m.group(1).lower()}_partition"


@dataclass(frozen=True)
class AlterVerdict:
    """What the policy makes of one ALTER TABLE on one shard.

    ``fail``: the (kind, word) that holds the statement, else None. ``change``: what is
    left to coordinate (None: nothing). ``project``: specifications were ignored, so the
    shard's rows may carry columns the downstream lacks. ``notes``: every (kind, word)
    other than ``forward`` that decided a specification, in order."""

    fail: tuple[str, Word] | None
    change: AlterTable | None
    project: bool
    notes: tuple[tuple[str, Word], ...]
    # The shard's columns left out of coordination by an `ignore`/`warn` ADD COLUMN (name
    # keys), after this statement.
    ignored: tuple[str, ...] = ()


def alter_verdict(
    policy: Policy, change: AlterTable, schema: TableSchema, ignored: tuple[str, ...] = ()
) -> AlterVerdict:
    """Apply ``policy`` to ``change`` on a shard whose schema is ``schema``.

    ``ignored``: the shard's columns an earlier ``ignore``/``warn`` ADD COLUMN left out of
    its coordination schema (name keys). A specification about such a column (modify,
    rename, drop, an index on it) is ignored too: the column does not exist downstream or
    in coordination, and the statement would not apply there. A column added after one
    of them goes to the end."""
    gone = set(ignored)
    decided: list[tuple[AlterSpec, tuple[str, Word]]] = []
    for spec in change.specs:
        kinds = spec_kinds(spec, schema)
        if gone & {name_key(n) for n in _columns_named(spec)}:
            decided.append((spec, (kinds[0], "ignore")))
            _follow(spec, gone)
            continue
        if (
            isinstance(spec, AddColumn)
            and spec.position
            and spec.position.after is not None
            and name_key(spec.position.after) in gone
        ):
            # a column added after an ignored one: appended (the other is not there)
            spec = AddColumn(spec.column, None, spec.if_exists)
        kw = strictest([(k, policy.word(k)) for k in kinds])
        if isinstance(spec, AddColumn) and kw[1] in ("ignore", "warn"):
            gone.add(spec.column.key)
        decided.append((spec, kw))
    left_out = tuple(sorted(gone))
    notes = tuple(kw for _, kw in decided if kw[1] != "forward")
    failing = [kw for kw in notes if kw[1] == "fail"]
    if failing:
        return AlterVerdict(failing[0], None, False, notes, ignored)
    if not notes:
        unchanged = all(a is b for a, (b, _) in zip(change.specs, decided, strict=True))
        same = (
            change
            if unchanged
            else dataclasses.replace(change, specs=tuple(spec for spec, _ in decided))
        )
        return AlterVerdict(None, same, False, (), left_out)
    specs: list[AlterSpec] = []
    project = False
    for spec, (_, word) in decided:
        if word == "forward":
            specs.append(spec)
        elif word == "keep":
            assert isinstance(spec, DropColumn)
            kept = _kept(spec, schema)
            if kept is not None:
                specs.append(kept)
        else:
            project = True
    left = dataclasses.replace(change, specs=tuple(specs)) if specs else None
    return AlterVerdict(None, left, project, notes, left_out)


def _columns_named(spec: AlterSpec) -> tuple[str, ...]:
    """The existing columns a specification acts on (not the one it adds)."""
    match spec:
        case ModifyColumn(column):
            return (column.name,)
        case SetDefault(name) | DropColumn(name):
            return (name,)
        case ChangeColumn(old) | RenameColumn(old):
            return (old,)
        case AddIndex(index):
            return index.columns
        case AddPrimaryKey(columns) | ForeignKeyIndex(_, columns):
            return columns
    return ()


def _follow(spec: AlterSpec, gone: set[str]) -> None:
    """An ignored column renamed or dropped upstream: follow it by its new name."""
    match spec:
        case ChangeColumn(old, column):
            gone.discard(name_key(old))
            gone.add(column.key)
        case RenameColumn(old, new):
            gone.discard(name_key(old))
            gone.add(name_key(new))
        case DropColumn(name):
            gone.discard(name_key(name))


def _kept(spec: DropColumn, schema: TableSchema) -> AlterSpec | None:
    """DROP COLUMN under ``keep``: the column stays; a NOT NULL one without default (the
    shard's later rows cannot fill it) becomes nullable, so that they write NULL."""
    column = schema.column(spec.name)
    if column is None or column.has_default:
        return None
    if column.key in {name_key(p) for p in schema.primary_key}:
        return None  # a key column cannot be NULL: rows lacking it are the engine's to refuse
    return ModifyColumn(dataclasses.replace(column, nullable=True, auto_increment=False))
