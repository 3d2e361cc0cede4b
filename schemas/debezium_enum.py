"""ENUM and SET members as Debezium's MySQL and MariaDB connectors name them, and back.

Debezium (3.5.0 and 3.6.1 checked; ``MySqlAntlrDdlParser.escapeOption``, the same in the
MariaDB connector) keeps a member as its literal's text with the quotes taken off and
only some of MySQL's escapes undone: a comma becomes ``\\,``, then ``\\'`` and ``''``
become ``'``. A backslash escape stays as written, so the member ``c\\d`` (DDL
``'c\\\\d'``) is ``c\\\\d`` to Debezium, and ``nl<newline>z`` (``'nl\\nz'``) is
``nl\\nz``. A binlog row holds an ENUM's index (a SET's bitmap), which Debezium names by
that list: such values arrive mis-escaped. A snapshot row is read over JDBC and holds the
member itself (``BinlogValueConverters.convertEnumToString``: a ``String`` is delivered
as it is, an ``Integer`` index through the parsed list). Debezium 3.7 no longer escapes
commas in the member but still leaves backslash escapes as written (dbz#2102).

What Debezium makes of a member depends on how the DDL it parsed spells it. The forms
here are those of the two spellings met in practice:

- MariaDB's and MySQL's own (``SHOW CREATE TABLE``, which Debezium's snapshot parses):
  ``\\0``, ``\\n``, ``\\r``, ``\\\\``, and ``''`` for a quote; every other character as it is;
- a client library's escaping (``mysql_real_escape_string``, which tools use to write
  DDL): the same but ``\\'`` for a quote, ``\\"`` for a double quote and ``\\Z`` for
  Ctrl-Z.

:func:`value_map` gives, for a column's members, each form that differs from its member
(the ``SHOW CREATE TABLE`` spelling first; a client-escaped form only where no other
member claims it). The job maps a binlog row's value through it
(``streaming.sql.spark_types.debezium_member_expr``). Any other spelling of a member in a DDL
statement (``\\t``, ``\\%``, a double-quoted literal with ``""``) is not known here: such
a member's value stays as Debezium sent it until the table's next snapshot.

The Connect schema's ``allowed`` parameter (``schemas.enable``) lists Debezium's members
joined by commas (3.5 and 3.6): :func:`to_allowed` and :func:`from_allowed`.
"""

from __future__ import annotations

__all__ = ["debezium_forms", "debezium_member", "from_allowed", "to_allowed", "value_map"]

# MariaDB's append_unescaped (sql/sql_show.cc): what SHOW CREATE TABLE escapes.
_SHOW_CREATE = {"\0": "\\0", "\n": "\\n", "\r": "\\r", "\\": "\\\\", "'": "''"}
# mysql_real_escape_string: what a client library escapes.
_CLIENT = {"\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z", "\\": "\\\\", "'": "\\'"}
_CLIENT['"'] = '\\"'
# The escapes of a SHOW CREATE TABLE spelling that Debezium leaves in a member.
_UNESCAPE = {"0": "\0", "n": "\n", "r": "\r", "\\": "\\"}


def _spelled(member: str, escapes: dict[str, str]) -> str:
    return "".join(escapes.get(ch, ch) for ch in member)


def _parsed(body: str, commas: bool) -> str:
    """What Debezium keeps of a literal's ``body`` (its text between the quotes):
    ``escapeOption``, ``option.replaceAll(",", "\\\\,").replaceAll("\\\\'", "'")
    .replace("''", "'")``; ``commas`` False is 3.7's, without the first step. Both
    replacements go left to right without overlapping, as ``str.replace`` does."""
    if commas:
        body = body.replace(",", "\\,")
    return body.replace("\\'", "'").replace("''", "'")


def debezium_member(member: str, commas: bool = True) -> str:
    """Debezium's name of ``member`` after parsing ``SHOW CREATE TABLE`` (a snapshot's
    DDL): the value a binlog row of that member carries. ``commas``: 3.5/3.6 (True) or
    3.7 (False)."""
    return _parsed(_spelled(member, _SHOW_CREATE), commas)


def debezium_forms(member: str) -> tuple[str, ...]:
    """Every value a binlog row holding ``member`` may carry: the ``SHOW CREATE TABLE``
    spelling's forms first, then a client-escaped DDL's; with and without escaped
    commas (Debezium before and from 3.7). Without duplicates, in that order."""
    out: list[str] = []
    for escapes in (_SHOW_CREATE, _CLIENT):
        for commas in (True, False):
            form = _parsed(_spelled(member, escapes), commas)
            if form not in out:
                out.append(form)
    return tuple(out)


def value_map(members: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Debezium's value -> the member, for each form that differs from its member.

    Empty when no member has a backslash, a quote, a comma or a control character
    Debezium keeps escaped: then every value is its member and nothing needs mapping.
    The ``SHOW CREATE TABLE`` forms of distinct members never coincide (the rule
    above undoes them: :func:`from_allowed`); a client-escaped form that is another
    member's ``SHOW CREATE TABLE`` form, or that two members share (``\\'\\'`` and
    ``\\'`` both become ``'``), is left out: Debezium itself no longer tells them apart.
    """
    first: dict[str, str] = {}
    for m in members:
        for commas in (True, False):
            first.setdefault(debezium_member(m, commas), m)
    second: dict[str, set[str]] = {}
    for m in members:
        for form in debezium_forms(m):
            if form not in first:
                second.setdefault(form, set()).add(m)
    out = {form: m for form, m in first.items() if form != m}
    out.update({form: ms.pop() for form, ms in second.items() if len(ms) == 1})
    return out


def to_allowed(members: tuple[str, ...] | list[str]) -> str:
    """The ``allowed`` parameter Debezium 3.5/3.6 write for a column with ``members``
    (its members after a snapshot, joined by commas; a comma inside one is ``\\,``)."""
    return ",".join(debezium_member(m) for m in members)


def from_allowed(allowed: str) -> tuple[str, ...]:
    """The members an ``allowed`` parameter of Debezium 3.5/3.6 names (the inverse of
    :func:`to_allowed`). Split at the commas outside an escape (``\\,`` is a comma of the
    member, as Debezium's ``EnumeratedValues.fromCommaSeparatedString`` reads it), then
    each member's escapes undone: ``\\\\``, ``\\0``, ``\\n``, ``\\r`` are the character;
    any other backslash stays (``\\'`` is a backslash and a quote: ``''`` after ``\\\\``
    became ``'``). Empty text names no member."""
    if not allowed:
        return ()
    members: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(allowed):
        ch = allowed[i]
        nxt = allowed[i + 1] if i + 1 < len(allowed) else ""
        if ch == "\\" and nxt:
            cur.append("," if nxt == "," else _UNESCAPE.get(nxt, ch + nxt))
            i += 2
        elif ch == ",":
            members.append("".join(cur))
            cur = []
            i += 1
        else:
            cur.append(ch)
            i += 1
    members.append("".join(cur))
    return tuple(members)
