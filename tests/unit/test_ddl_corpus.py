"""Every statement of the real-DDL corpus (tests/fixtures/ddl-corpus) against the parser.

The corpus is public DDL shardmerge's authors did not write (see its README for
provenance and licences), plus the SHOW CREATE TABLE a real MariaDB prints for it. The
server's verdict on each statement was recorded by ``scripts/capture-ddl-corpus``; here
no server is needed. Every statement the server accepts must parse, except the ones
listed in ``REFUSED`` with the reason shardmerge refuses them on purpose.
docs/ddl-coverage.md carries the coverage table this test computes (``python
tests/unit/test_ddl_corpus.py`` prints it).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import ddl_corpus as corpus
import pytest

from schemas.ddl import parse_ddl
from schemas.errors import DDLError

DOC = Path(__file__).resolve().parents[2] / "docs" / "ddl-coverage.md"

# Statements the server accepts that shardmerge refuses on purpose: "file#n" -> a part
# of the reason it gives. (None in the corpus today; DROP/TRUNCATE PARTITION and system
# versioning would go here.)
REFUSED: dict[str, str] = {}


@cache
def coverage() -> tuple[corpus.Coverage, ...]:
    verdicts = corpus.verdicts()
    rows: dict[str, corpus.Coverage] = {}
    for file in corpus.files():
        row = rows.setdefault(corpus.label(file), corpus.Coverage(corpus.label(file)))
        for st in corpus.statements(file):
            if not st.in_scope:
                continue
            row.statements += 1
            verdict = verdicts.get(f"{file}#{st.n}")
            accepted = None
            if verdict is None or verdict["digest"] != st.digest:
                row.unchecked += 1
            else:
                accepted = verdict["verdict"] != "refused"
                row.server_accepted += accepted
                row.server_refused += not accepted
            try:
                parse_ddl(st.sql)
            except DDLError as exc:
                row.refusals.append((st, exc.reason))
                continue
            row.parsed += 1
            row.accepted_parsed += bool(accepted)
    return tuple(rows[k] for k in sorted(rows))


def test_the_corpus_is_not_empty_and_every_source_has_a_licence() -> None:
    readme = (corpus.CORPUS / "README.md").read_text(encoding="utf-8")
    sources = {corpus.source_of(f) for f in corpus.files()}
    assert len(sources) >= 3
    for source in sources:
        assert f"`{source}/`" in readme, f"{source} has no provenance in the README"
    assert sum(r.statements for r in coverage()) >= 300


def test_every_statement_has_the_servers_verdict() -> None:
    """The verdicts were captured from this very corpus (rerun the capture after edits)."""
    stale = {r.source: r.unchecked for r in coverage() if r.unchecked}
    assert not stale, f"run scripts/capture-ddl-corpus: statements without a verdict: {stale}"


def test_every_statement_the_server_accepts_parses() -> None:
    verdicts = corpus.verdicts()
    unexpected = []
    for row in coverage():
        for st, reason in row.refusals:
            key = f"{st.file}#{st.n}"
            if verdicts.get(key, {}).get("verdict") == "refused":
                continue
            if key in REFUSED and REFUSED[key] in reason:
                continue
            unexpected.append(f"{key}: {reason}\n    {st.sql[:200]}")
    assert not unexpected, "\n".join(unexpected)


@pytest.mark.parametrize("file", [f for f in corpus.files() if f"/{corpus.CAPTURED}/" in f])
def test_show_create_table_output_parses_to_a_create_table(file: str) -> None:
    """What a snapshot carries: each captured statement is one CREATE TABLE with columns."""
    for st in corpus.statements(file):
        (change,) = parse_ddl(st.sql)
        assert type(change).__name__ == "CreateTable", st.sql[:80]
        assert change.schema.columns  # type: ignore[union-attr]


def test_docs_report_this_coverage() -> None:
    assert corpus.table(list(coverage())) in DOC.read_text(encoding="utf-8"), (
        "docs/ddl-coverage.md is out of date: paste the table `python tests/unit/test_ddl_corpus.py` "
        "prints"
    )


if __name__ == "__main__":
    print(corpus.table(list(coverage())))
