"""Internal: the plans for statements whose clauses sqlglot does not read.

``create_table`` rewrites a CREATE TABLE into what sqlglot reads (via
:mod:`schemas._sqlglot_clauses`) and ``alter_plan`` says, for one ALTER TABLE
specification, whether it is SQL for sqlglot, a clause without downstream meaning, table
options, a DROP CONSTRAINT, or refused (with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas import _sqlglot_clauses as clauses
from schemas._sqlglot_compat import split_commas, text_of, tokenize

__all__ = ["SpecPlan", "alter_plan", "create_table"]


def create_table(sql: str) -> tuple[str, clauses.Notes, bool] | None:
    """``CREATE [OR REPLACE] TABLE t (...) options`` as (SQL sqlglot reads, what was taken
    out, OR REPLACE given); None for other statements (LIKE, AS SELECT, TEMPORARY: the
    walk refuses those itself). Raises :class:`clauses.Refused`."""
    tokens = tokenize(sql)
    words = clauses.words(tokens)
    i = 1
    replace = words[1:3] == ["OR", "REPLACE"]
    if replace:
        i = 3
    if words[:1] != ["CREATE"] or words[i : i + 1] != ["TABLE"]:
        return None
    paren = next((j for j in range(i, len(tokens)) if words[j] == "("), None)
    if paren is None:
        return None
    end = clauses.group_end(tokens, paren)
    items = split_commas(tokens[paren + 1 : end - 1])
    tail = words[end:]
    if len(items) == 1 and clauses.words(items[0])[:1] == ["LIKE"] and not tail:
        # ``CREATE TABLE n (LIKE t)``: the same as without the parentheses.
        head = "CREATE " + text_of(sql, tokens[i:paren])
        return f"{head} {text_of(sql, items[0])}", clauses.Notes(), replace
    if (items and clauses.words(items[0])[:1] == ["LIKE"]) or {"SELECT", "AS", "LIKE"} & set(tail):
        return None
    notes = clauses.Notes()
    body = [clauses.clean_table_item(sql, item, notes) for item in items if item]
    options = clauses.clean_options(sql, tokens[end:], notes)
    head = "CREATE " + text_of(sql, tokens[i:paren])
    return f"{head} ({', '.join(b for b in body if b is not None)}) {options}", notes, replace


@dataclass(frozen=True)
class SpecPlan:
    """What to do with one ALTER TABLE specification.

    ``kind``: ``sql`` (``text`` is for sqlglot), ``ignore`` (no downstream meaning,
    recorded), ``options`` (``text`` holds the charset/collation options, maybe empty),
    ``drop_constraint`` (``text`` is the name: a UNIQUE key of that name is dropped, a
    FOREIGN KEY or CHECK of that name means nothing downstream). ``guard``: ``IF [NOT]
    EXISTS`` was given (MariaDB): the spec is skipped where it does not apply.
    """

    kind: str
    text: str
    guard: bool
    notes: clauses.Notes


_REFUSED_PARTITION = {
    "DROP": "deletes the rows of the dropped partitions upstream",
    "TRUNCATE": "deletes the rows of those partitions upstream",
    "EXCHANGE": "swaps the partition's rows with another table's",
    "CONVERT": "moves rows between the table and another table",
    "DISCARD": "removes the rows of the tablespace",
    "IMPORT": "brings rows in from a tablespace file",
}
_KEPT_PARTITION = {
    "ADD",
    "REORGANIZE",
    "COALESCE",
    "REBUILD",
    "OPTIMIZE",
    "ANALYZE",
    "CHECK",
    "REPAIR",
}
_LOCK_LIKE = {"ALGORITHM", "LOCK", "FORCE", "ENABLE", "DISABLE", "ORDER BY", "WITH", "WITHOUT"}


def alter_plan(sql: str, spec: str) -> SpecPlan:
    """The plan for one ALTER TABLE specification of statement ``sql``."""
    tokens = tokenize(spec)
    words = clauses.words(tokens)
    guard = False
    for i in range(min(len(words), 7)):  # ADD CONSTRAINT u UNIQUE KEY IF NOT EXISTS
        size = 3 if words[i : i + 3] == ["IF", "NOT", "EXISTS"] else 2
        if words[i : i + size] in (["IF", "NOT", "EXISTS"], ["IF", "EXISTS"]):
            guard = True
            tokens = [*tokens[:i], *tokens[i + size :]]
            words = [*words[:i], *words[i + size :]]
            spec = " ".join(text_of(spec, [t]) for t in tokens) if tokens else ""
            tokens = tokenize(spec)
            words = clauses.words(tokens)
            break
    notes = clauses.Notes()

    def plan(kind: str, text: str = spec) -> SpecPlan:
        if kind == "ignore":
            notes.ignored.append(spec)
        return SpecPlan(kind, text, guard, notes)

    first = words[0] if words else ""
    second = words[1] if len(words) > 1 else ""
    if (second in ("PARTITION", "TABLESPACE") or (first == "CONVERT" and second == "TABLE")) and (
        first in _REFUSED_PARTITION
    ):
        what = _REFUSED_PARTITION[first]
        raise clauses.Refused(
            f"{spec!r} {what}, with no row events: shardmerge cannot tell which rows "
            "change downstream. Skip it (the downstream keeps its rows) or replace it "
            "with the DELETEs/INSERTs it amounts to"
        )
    if (second == "PARTITION" and first in _KEPT_PARTITION) or first == "PARTITION BY":
        return plan("ignore")
    if words[:2] == ["REMOVE", "PARTITIONING"] or (first in _LOCK_LIKE and first != "WITH"):
        return plan("ignore")
    if words[:2] in (["WITH", "VALIDATION"], ["WITHOUT", "VALIDATION"]) or first in (
        "WAIT",
        "NOWAIT",
    ):
        return plan("ignore")
    if first == "STORAGE" and second in ("DISK", "MEMORY", "DEFAULT"):  # NDB's, alone
        return plan("ignore")
    if ("SYSTEM" in words[1:3] and "VERSIONING" in words[2:4]) or "SYSTEM_TIME" in words[:4]:
        raise clauses.Refused(clauses.VERSIONING)
    if first == "ADD":
        rest = words[1:]
        kind = rest[0] if rest else ""
        if kind == "CONSTRAINT":
            kind = (
                rest[1]
                if len(rest) > 1 and rest[1] in ("FOREIGN KEY", "CHECK")
                else (rest[2] if len(rest) > 2 else "")
            )
        if kind in ("FOREIGN KEY", "FOREIGN"):
            clauses.foreign_key(tokens[1:], notes)
        if kind in ("FOREIGN KEY", "FOREIGN", "CHECK", "PERIOD"):
            return plan("ignore")
        if kind in ("INDEX", "KEY", "UNIQUE", "PRIMARY KEY", "FULLTEXT", "SPATIAL", "CONSTRAINT"):
            return plan("sql", clauses.clean_index(spec, tokens, notes))
        names = 3 if words[1:2] == ["COLUMN"] else 2
        return plan("sql", clauses.clean_column(spec, tokens, names, notes))
    if first in ("MODIFY", "CHANGE"):
        names = (2 if first == "MODIFY" else 3) + (1 if second == "COLUMN" else 0)
        return plan("sql", clauses.clean_column(spec, tokens, names, notes))
    if first == "DROP":
        if second in ("FOREIGN KEY", "FOREIGN", "CHECK", "PERIOD"):
            return plan("ignore")
        if second == "CONSTRAINT":
            return plan("drop_constraint", tokens[-1].text)
    if first == "ALTER":
        if second in ("CHECK", "CONSTRAINT") or (
            second in ("INDEX", "KEY") and (words[-1] in ("VISIBLE", "INVISIBLE", "IGNORED"))
        ):
            return plan("ignore")
        if words[-2:] in (["SET", "VISIBLE"], ["SET", "INVISIBLE"]):
            return plan("ignore")
    if first in ("ENGINE", "AUTO_INCREMENT", "DEFAULT", "CHARACTER SET", "CHARSET", "COLLATE") or (
        second == "=" or first in ("COMMENT", "TABLESPACE", "UNION") or "STATS_" in first
    ):
        return plan("options", clauses.clean_options(spec, tokens, notes))
    return plan("sql")
