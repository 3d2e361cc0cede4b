"""The DDL corpus under tests/fixtures/ddl-corpus: its files, split into statements.

Shared by the corpus unit test and ``scripts/capture-ddl-corpus`` (which runs the same
statements on a real MariaDB and records which ones the server accepts). Splitting
follows the mysql client: ``;`` ends a statement outside quotes and comments,
``DELIMITER x`` changes the terminator, ``--``/``#`` comments run to the end of the line
and plain ``/* */`` comments are dropped, while MySQL's executable comments
(``/*! ... */``, ``/*M! ... */``) stay part of the statement, as the server reads them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "ddl-corpus"
VERDICTS = CORPUS / "server-verdicts.json"
CAPTURED = "captured"  # the sub-directory of SHOW CREATE TABLE outputs

# The statements the coordinator reads (schemas.ddl.parse_ddl); everything else in a
# schema file (INSERT, SET, views, triggers, routines) is counted as out of scope.
_IN_SCOPE = re.compile(
    r"""^(
        CREATE\s+(OR\s+REPLACE\s+)?(TEMPORARY\s+)?TABLE\b
      | CREATE\s+(OR\s+REPLACE\s+)?(ONLINE\s+|OFFLINE\s+)?(UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\b
      | CREATE\s+(DATABASE|SCHEMA)\b
      | ALTER\s+(ONLINE\s+)?(IGNORE\s+)?TABLE\b
      | DROP\s+(TEMPORARY\s+)?TABLES?\b
      | DROP\s+(ONLINE\s+)?INDEX\b
      | DROP\s+(DATABASE|SCHEMA)\b
      | RENAME\s+TABLES?\b
      | TRUNCATE\b
    )""",
    re.IGNORECASE | re.VERBOSE,
)


@dataclass(frozen=True)
class Statement:
    file: str  # relative to CORPUS
    n: int  # 1-based index among the file's statements
    sql: str

    @property
    def digest(self) -> str:
        return hashlib.sha1(self.sql.encode()).hexdigest()[:12]

    @property
    def in_scope(self) -> bool:
        return bool(_IN_SCOPE.match(self.sql))


def source_of(file: str) -> str:
    """The source a corpus file belongs to: its first directory."""
    return file.split("/", 1)[0]


def files() -> list[str]:
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.sql") if p.is_file())


def statements(file: str) -> list[Statement]:
    text = (CORPUS / file).read_text(encoding="utf-8")
    return [Statement(file, i, s) for i, s in enumerate(split(text), start=1)]


def verdicts() -> dict[str, dict[str, object]]:
    """``{"file#n": {"digest": ..., "ok": bool, "error": str}}`` from the capture run."""
    if not VERDICTS.exists():
        return {}
    data = json.loads(VERDICTS.read_text(encoding="utf-8"))
    return dict(data["statements"])


def split(text: str) -> list[str]:
    """The statements of a SQL script, stripped, comments outside them dropped."""
    out: list[str] = []
    buf: list[str] = []
    delimiter = ";"
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        if at_line_start:
            m = re.match(r"[ \t]*DELIMITER[ \t]+(\S+)[ \t]*(\r?\n|$)", text[i:], re.IGNORECASE)
            if m and not "".join(buf).strip():
                delimiter = m.group(1)
                i += m.end()
                continue
        c = text[i]
        at_line_start = False
        if text.startswith(delimiter, i):
            _flush(buf, out)
            i += len(delimiter)
            continue
        if c in "'\"`":
            end = _quoted_end(text, i)
            buf.append(text[i:end])
            i = end
        elif text.startswith("/*!", i) or text.startswith("/*M!", i):
            end = text.find("*/", i)
            end = n if end < 0 else end + 2
            buf.append(text[i:end])
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i)
            i = n if end < 0 else end + 2
            buf.append(" ")
        elif c == "#" or (
            text.startswith("--", i) and text[i + 2 : i + 3] in (" ", "\t", "\n", "\r", "")
        ):
            end = text.find("\n", i)
            i = n if end < 0 else end
        else:
            buf.append(c)
            if c == "\n":
                at_line_start = True
            i += 1
    _flush(buf, out)
    return out


def _flush(buf: list[str], out: list[str]) -> None:
    sql = "".join(buf).strip()
    buf.clear()
    if sql:
        out.append(sql)


def _quoted_end(text: str, start: int) -> int:
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\" and quote != "`":
            i += 2
            continue
        if text[i] == quote:
            if text[i + 1 : i + 2] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return len(text)


@dataclass
class Coverage:
    """Parse results of one source's in-scope statements against the server's verdicts."""

    source: str
    statements: int = 0
    server_accepted: int = 0  # accepted, or refused only for want of context
    server_refused: int = 0
    unchecked: int = 0  # no verdict recorded (file added after the last capture)
    parsed: int = 0
    accepted_parsed: int = 0
    refusals: list[tuple[Statement, str]] = field(default_factory=list)  # ours, with reason


def label(file: str) -> str:
    """The row of the coverage table a file counts in."""
    source = source_of(file)
    return f"{source} (SHOW CREATE TABLE)" if f"/{CAPTURED}/" in file else source


def table(rows: list[Coverage]) -> str:
    """The coverage table of docs/ddl-coverage.md."""
    lines = [
        "| source | statements | server accepts | parsed | parsed of server-accepted |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        share = f"{100 * r.accepted_parsed / r.server_accepted:.1f}%" if r.server_accepted else "-"
        lines.append(
            f"| {r.source} | {r.statements} | {r.server_accepted} | {r.parsed} | "
            f"{r.accepted_parsed}/{r.server_accepted} ({share}) |"
        )
    return "\n".join(lines)
