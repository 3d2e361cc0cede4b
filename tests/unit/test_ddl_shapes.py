"""An ALTER TABLE read once per shape (schemas.ddl.parse_ddl): the same statement on
every shard of a rollout, but for the table's name, is tokenized once, and reads exactly
as the statement itself does, errors included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.ddl import _alter_shape, _parsed, parse_ddl
from schemas.errors import DDLError
from schemas.model import TableName
from tests.unit import ddl_corpus as corpus


def _read(parse: object, sql: str) -> object:
    """What a parse gives: the changes (their repr: what equality leaves out, such as the
    clauses recorded without effect, counts too), or the error's class, statement and
    reason."""
    try:
        return repr(parse(sql))  # type: ignore[operator]
    except DDLError as e:
        return (type(e), e.statement, e.reason)


def _same_as_whole(sql: str) -> None:
    assert _read(parse_ddl, sql) == _read(_parsed, sql), sql


ALTERS = [
    s.sql
    for f in corpus.files()
    for s in corpus.statements(f)
    if s.in_scope and s.sql.lstrip()[:5].upper() == "ALTER"
]


def test_the_corpus_has_alters_the_shape_takes() -> None:
    taken = [sql for sql in ALTERS if _alter_shape(sql) is not None]
    assert len(ALTERS) > 100 and len(taken) > len(ALTERS) // 2


@pytest.mark.parametrize("sql", ALTERS)
def test_every_corpus_alter_reads_as_the_statement_itself(sql: str) -> None:
    _same_as_whole(sql)


TEMPLATES = [
    "ALTER TABLE {t} ADD COLUMN note VARCHAR(64)",
    "alter  online table {t}\n  CHANGE note memo VARCHAR(64) NOT NULL DEFAULT ''",
    "ALTER IGNORE TABLE {t} ADD UNIQUE KEY u (a)",  # an error: must name the real table
    "ALTER TABLE IF EXISTS {t} DROP COLUMN a, ADD COLUMN b INT AFTER c",
    "ALTER TABLE {t} RENAME TO {t}_new",  # a rename: never the shape's
    "ALTER TABLE {t} RENAME TO other, ADD COLUMN x INT",
    "ALTER TABLE {t} ADD COLUMN x FROBNICATE",  # cannot be read
    "ALTER TABLE {t} ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES {t} (id)",
    "ALTER TABLE {t} ADD COLUMN __shardmerge_shape_table__ INT",
    "ALTER TABLE {t}",
    "ALTER TABLE {t} ADD COLUMN `{t}` INT",
    "ALTER TABLE {t} /* c */ ADD COLUMN y INT -- end",
]
_PLAIN = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_QUOTED = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"),
    min_size=1,
    max_size=12,
).map(lambda name: "`" + name.replace("`", "``") + "`")
_NAMES = st.one_of(
    _PLAIN,
    _QUOTED,
    st.sampled_from(
        ["status", "select", "table", "orders_0", "ORDERS", "`select`", "`a``b'c;--`", "`a b`"]
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    template=st.sampled_from(TEMPLATES),
    db=st.one_of(st.none(), _NAMES),
    name=_NAMES,
)
def test_any_table_name_reads_as_the_statement_itself(
    template: str, db: str | None, name: str
) -> None:
    table = name if db is None else f"{db}.{name}"
    _same_as_whole(template.format(t=table))


def test_a_rollout_tokenizes_its_statement_once() -> None:
    statement = "ALTER TABLE `db_{i}`.`orders_{i}` ADD COLUMN rollout_once_{n} INT"
    before = _parsed.cache_info().misses
    changes = [parse_ddl(statement.format(i=i, n=7)) for i in range(500)]
    assert _parsed.cache_info().misses - before == 1
    assert [c[0].table for c in changes] == [
        TableName(f"orders_{i}", f"db_{i}") for i in range(500)
    ]


def test_an_error_names_the_shards_own_statement() -> None:
    sql = "ALTER TABLE orders_9 ADD COLUMN x FROBNICATE"
    with pytest.raises(DDLError) as info:
        parse_ddl(sql)
    assert info.value.statement == sql


def test_sqlglot_never_logs_a_shape(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="sqlglot"), pytest.raises(DDLError):
        parse_ddl("ALTER TABLE orders_3 FROBNICATE a_shape_logged")
    messages = [r.getMessage() for r in caplog.records]
    assert any("orders_3 FROBNICATE" in m for m in messages)
    assert not any("__shardmerge_shape_table__" in m for m in messages)
