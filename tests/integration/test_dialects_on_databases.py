"""The DDL schemas.dialects renders runs on real databases (a local MariaDB and PostgreSQL,
devkit.downstream_local) and makes the table it says: hostile names and values, a key,
a rename, a drop, a widening that keeps the rows, and nothing left to do afterwards."""

from __future__ import annotations

import base64
import json

import pymysql
import pytest
from sqlglot import exp

from devkit import downstream_local
from schemas.ddl import parse_ddl
from schemas.dialects import (
    alter_statements,
    column_def,
    column_type,
    create_table,
    sqlglot_dialect,
)
from schemas.model import Column, ColumnType, TableSchema

pytestmark = pytest.mark.timeout(300)

HOSTILE = "a`b'c;--\""
DB = "sh'op`\""


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def schema_of(sql: str) -> TableSchema:
    (create,) = parse_ddl(sql)
    return create.schema


ORDERS = schema_of(
    f"CREATE TABLE o (id BIGINT UNSIGNED NOT NULL, {_q(HOSTILE)} VARCHAR(10) DEFAULT 'it''s \\\\ x', "
    "n INT NOT NULL DEFAULT 0, d DECIMAL(10,2) DEFAULT -1.5, "
    "ts TIMESTAMP(3) NULL DEFAULT CURRENT_TIMESTAMP(3), e ENUM('a','b') DEFAULT 'a', "
    "f DOUBLE, y YEAR, b BLOB, t TIME, u TINYINT UNSIGNED, PRIMARY KEY (id))"
)
BEFORE = schema_of(
    "CREATE TABLE t (id INT NOT NULL, old INT, gone INT, s SMALLINT, PRIMARY KEY (id))"
)
(ALTER,) = parse_ddl(
    f"ALTER TABLE t RENAME COLUMN old TO {_q(HOSTILE)}, DROP COLUMN gone, MODIFY s BIGINT, "
    "ADD COLUMN w VARCHAR(3) DEFAULT 'q''\\\\'"
)
AFTER = schema_of(
    f"CREATE TABLE t (id INT NOT NULL, {_q(HOSTILE)} INT, s BIGINT, w VARCHAR(3) DEFAULT 'q''\\\\', "
    "PRIMARY KEY (id))"
)


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory):
    with downstream_local.mariadb(tmp_path_factory.mktemp("downstream-mariadb")) as server:
        server.execute(f"CREATE DATABASE {_q(DB)}")
        yield server


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    with downstream_local.postgresql(tmp_path_factory.mktemp("downstream-pg")) as server:
        server.execute('CREATE SCHEMA "' + DB.replace('"', '""') + '"')
        yield server


def _mariadb_columns(server, table: str) -> dict[str, tuple[ColumnType, str, str]]:
    rows = server.execute(
        "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY FROM information_schema.COLUMNS "
        f"WHERE TABLE_SCHEMA = {json.dumps(DB)} AND TABLE_NAME = {json.dumps(table)} "
        "ORDER BY ORDINAL_POSITION"
    )
    return {
        name: (schema_of(f"CREATE TABLE x (c {ctype})").columns[0].type, nullable, key)
        for name, ctype, nullable, key in rows
    }


def test_mariadb_makes_the_table_it_is_told(mariadb):
    mariadb.execute(create_table("mariadb", DB, HOSTILE, ORDERS, ["id"]))
    columns = _mariadb_columns(mariadb, HOSTILE)
    assert list(columns) == [c.name for c in ORDERS.columns]
    for c in ORDERS.columns:
        have, nullable, key = columns[c.name]
        # the shard's own type (JSON would read back as MariaDB's LONGTEXT alias)
        assert have.type_sql() == c.type.type_sql(), c.name
        assert (nullable, key) == (("NO", "PRI") if c.name == "id" else ("YES", ""))
    # a row without the defaulted columns gets the shard's defaults, quotes and all
    mariadb.execute(f"INSERT INTO {_q(DB)}.{_q(HOSTILE)} (id) VALUES (1)")
    (row,) = mariadb.execute(f"SELECT {_q(HOSTILE)}, n, d, e FROM {_q(DB)}.{_q(HOSTILE)}")
    assert row[0] == "it's \\ x" and row[1] == 0 and str(row[2]) == "-1.50" and row[3] == "a"


def test_mysql8_collations_and_mariadb_own_types_make_a_mariadb_table(mariadb):
    """MySQL 8's UCA 9.0.0 collations (its default ``utf8mb4_0900_ai_ci``, every tailoring
    MariaDB has a counterpart of, one it has not, ``_bin``) make a MariaDB table; its key
    compares as MySQL 8's does: without accents or case, and trailing spaces count (NO
    PAD), so keys one shard holds apart stay apart downstream."""
    from schemas.dialects import _MARIADB_TAILORING

    locales = [*_MARIADB_TAILORING, "ja"]
    names = [f"utf8mb4_{loc}_0900_ai_ci" for loc in locales]
    names += ["utf8mb4_0900_as_ci", "utf8mb4_0900_as_cs", "utf8mb4_0900_bin"]
    columns = ", ".join(f"c{i} VARCHAR(5) COLLATE {n}" for i, n in enumerate(names))
    schema = schema_of(
        f"CREATE TABLE m8 (k VARCHAR(10) NOT NULL, {columns}, PRIMARY KEY (k)) "
        "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
    )
    mariadb.execute(create_table("mariadb", DB, "m8", schema, ["k"]))
    got = dict(
        mariadb.execute(
            "SELECT COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
            f"WHERE TABLE_SCHEMA = {json.dumps(DB)} AND TABLE_NAME = 'm8'"
        )
    )
    assert got["k"] == "utf8mb4_uca1400_nopad_ai_ci"
    assert got["c1"] == "utf8mb4_uca1400_danish_nopad_ai_ci"
    assert got[f"c{len(locales) - 1}"] == "utf8mb4_uca1400_nopad_ai_ci"  # ja: the root's
    assert got[f"c{len(names) - 1}"] == "utf8mb4_nopad_bin"
    # MariaDB's own address types (a MariaDB shard's), kept, take the text the job keeps
    inet = schema_of("CREATE TABLE a (id INT NOT NULL, i6 INET6, i4 INET4, PRIMARY KEY (id))")
    mariadb.execute(create_table("mariadb", DB, "addresses", inet, ["id"]))
    mariadb.execute(f"INSERT INTO {_q(DB)}.addresses VALUES (1, '::ffff:1.2.3.4', '10.0.0.1')")
    assert mariadb.execute(
        f"SELECT CAST(i6 AS CHAR), CAST(i4 AS CHAR) FROM {_q(DB)}.addresses"
    ) == [("::ffff:1.2.3.4", "10.0.0.1")]
    table = f"{_q(DB)}.m8"
    mariadb.execute(f"INSERT INTO {table} (k) VALUES ('a'), ('a ')")  # apart under NO PAD
    with pytest.raises(pymysql.err.IntegrityError, match="Duplicate entry"):
        mariadb.execute(f"INSERT INTO {table} (k) VALUES ('Á')")  # 'a' without accents or case
    assert len(mariadb.execute(f"SELECT k FROM {table}")) == 2


def test_mariadb_turns_an_enum_into_the_varchar_of_its_members(mariadb):
    """gh-ost's ``change e e varchar(32)`` of an ENUM: the dialect lets it through (the
    longest member fits) and MariaDB keeps each row's member as its text."""
    (before,) = parse_ddl(
        "CREATE TABLE e (id INT NOT NULL, e ENUM('red','green','orange'), PRIMARY KEY (id))"
    )
    (change,) = parse_ddl("ALTER TABLE e CHANGE e e VARCHAR(32) NOT NULL DEFAULT ''")
    after = schema_of("CREATE TABLE e (id INT NOT NULL, e VARCHAR(32) NOT NULL DEFAULT '', "
                      "PRIMARY KEY (id))")  # fmt: skip
    mariadb.execute(create_table("mariadb", DB, "enums", before.schema, ["id"]))
    mariadb.execute(f"INSERT INTO {_q(DB)}.enums VALUES (1, 'orange'), (2, 'red')")
    existing = {c.key: c.type for c in before.schema.columns}
    for sql in alter_statements("mariadb", DB, "enums", existing, change.specs, after):
        mariadb.execute(sql)
    rows = mariadb.execute(f"SELECT id, e FROM {_q(DB)}.enums ORDER BY id")
    assert rows == [(1, "orange"), (2, "red")]
    assert _mariadb_columns(mariadb, "enums")["e"][0].type_sql() == "VARCHAR(32)"


def test_postgresql_keeps_the_names_the_dialect_lets_through_and_cuts_longer_ones(postgres):
    """The limit :func:`schemas.dialects.name_fits` holds PostgreSQL to: a name of 63 bytes
    (21 three-byte characters) is kept whole; one of 64 is cut, silently but for a
    notice, which is why the dialect refuses it."""
    from schemas.dialects import PG_NAME_BYTES

    kept, cut = "列" * (PG_NAME_BYTES // 3), "c" * (PG_NAME_BYTES + 1)
    schema = schema_of(f"CREATE TABLE n (id INT NOT NULL, {kept} INT, PRIMARY KEY (id))")
    postgres.execute(create_table("postgresql", DB, "names", schema, ["id"]))
    assert list(_pg_columns(postgres, "names")) == ["id", kept]
    pg_schema = '"' + DB.replace('"', '""') + '"'
    postgres.execute(f'ALTER TABLE {pg_schema}."names" ADD COLUMN "{cut}" INT')
    assert list(_pg_columns(postgres, "names"))[-1] == cut[:PG_NAME_BYTES]


def test_mariadb_alters_once_keeps_rows_and_has_nothing_left(mariadb):
    mariadb.execute(create_table("mariadb", DB, "t", BEFORE, ["id"]))
    mariadb.execute(f"INSERT INTO {_q(DB)}.t VALUES (1, 7, 8, 32767)")
    existing = {k.lower(): v[0] for k, v in _mariadb_columns(mariadb, "t").items()}
    statements = alter_statements("mariadb", DB, "t", existing, ALTER.specs, AFTER)
    assert len(statements) == 4
    for sql in statements:
        mariadb.execute(sql)
    columns = _mariadb_columns(mariadb, "t")
    assert list(columns) == ["id", HOSTILE, "s", "w"]
    (row,) = mariadb.execute(f"SELECT id, {_q(HOSTILE)}, s, w FROM {_q(DB)}.t")
    assert row == (1, 7, 32767, "q'\\")
    mariadb.execute(f"UPDATE {_q(DB)}.t SET s = 9223372036854775807")  # BIGINT now
    # run again (a batch re-run after its DDL committed): nothing to do
    existing = {k.lower(): v[0] for k, v in columns.items()}
    assert alter_statements("mariadb", DB, "t", existing, ALTER.specs, AFTER) == []


def _pg_columns(server, table: str) -> dict[str, tuple[str, bool]]:
    out = server.execute(
        "SELECT json_agg(json_build_array(attname, format_type(atttypid, atttypmod), "
        "attnotnull) ORDER BY attnum) FROM pg_attribute WHERE attrelid = "
        f"(quote_ident({_pg_literal(DB)}) || '.' || quote_ident({_pg_literal(table)}))::regclass "
        "AND attnum > 0 AND NOT attisdropped"
    )
    return {name: (ptype, notnull) for name, ptype, notnull in json.loads(out)}


def _pg_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _pg(t: ColumnType) -> str:
    return column_type(t, "postgresql").sql("postgres")


def test_postgresql_makes_the_table_it_is_told(postgres):
    postgres.execute(create_table("postgresql", DB, HOSTILE, ORDERS, ["id"]))
    columns = _pg_columns(postgres, HOSTILE)
    assert list(columns) == [c.name for c in ORDERS.columns]
    for c in ORDERS.columns:
        ptype, notnull = columns[c.name]
        assert exp.DataType.build(ptype, dialect="postgres").sql("postgres") == _pg(c.type), c.name
        assert notnull == (c.name == "id")
    table = '"' + DB.replace('"', '""') + '"."' + HOSTILE.replace('"', '""') + '"'
    postgres.execute(f"INSERT INTO {table} (id) VALUES (18446744073709551615)")
    got = postgres.execute(
        f'SELECT json_build_array(id::text, "{HOSTILE.replace(chr(34), chr(34) * 2)}", n, e) '
        f"FROM {table}"
    )
    assert json.loads(got) == ["18446744073709551615", "it's \\ x", 0, "a"]


def test_postgresql_alters_once_and_keeps_rows(postgres):
    table = '"' + DB.replace('"', '""') + '"."t"'
    postgres.execute(create_table("postgresql", DB, "t", BEFORE, ["id"]))
    postgres.execute(f"INSERT INTO {table} VALUES (1, 7, 8, 32767)")
    existing = {c.key: c.type for c in BEFORE.columns}
    statements = alter_statements("postgresql", DB, "t", existing, ALTER.specs, AFTER)
    for sql in statements:
        postgres.execute(sql)
    columns = _pg_columns(postgres, "t")
    assert list(columns) == ["id", HOSTILE, "s", "w"]
    assert columns["s"][0] == "bigint"
    got = postgres.execute(f"SELECT json_build_array(id, s, w) FROM {table}")
    assert json.loads(got) == [1, 32767, "q'\\"]


def test_a_narrowing_is_checked_row_by_row_by_each_database(mariadb, postgres):
    before = schema_of("CREATE TABLE n (id INT NOT NULL, a VARCHAR(20), PRIMARY KEY (id))")
    (narrow,) = parse_ddl("ALTER TABLE n MODIFY a VARCHAR(5)")
    after = schema_of("CREATE TABLE n (id INT NOT NULL, a VARCHAR(5), PRIMARY KEY (id))")
    existing = {c.key: c.type for c in before.columns}
    m = alter_statements("mariadb", DB, "n", existing, narrow.specs, after)
    p = alter_statements("postgresql", DB, "n", existing, narrow.specs, after)
    mariadb.execute(create_table("mariadb", DB, "n", before, ["id"]))
    mariadb.execute(f"INSERT INTO {_q(DB)}.n VALUES (1, 'much too long')")
    postgres.execute(create_table("postgresql", DB, "n", before, ["id"]))
    table = '"' + DB.replace('"', '""') + '"."n"'
    postgres.execute(f"INSERT INTO {table} VALUES (1, 'much too long')")
    # MariaDB in the strict mode the sink's connections set, PostgreSQL as it is
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
        with pytest.raises(pymysql.err.MySQLError, match=r"(?i)data too long|truncated"):
            cur.execute(m[0])
    with pytest.raises(downstream_local.DownstreamError, match="too long"):
        postgres.execute(p[0])
    # the rows are as they were
    assert mariadb.execute(f"SELECT a FROM {_q(DB)}.n") == [("much too long",)]
    assert postgres.execute(f"SELECT a FROM {table}").strip() == "much too long"


def test_each_database_stores_unchanged_exactly_the_values_its_limit_admits(mariadb, postgres):
    """schemas.storage.limit against the databases: a value inside the column's Delta
    domain is admitted exactly when the database stores it as it is (a value either
    refuses, or would store changed, is a dead letter; the job never fails on it)."""
    from schemas.ddl import parse_type
    from schemas.storage import limit
    from tests.unit.test_storage import LIMIT_CASES

    def micros(text: str) -> int:  # a TIME's value: a count, or [-]h:mm:ss[.f]
        if text.lstrip("-").isdigit():
            return int(text)
        sign, rest = (-1, text[1:]) if text.startswith("-") else (1, text)
        h, m, sec = rest.split(":")
        whole, _, frac = sec.partition(".")
        return sign * ((int(h) * 3600 + int(m) * 60 + int(whole)) * 10**6 + int(frac.ljust(6, "0")))

    def bits(text: str) -> tuple[int, str]:  # a BIT's number, and its bytes as the job keeps them
        if text in ("true", "false"):
            return int(text == "true"), "0" + str(int(text == "true"))
        raw = base64.b64decode(text)
        return int.from_bytes(raw, "little"), raw[::-1].hex()

    def literal(t: ColumnType, text: str, dialect: str) -> str:  # the converted value
        if t.base == "BIT":  # as the sink stages it (jdbc_sink._staged_bit)
            number, hexed = bits(text)
            if dialect == "mariadb":
                return str(number)
            if (t.length or 1) == 1:
                return "true" if number else "false"
            return f"decode('{hexed}', 'hex')"
        if t.base == "TIME" and text.lstrip("-").isdigit() and len(text.lstrip("-")) <= 18:
            # a count, staged as [-]h:mm:ss.ffffff (streaming.storage.jdbc_sink)
            us = abs(int(text))
            sign = "-" if text.startswith("-") else ""
            clock = f"{us // 3600_000000}:{us // 60_000000 % 60:02d}:{us // 10**6 % 60:02d}"
            return f"'{sign}{clock}.{us % 10**6:06d}'"
        if t.base in INTEGERS:
            return text.split(".")[0]
        if t.base in BYTES:  # the bytes the base64 text holds, as the sink binds them
            hexed = base64.b64decode(text).hex()
            return f"X'{hexed}'" if dialect == "mariadb" else f"decode('{hexed}', 'hex')"
        if dialect == "mariadb":  # backslash escapes: on in the session's sql_mode
            return "'" + text.replace("\\", "\\\\").replace("\x00", "\\0").replace("'", "''") + "'"
        if "\x00" in text:  # an escape string: psql's command line holds no NUL
            escaped = text.replace("\\", "\\\\").replace("'", "''").replace("\x00", "\\000")
            return "E'" + escaped + "'"
        return "'" + text.replace("'", "''") + "'"

    def back(t: ColumnType, text: str, dialect: str) -> str:  # the value as read back
        if t.base == "BIT":
            number, hexed = bits(text)
            return hexed if dialect != "mariadb" and (t.length or 1) > 1 else str(number)
        if t.base == "TIME":  # as the sink reads it: its count of microseconds
            return str(micros(text))
        if t.base in BYTES:
            return base64.b64decode(text).hex()
        return text.split(".")[0] if t.base in INTEGERS else same(t, text)

    def same(t: ColumnType, value: str) -> str:  # a SET is a set: its order is the column's
        return ",".join(sorted(set(value.split(",")) - {""})) if t.base == "SET" else value

    def read(t: ColumnType, i: int, dialect: str) -> str:  # the column's select expression
        if t.base == "BIT":  # as JdbcSink.read reads it, before making it bytes again
            if dialect == "mariadb":
                return f"CAST(c{i} AS UNSIGNED)"
            return (
                f"CASE WHEN c{i} THEN 1 ELSE 0 END"
                if (t.length or 1) == 1
                else (f"encode(c{i}, 'hex')")
            )
        if t.base == "TIME":  # its count of microseconds, as JdbcSink.read gives it
            if dialect == "mariadb":
                return f"CAST(CAST(TIME_TO_SEC(c{i}) * 1000000 AS SIGNED) AS CHAR)"
            return f"CAST(CAST(EXTRACT(EPOCH FROM c{i}) * 1000000 AS BIGINT) AS TEXT)"
        if t.base in BYTES:
            return f"lower(hex(c{i}))" if dialect == "mariadb" else f"encode(c{i}, 'hex')"
        if t.base in TEMPORAL:  # as text (the sessions' zone is UTC)
            if dialect == "mariadb":
                return f"CAST(c{i} AS CHAR)"
            day = "YYYY-MM-DD" + ("" if t.base == "DATE" else " HH24:MI:SS")
            return f"to_char(c{i}, '{day}')"
        return f"c{i}"

    INTEGERS = {"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR"}
    BYTES = {"TINYBLOB", "BLOB", "MEDIUMBLOB", "BINARY", "VARBINARY"}
    TEMPORAL = {"DATE", "DATETIME", "TIMESTAMP"}
    types = [parse_type(sql) for sql, *_ in LIMIT_CASES]
    pg_table = '"' + DB.replace('"', '""') + '"."lim"'
    for dialect in ("mariadb", "postgresql"):
        columns = ", ".join(
            column_def(Column(f"c{i}", t), dialect).sql(sqlglot_dialect(dialect))
            for i, t in enumerate(types)
        )
        ddl = f"CREATE TABLE {{}} (id INT NOT NULL PRIMARY KEY, {columns})"
        if dialect == "mariadb":
            mariadb.execute(ddl.format(f"{_q(DB)}.lim") + " DEFAULT CHARSET=utf8mb4")
        else:
            postgres.execute(ddl.format(pg_table))
    stored: dict[str, list[bool]] = {"mariadb": [], "postgresql": []}
    for i, ((_, text, *_), t) in enumerate(zip(LIMIT_CASES, types, strict=True)):
        insert = f"INSERT INTO {{}} (id, c{i}) VALUES ({i}, {{}})"
        try:
            with mariadb.connect() as conn, conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES', time_zone = '+00:00'")
                cur.execute(insert.format(f"{_q(DB)}.lim", literal(t, text, "mariadb")))
                conn.commit()
                cur.execute(f"SELECT {read(t, i, 'mariadb')} FROM {_q(DB)}.lim WHERE id = {i}")
                got = cur.fetchone()
            stored["mariadb"].append(same(t, str(got[0])) == back(t, text, "mariadb"))
        except pymysql.err.MySQLError:
            stored["mariadb"].append(False)
        try:
            utc = "SET TIME ZONE 'UTC'; "
            postgres.execute(utc + insert.format(pg_table, literal(t, text, "postgresql")))
            got = postgres.execute(
                f"{utc}SELECT {read(t, i, 'postgresql')} FROM {pg_table} WHERE id = {i}"
            )
            stored["postgresql"].append(same(t, got.rstrip("\n")) == back(t, text, "postgresql"))
        except downstream_local.DownstreamError:
            stored["postgresql"].append(False)
    for dialect in ("mariadb", "postgresql"):
        admitted = [
            (bound := limit(t, dialect)) is None or bound.admits(text)
            for (_, text, *_), t in zip(LIMIT_CASES, types, strict=True)
        ]
        assert admitted == stored[dialect], dialect
    # and the stated expectations are what both say
    assert stored["mariadb"] == [c[2] for c in LIMIT_CASES]
    assert stored["postgresql"] == [c[3] for c in LIMIT_CASES]


def test_mariadb_encodes_exactly_the_characters_of_each_judged_repertoire(mariadb):
    """schemas.storage.repertoire and wider against MariaDB, every code point of the
    basic plane and a few past it: the database's conversion from utf8mb4 to the
    character set keeps a character exactly when the repertoire's pattern does not find
    it (a character it cannot keep becomes ``?``, and is refused by a strict INSERT), and
    a kept character takes the bytes wider's classes count."""
    import re

    from schemas.storage import CHARSETS, charset_bytes, repertoire, wider

    points = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    points += [0x10000, 0x1F600, 0x2A6D6, 0x10FFFF]
    table = f"{_q(DB)}.points"
    mariadb.execute(
        f"CREATE TABLE {table} (c INT PRIMARY KEY, "
        "s VARCHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)"
    )
    with mariadb.connect() as conn, conn.cursor() as cur:
        for i in range(0, len(points), 8192):
            cur.executemany(
                f"INSERT INTO {table} VALUES (%s, %s)", [(c, chr(c)) for c in points[i : i + 8192]]
            )
        conn.commit()
    for charset in (*CHARSETS, "ucs2", "utf16", "utf16le", "utf32"):
        kept = dict(
            mariadb.execute(
                f"SELECT c, LENGTH(CONVERT(s USING {charset})) FROM {table} "
                f"WHERE CAST(CONVERT(CONVERT(s USING {charset}) USING utf8mb4) AS BINARY) "
                "= CAST(s AS BINARY)"
            )
        )
        if charset in CHARSETS:
            pattern = re.compile(repertoire(charset) or "")
            ours = [c for c in points if not pattern.search(chr(c))]
            assert sorted(kept) == ours, charset
        else:  # Unicode: every character, and none past the basic plane in ucs2
            assert sorted(kept) == [c for c in points if charset != "ucs2" or c <= 0xFFFF]
        classes = wider(charset)
        assert classes is not None, charset
        bytes_ = {c: charset_bytes(chr(c), classes) for c in kept}
        assert bytes_ == kept, (charset, [hex(c) for c in kept if bytes_[c] != kept[c]][:9])
