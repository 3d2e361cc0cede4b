"""DDL parsing, normalisation and apply, one statement a line (sqlglot's validate_identity
style). Test names trace back to TiDB DM's shard DDL test plans where one fits."""

from __future__ import annotations

import pytest

from schemas.changes import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterTable,
    ChangeColumn,
    CreateDatabase,
    CreateTable,
    CreateTableLike,
    DropColumn,
    DropDatabase,
    DropIndex,
    DropPrimaryKey,
    DropTable,
    ModifyColumn,
    Position,
    RenameColumn,
    RenameIndex,
    RenameTable,
    SchemaChange,
    SetDefault,
    TableOptions,
    TruncateTable,
)
from schemas.ddl import _parsed, apply, normalize, parse_create_table, parse_ddl, parse_type
from schemas.errors import DDLError, SchemaError
from schemas.model import Column, ColumnType, Index, TableName, TableSchema

T = TableName("t")
TARGET = TableName("tb", "db")
INT = ColumnType("INT")


def col(name: str, type_: str = "INT", **kw: object) -> Column:
    return Column(name, parse_type(type_), **kw)  # type: ignore[arg-type]


def alter(*specs: object) -> AlterTable:
    return AlterTable(T, specs)  # type: ignore[arg-type]


def case(sql: str, *expected: SchemaChange) -> None:
    """``sql`` parses to exactly ``expected``."""
    assert parse_ddl(sql) == expected, sql


def normalizes(*sqls: str, to: SchemaChange) -> None:
    """Each statement (one per shard, under its own table name) normalises, routed to
    ``TARGET``, to exactly ``to``, written out here."""
    for sql in sqls:
        assert [normalize(c, TARGET) for c in parse_ddl(sql)] == [to], sql


def typed(base: str, *args: int, **kw: object) -> ColumnType:
    """A column type written out (not parsed): ``typed("DECIMAL", 10, 0)``."""
    return ColumnType(base, *args, **kw)  # type: ignore[arg-type]


def routed(*specs: object) -> AlterTable:
    return AlterTable(TARGET, specs)  # type: ignore[arg-type]


def typ(text: str, expected: ColumnType) -> None:
    assert parse_type(text) == expected, text


def reads_as(expected: TableSchema, *sqls: str) -> None:
    """Each CREATE TABLE parses to ``expected``, written out here (not another parse)."""
    for sql in sqls:
        assert parse_create_table(sql) == expected, sql


def applied(create: str, *alters: str, expect: str) -> None:
    """``create`` then ``alters`` (through apply) gives the table ``expect`` creates."""
    schema: TableSchema | None = None
    for sql in (create, *alters):
        for change in parse_ddl(sql):
            schema = apply(change, schema)
    assert schema == parse_create_table(expect), (alters, schema and schema.to_sql())
    assert schema is not None
    assert schema.to_sql() == parse_create_table(expect).to_sql()  # column order, names


def rejected(sql: str, *reason: str) -> None:
    """``sql`` is a DDLError naming the statement and the ``reason`` fragments."""
    with pytest.raises(DDLError) as info:
        parse_ddl(sql)
    assert info.value.statement == sql
    assert sql in str(info.value)
    for fragment in reason:
        assert fragment in info.value.reason, (fragment, info.value.reason)


def invalid(create: str, alter_sql: str, *message: str) -> None:
    """Applying ``alter_sql`` to ``create`` raises SchemaError naming ``message`` fragments."""
    schema = parse_create_table(create)
    with pytest.raises(SchemaError) as info:
        for change in parse_ddl(alter_sql):
            schema = apply(change, schema)
    for fragment in message:
        assert fragment in str(info.value), (fragment, str(info.value))


def round_trip(sql: str) -> None:
    schema = parse_create_table(sql)
    assert parse_create_table(schema.to_sql()) == schema, schema.to_sql()


# --- types -----------------------------------------------------------------------------


def test_integer_types_and_aliases() -> None:
    typ("INT(11)", INT)
    typ("INTEGER", INT)
    typ("int4", INT)
    typ("INT1", ColumnType("TINYINT"))
    typ("INT2", ColumnType("SMALLINT"))
    typ("INT3", ColumnType("MEDIUMINT"))
    typ("MIDDLEINT", ColumnType("MEDIUMINT"))
    typ("INT8", ColumnType("BIGINT"))
    typ("BOOL", ColumnType("TINYINT"))
    typ("BOOLEAN", ColumnType("TINYINT"))
    typ("TINYINT(1)", ColumnType("TINYINT"))
    typ("BIGINT(20) UNSIGNED", ColumnType("BIGINT", unsigned=True))
    typ("SMALLINT(5) ZEROFILL", ColumnType("SMALLINT", unsigned=True, zerofill=True))
    typ("INT SIGNED", INT)


def test_decimal_and_float_types() -> None:
    typ("decimal(10, 2) unsigned", ColumnType("DECIMAL", 10, 2, unsigned=True))
    typ("DECIMAL", ColumnType("DECIMAL", 10, 0))
    typ("DECIMAL(5)", ColumnType("DECIMAL", 5, 0))
    typ("NUMERIC(5,2)", ColumnType("DECIMAL", 5, 2))
    typ("DEC(6,1)", ColumnType("DECIMAL", 6, 1))
    typ("FIXED(6,1)", ColumnType("DECIMAL", 6, 1))
    typ("REAL", ColumnType("DOUBLE"))
    typ("DOUBLE PRECISION", ColumnType("DOUBLE"))
    typ("FLOAT", ColumnType("FLOAT"))
    typ("FLOAT(24)", ColumnType("FLOAT"))
    typ("FLOAT(25)", ColumnType("DOUBLE"))
    typ("FLOAT8", ColumnType("DOUBLE"))


def test_string_types_and_charsets() -> None:
    typ("VARCHAR(10) CHARACTER SET utf8mb4", ColumnType("VARCHAR", 10, charset="utf8mb4"))
    typ("CHARACTER VARYING(10)", ColumnType("VARCHAR", 10))
    typ("CHAR", ColumnType("CHAR", 1))
    typ("CHARACTER(3)", ColumnType("CHAR", 3))
    typ("NCHAR(3)", ColumnType("CHAR", 3, charset="utf8mb3"))
    typ("NATIONAL VARCHAR(3)", ColumnType("VARCHAR", 3, charset="utf8mb3"))
    typ("VARCHAR(5) CHARSET utf8", ColumnType("VARCHAR", 5, charset="utf8mb3"))
    typ(
        "varchar(5) collate UTF8_BIN",
        ColumnType("VARCHAR", 5, charset="utf8mb3", collation="utf8mb3_bin"),
    )
    typ("CHAR(3) CHARACTER SET binary", ColumnType("BINARY", 3))
    typ("BINARY", ColumnType("BINARY", 1))
    typ("VARBINARY(8)", ColumnType("VARBINARY", 8))
    typ("TEXT(100)", ColumnType("TEXT"))
    typ("LONG VARCHAR", ColumnType("MEDIUMTEXT"))
    typ("LONGBLOB", ColumnType("LONGBLOB"))
    typ("enum('a','b')", ColumnType("ENUM", members=("a", "b")))
    typ("SET('x', 'it''s')", ColumnType("SET", members=("x", "it's")))


def test_time_and_other_types() -> None:
    typ("DATETIME(0)", ColumnType("DATETIME"))
    typ("DATETIME(6)", ColumnType("DATETIME", 6))
    typ("TIMESTAMP(3)", ColumnType("TIMESTAMP", 3))
    typ("TIME", ColumnType("TIME"))
    typ("YEAR(4)", ColumnType("YEAR"))
    typ("BIT", ColumnType("BIT", 1))
    typ("BIT(3)", ColumnType("BIT", 3))
    typ("JSON", ColumnType("JSON"))
    typ("DATE", ColumnType("DATE"))


def test_bad_types() -> None:
    with pytest.raises(DDLError, match="INT DEFAULT 1"):
        parse_type("INT DEFAULT 1")
    with pytest.raises(DDLError, match="no character set"):
        parse_type("INT CHARACTER SET utf8mb4")
    with pytest.raises(DDLError):
        parse_type("NOSUCHTYPE(3)")
    with pytest.raises(DDLError, match="a type only"):
        parse_type("INT UNIQUE")


# --- CREATE TABLE ----------------------------------------------------------------------


def test_create_table() -> None:
    case(
        "CREATE TABLE t (id INT PRIMARY KEY, a INT)",
        CreateTable(T, TableSchema((col("id", nullable=False), col("a")), ("id",), name="t")),
    )
    case(
        "create table if not exists `db`.`T` (`A` int);",
        CreateTable(TableName("T", "db"), TableSchema((col("A"),), name="T"), True),
    )
    case("CREATE TABLE t LIKE db.s", CreateTableLike(T, TableName("s", "db")))
    case("CREATE TABLE IF NOT EXISTS t LIKE s", CreateTableLike(T, TableName("s"), True))


def test_create_table_normalisation() -> None:
    # synonyms and display widths: INTEGER(11) is INT, NUMERIC is DECIMAL(10,0)
    reads_as(
        TableSchema((Column("a", INT), Column("b", typed("DECIMAL", 10, 0)))),
        "CREATE TABLE t (a INTEGER(11), b NUMERIC)",
        "CREATE TABLE t (a INT, b DECIMAL(10,0))",
    )
    # a primary key column is NOT NULL, however the key is written
    reads_as(
        TableSchema((Column("id", INT, nullable=False),), ("id",)),
        "CREATE TABLE t (id INT, PRIMARY KEY (id))",
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)",
    )
    # defaults as SQL text: none for NULL, a number bare, a string quoted once
    none = TableSchema((Column("a", INT),))
    reads_as(none, "CREATE TABLE t (a INT DEFAULT NULL)", "CREATE TABLE t (a INT NULL)")
    five = TableSchema((Column("a", INT, default="5"),))
    reads_as(five, "CREATE TABLE t (a INT DEFAULT '5')", "CREATE TABLE t (a INT DEFAULT 5)")
    reads_as(
        TableSchema((Column("a", typed("VARCHAR", 3), default="'5'"),)),
        "CREATE TABLE t (a VARCHAR(3) DEFAULT 5)",
        "CREATE TABLE t (a VARCHAR(3) DEFAULT '5')",
    )
    reads_as(
        TableSchema((Column("a", typed("DECIMAL", 5, 2), default="1.5"),)),
        "CREATE TABLE t (a DECIMAL(5,2) DEFAULT 1.50)",
        "CREATE TABLE t (a DECIMAL(5,2) DEFAULT 1.5)",
    )
    one = TableSchema((Column("a", INT, default="1"),))
    reads_as(one, "CREATE TABLE t (a INT DEFAULT +1)", "CREATE TABLE t (a INT DEFAULT 1)")
    # BOOL is TINYINT(1), its width dropped; TRUE is 1
    reads_as(
        TableSchema((Column("a", typed("TINYINT"), default="1"),)),
        "CREATE TABLE t (a TINYINT DEFAULT TRUE)",
        "CREATE TABLE t (a BOOL DEFAULT 1)",
    )
    reads_as(
        TableSchema((Column("a", typed("TEXT"), default="'x'"),)),
        'CREATE TABLE t (a TEXT DEFAULT "x")',
        "CREATE TABLE t (a TEXT DEFAULT 'x')",
    )
    # NOW() and LOCALTIMESTAMP are CURRENT_TIMESTAMP; ON UPDATE is not part of the schema
    reads_as(
        TableSchema((Column("ts", typed("DATETIME"), default="CURRENT_TIMESTAMP"),)),
        "CREATE TABLE t (ts DATETIME DEFAULT NOW() ON UPDATE NOW())",
        "CREATE TABLE t (ts DATETIME DEFAULT CURRENT_TIMESTAMP)",
    )
    reads_as(
        TableSchema((Column("ts", typed("TIMESTAMP", 3), default="CURRENT_TIMESTAMP(3)"),)),
        "CREATE TABLE t (ts TIMESTAMP(3) DEFAULT LOCALTIMESTAMP(3))",
        "CREATE TABLE t (ts TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3))",
    )
    # comments and storage options are not part of the schema
    reads_as(none, "CREATE TABLE t (a INT COMMENT 'x')", "CREATE TABLE t (a INT)")
    reads_as(none, "CREATE TABLE t (a INT) ENGINE=InnoDB ROW_FORMAT=DYNAMIC")


def test_create_table_charsets() -> None:
    # A character column without charset takes the table's, as MySQL stores it; utf8 is
    # utf8mb3 (https://dev.mysql.com/doc/refman/8.0/en/charset-unicode-utf8.html).
    a = Column("a", typed("VARCHAR", 10, charset="utf8mb3", collation="utf8mb3_bin"))
    reads_as(
        TableSchema((a, Column("b", INT)), charset="utf8mb3", collation="utf8mb3_bin"),
        "CREATE TABLE t (a VARCHAR(10), b INT) DEFAULT CHARSET=utf8 COLLATE=utf8_bin",
        "CREATE TABLE t (a VARCHAR(10) CHARACTER SET utf8mb3 COLLATE utf8mb3_bin, b INT)"
        " CHARSET utf8mb3 COLLATE utf8mb3_bin",
    )
    # a column's own charset keeps it, without the table's collation (another charset's);
    # a table COLLATE alone names its charset
    reads_as(
        TableSchema(
            (Column("a", typed("TEXT", charset="latin1")),),
            charset="utf8mb4",
            collation="utf8mb4_bin",
        ),
        "CREATE TABLE t (a TEXT CHARSET latin1) CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        "CREATE TABLE t (a TEXT CHARACTER SET latin1) COLLATE utf8mb4_bin",
    )
    schema = parse_create_table("CREATE TABLE t (e ENUM('a'), b BLOB) CHARSET=utf8mb4")
    assert schema.columns[0].type.charset == "utf8mb4"
    assert schema.columns[1].type.charset is None


def test_create_table_keys() -> None:
    schema = parse_create_table(
        "CREATE TABLE t (a INT UNIQUE, b INT, c INT, KEY (b), KEY (b, c), UNIQUE KEY (a),"
        " FULLTEXT KEY ft (c), CONSTRAINT uq UNIQUE (c), INDEX ix (c(10) DESC))"
    )
    assert schema.indexes == (
        Index("a", ("a",), "UNIQUE"),
        Index("b", ("b",)),
        Index("b_2", ("b", "c")),
        Index("a_2", ("a",), "UNIQUE"),
        Index("ft", ("c",), "FULLTEXT"),
        Index("uq", ("c",), "UNIQUE"),
        Index("ix", ("c",)),
    )
    pk = parse_create_table("CREATE TABLE t (a INT, b INT NULL, PRIMARY KEY (a, b))")
    assert pk.primary_key == ("a", "b")
    assert not any(c.nullable for c in pk.columns)


def test_create_table_generated_and_auto_increment() -> None:
    schema = parse_create_table(
        "CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT,"
        " g INT AS (a+1) STORED, v INT GENERATED ALWAYS AS (a * 2) VIRTUAL)"
    )
    assert schema.columns[0].auto_increment
    assert (schema.columns[2].generated, schema.columns[2].stored) == ("a + 1", True)
    assert (schema.columns[3].generated, schema.columns[3].stored) == ("a * 2", False)


# --- ALTER TABLE -----------------------------------------------------------------------


def test_DM_003_add_column() -> None:
    case("ALTER TABLE t ADD COLUMN b INT", alter(AddColumn(col("b"))))
    case("ALTER TABLE t ADD b INT", alter(AddColumn(col("b"))))
    case("alter table t add column b int after a", alter(AddColumn(col("b"), Position("a"))))
    case("ALTER TABLE t ADD COLUMN b INT FIRST", alter(AddColumn(col("b"), Position())))
    case(
        "ALTER TABLE t ADD COLUMN b INT NOT NULL DEFAULT 0",
        alter(AddColumn(col("b", nullable=False, default="0"))),
    )
    case(
        "ALTER TABLE t ADD COLUMN id INT PRIMARY KEY",
        alter(AddColumn(col("id", nullable=False)), AddPrimaryKey(("id",))),
    )
    case(
        "ALTER TABLE t ADD COLUMN u INT UNIQUE",
        alter(AddColumn(col("u")), AddIndex(Index("", ("u",), "UNIQUE"))),
    )


def test_DM_012_add_several_columns() -> None:
    both = alter(AddColumn(col("b")), AddColumn(col("c", "VARCHAR(3)")))
    case("ALTER TABLE t ADD COLUMN b INT, ADD COLUMN c VARCHAR(3)", both)
    case("ALTER TABLE t ADD COLUMN (b INT, c VARCHAR(3))", both)
    case("ALTER TABLE t ADD (b INT, c VARCHAR(3))", both)
    case("ALTER TABLE t ADD (b INT)", alter(AddColumn(col("b"))))


def test_DM_117_drop_column() -> None:
    case("ALTER TABLE t DROP COLUMN b", alter(DropColumn("b")))
    case("ALTER TABLE t DROP b, DROP COLUMN c", alter(DropColumn("b"), DropColumn("c")))


def test_DM_150_modify_column() -> None:
    case("ALTER TABLE t MODIFY COLUMN a VARCHAR(10)", alter(ModifyColumn(col("a", "VARCHAR(10)"))))
    case("ALTER TABLE t MODIFY a DOUBLE FIRST", alter(ModifyColumn(col("a", "DOUBLE"), Position())))
    case(
        "ALTER TABLE t MODIFY b INT DEFAULT -1",
        alter(ModifyColumn(col("b", default="-1"))),
    )


def test_DM_049_change_and_rename_column() -> None:
    case("ALTER TABLE t CHANGE a c INT", alter(ChangeColumn("a", col("c"))))
    case(
        "ALTER TABLE t CHANGE COLUMN a c BIGINT AFTER b",
        alter(ChangeColumn("a", col("c", "BIGINT"), Position("b"))),
    )
    case("ALTER TABLE t RENAME COLUMN a TO c", alter(RenameColumn("a", "c")))


def test_defaults() -> None:
    case("ALTER TABLE t ALTER COLUMN a SET DEFAULT 5", alter(SetDefault("a", "5")))
    case("ALTER TABLE t ALTER a SET DEFAULT 'x'", alter(SetDefault("a", "'x'")))
    case("ALTER TABLE t ALTER a DROP DEFAULT", alter(SetDefault("a", None)))


def test_indexes() -> None:
    case("ALTER TABLE t ADD INDEX idx (a, b)", alter(AddIndex(Index("idx", ("a", "b")))))
    case("ALTER TABLE t ADD KEY (a)", alter(AddIndex(Index("", ("a",)))))
    case("ALTER TABLE t ADD UNIQUE KEY uk (a)", alter(AddIndex(Index("uk", ("a",), "UNIQUE"))))
    case("ALTER TABLE t ADD UNIQUE INDEX uk (a)", alter(AddIndex(Index("uk", ("a",), "UNIQUE"))))
    case("ALTER TABLE t ADD UNIQUE (a)", alter(AddIndex(Index("", ("a",), "UNIQUE"))))
    case(
        "ALTER TABLE t ADD CONSTRAINT uk UNIQUE (a)", alter(AddIndex(Index("uk", ("a",), "UNIQUE")))
    )
    case("ALTER TABLE t ADD FULLTEXT ft (a)", alter(AddIndex(Index("ft", ("a",), "FULLTEXT"))))
    case(
        "ALTER TABLE t ADD FULLTEXT INDEX ft (a)", alter(AddIndex(Index("ft", ("a",), "FULLTEXT")))
    )
    case("ALTER TABLE t ADD PRIMARY KEY (a, b)", alter(AddPrimaryKey(("a", "b"))))
    case("ALTER TABLE t ADD CONSTRAINT pk PRIMARY KEY (a)", alter(AddPrimaryKey(("a",))))
    case("ALTER TABLE t DROP INDEX idx", alter(DropIndex("idx")))
    case("ALTER TABLE t DROP KEY idx", alter(DropIndex("idx")))
    case("ALTER TABLE t DROP PRIMARY KEY", alter(DropPrimaryKey()))
    case("ALTER TABLE t DROP INDEX `PRIMARY`", alter(DropPrimaryKey()))
    case("ALTER TABLE t RENAME INDEX a TO b", alter(RenameIndex("a", "b")))
    case("ALTER TABLE t RENAME KEY a TO b", alter(RenameIndex("a", "b")))
    case("CREATE INDEX i ON t (a)", alter(AddIndex(Index("i", ("a",)))))
    case("CREATE UNIQUE INDEX i ON t (a, b)", alter(AddIndex(Index("i", ("a", "b"), "UNIQUE"))))
    case("CREATE FULLTEXT INDEX f ON t (a)", alter(AddIndex(Index("f", ("a",), "FULLTEXT"))))
    case("DROP INDEX i ON t", alter(DropIndex("i")))
    case("DROP INDEX i ON db.t", AlterTable(TableName("t", "db"), (DropIndex("i"),)))


def test_table_options_and_charsets() -> None:
    utf8mb4_bin = TableOptions("utf8mb4", "utf8mb4_bin")
    case("ALTER TABLE t CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", alter(utf8mb4_bin))
    case("ALTER TABLE t DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin", alter(utf8mb4_bin))
    case("ALTER TABLE t COLLATE utf8mb4_bin", alter(utf8mb4_bin))
    case("ALTER TABLE t CHARSET=utf8", alter(TableOptions("utf8mb3")))
    case(
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        alter(TableOptions("utf8mb4", "utf8mb4_bin", convert=True)),
    )
    case("ALTER TABLE t CONVERT TO CHARSET utf8", alter(TableOptions("utf8mb3", convert=True)))
    case("ALTER TABLE t ENGINE=InnoDB", alter())
    case("ALTER TABLE t COMMENT 'x', AUTO_INCREMENT=100, ROW_FORMAT=DYNAMIC", alter())
    case(
        "ALTER TABLE t ADD COLUMN b INT, ALGORITHM=INPLACE, LOCK=NONE",
        alter(AddColumn(col("b"))),
    )


def test_several_specs_in_one_statement() -> None:
    case(
        "ALTER TABLE t ADD COLUMN b INT AFTER a, DROP COLUMN c, ADD INDEX ib (b),"
        " MODIFY d BIGINT, CONVERT TO CHARACTER SET latin1",
        alter(
            AddColumn(col("b"), Position("a")),
            DropColumn("c"),
            AddIndex(Index("ib", ("b",))),
            ModifyColumn(col("d", "BIGINT")),
            TableOptions("latin1", convert=True),
        ),
    )


# --- other statements ------------------------------------------------------------------


def test_DM_023_rename_tables() -> None:
    case("RENAME TABLE tb1 TO tb3", RenameTable(TableName("tb1"), TableName("tb3")))
    case(
        "RENAME TABLE tb1 TO _tb1_del, _tb1_gho TO tb1;",
        RenameTable(TableName("tb1"), TableName("_tb1_del")),
        RenameTable(TableName("_tb1_gho"), TableName("tb1")),
    )
    case("rename table `db`.`a` to db2.b", RenameTable(TableName("a", "db"), TableName("b", "db2")))
    case("ALTER TABLE t RENAME TO u", RenameTable(T, TableName("u")))
    case("ALTER TABLE t RENAME u", RenameTable(T, TableName("u")))
    case("ALTER TABLE t RENAME AS db.u", RenameTable(T, TableName("u", "db")))
    case(
        "ALTER TABLE t ADD COLUMN b INT, RENAME TO u",
        alter(AddColumn(col("b"))),
        RenameTable(T, TableName("u")),
    )


def test_drop_truncate_and_databases() -> None:
    case("DROP TABLE t", DropTable(T))
    case(
        "DROP TABLE IF EXISTS a, db.b",
        DropTable(TableName("a"), True),
        DropTable(TableName("b", "db"), True),
    )
    case("TRUNCATE TABLE t", TruncateTable(T))
    case("TRUNCATE db.t", TruncateTable(TableName("t", "db")))
    case("CREATE DATABASE d", CreateDatabase("d"))
    case("CREATE SCHEMA IF NOT EXISTS d", CreateDatabase("d", True))
    case("DROP DATABASE IF EXISTS d", DropDatabase("d", True))
    case("DROP SCHEMA d", DropDatabase("d"))


# --- errors ----------------------------------------------------------------------------


def test_unsupported_statements() -> None:
    rejected("CREATE VIEW v AS SELECT 1", "CREATE VIEW")
    rejected("INSERT INTO t VALUES (1)", "INSERT")
    rejected("garbage here")
    rejected("")
    rejected("ALTER TABLE t ADD COLUMN a INT; DROP TABLE t", "one statement")
    rejected("CREATE TEMPORARY TABLE t (a INT)", "temporary")
    rejected("DROP TEMPORARY TABLE t", "temporary")
    rejected("CREATE TABLE t AS SELECT 1")
    rejected("RENAME TABLE a b", "old TO new")
    rejected("ALTER TABLE t CONVERT TO utf8mb4", "CONVERT TO CHARACTER SET")
    rejected("ALTER TABLE t ADD COLUMN a", "ADD COLUMN a")
    rejected("ALTER TABLE t ADD COLUMN a INT WIBBLE", "WIBBLE")
    # Refused with a reason: rows change upstream with no row events, or the feature has
    # no meaning downstream.
    rejected("ALTER TABLE t DROP PARTITION p0", "deletes the rows")
    rejected("ALTER TABLE t TRUNCATE PARTITION ALL", "deletes the rows")
    rejected("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE t2", "swaps")
    rejected("ALTER TABLE t DISCARD TABLESPACE", "no row events")
    rejected("ALTER TABLE t ADD SYSTEM VERSIONING", "system-versioned")
    rejected("CREATE TABLE t (a INT) WITH SYSTEM VERSIONING", "system-versioned")
    rejected("CREATE TABLE s (a INT) SEQUENCE=1", "SEQUENCE")
    rejected("ALTER IGNORE TABLE t ADD UNIQUE KEY (a)", "duplicate rows")


def test_invalid_statements_are_schema_and_ddl_errors() -> None:
    for sql in (
        "ALTER TABLE t ADD c INT NOT NULL DEFAULT NULL",
        "CREATE TABLE t (a INT, a BIGINT)",
        "CREATE TABLE t (a INT PRIMARY KEY, b INT, PRIMARY KEY (b))",
        "CREATE TABLE t (a INT, KEY k (nope))",
        "CREATE TABLE t (a INT, KEY k (a), KEY k (a))",
    ):
        with pytest.raises(SchemaError):
            parse_ddl(sql)
        rejected(sql)
    rejected("CREATE TABLE t (a INT, KEY k (nope))", "nope")


def test_a_rollout_statement_reads_the_same_on_every_table() -> None:
    # Each shard runs the same specifications under its own table name: what they read as
    # is kept from the first shard, and what belongs to the head is each statement's own.
    specs = "CHANGE a z INT, ADD COLUMN c INT AFTER z, RENAME TO {new}"
    first = parse_ddl("ALTER TABLE t_1 " + specs.format(new="u_1"))
    again = parse_ddl("ALTER TABLE `db`.`t_2` " + specs.format(new="u_1"))
    assert isinstance(first[0], AlterTable) and isinstance(again[0], AlterTable)
    assert again[0].specs == first[0].specs and again[0].table == TableName("t_2", "db")
    assert again[1] == RenameTable(TableName("t_2", "db"), TableName("u_1"))
    case("ALTER TABLE t ADD UNIQUE KEY (a)", alter(AddIndex(Index("", ("a",), "UNIQUE"))))
    rejected("ALTER IGNORE TABLE t2 ADD UNIQUE KEY (a)", "duplicate rows")
    # A statement is parsed once (an ALTER once per shape: tests/unit/test_ddl_shapes.py);
    # an error is found again and names its own statement.
    once = parse_ddl("CREATE TABLE t_1 (c INT)")
    misses = _parsed.cache_info().misses
    assert parse_ddl("CREATE TABLE t_1 (c INT)") is once
    assert parse_ddl("ALTER TABLE t_1 ADD COLUMN c INT") == parse_ddl(
        "ALTER TABLE t_1 ADD COLUMN c INT"
    )
    assert _parsed.cache_info().misses - misses <= 1
    rejected("ALTER TABLE t_1 ADD COLUMN a INT DEFAULT (1", "Expecting )")
    rejected("ALTER TABLE t_2 ADD COLUMN a INT DEFAULT (1", "Expecting )")


def test_parse_create_table_needs_a_column_list() -> None:
    for sql in ("CREATE TABLE t LIKE s", "ALTER TABLE t ADD a INT", "DROP TABLE t"):
        with pytest.raises(DDLError, match="CREATE TABLE"):
            parse_create_table(sql)


# --- normalize -------------------------------------------------------------------------


def test_normalize_case_backticks_whitespace_and_column_keyword() -> None:
    normalizes(
        "ALTER TABLE tb1 ADD COLUMN `A` INT",
        "alter table TB2 add a int",
        to=routed(AddColumn(Column("a", INT))),
    )
    normalizes(
        "ALTER TABLE `db1`.`tb1`  ADD\n COLUMN b INTEGER(11) AFTER `ID`",
        "ALTER TABLE tb2 ADD b INT AFTER id",
        to=routed(AddColumn(Column("b", INT), Position("id"))),
    )
    normalizes(
        "ALTER TABLE tb1 MODIFY COLUMN A VARCHAR(10);",
        "alter table tb2 modify a varchar(10)",
        to=routed(ModifyColumn(Column("a", typed("VARCHAR", 10)))),
    )
    normalizes(
        "ALTER TABLE tb1 CHANGE A C INT",
        "ALTER TABLE tb2 CHANGE COLUMN a c INT",
        to=routed(ChangeColumn("a", Column("c", INT))),
    )
    normalizes(
        "ALTER TABLE tb1 DROP COLUMN B, DROP C",
        "ALTER TABLE tb2 DROP b, DROP COLUMN c",
        to=routed(DropColumn("b"), DropColumn("c")),
    )
    normalizes(
        "ALTER TABLE tb1 ADD INDEX IX (A)",
        "ALTER TABLE tb2 ADD KEY ix (a)",
        to=routed(AddIndex(Index("ix", ("a",)))),
    )
    normalizes(
        "ALTER TABLE tb1 ADD COLUMN (b INT, c INT)",
        "ALTER TABLE tb2 ADD b INT, ADD c INT",
        to=routed(AddColumn(Column("b", INT)), AddColumn(Column("c", INT))),
    )
    normalizes(
        "CREATE TABLE tb1 (ID INT PRIMARY KEY, G INT AS (ID + 1))",
        "CREATE TABLE tb2 (id INT, g INT AS (id+1), PRIMARY KEY (id))",
        to=CreateTable(
            TARGET,
            TableSchema(
                (Column("id", INT, nullable=False), Column("g", INT, generated="id + 1")),
                ("id",),
            ),
        ),
    )
    # both names are the shard's: routed, the rename is the target's own name
    normalizes("RENAME TABLE tb1 TO tb3", "RENAME TABLE tb2 TO tb4", to=RenameTable(TARGET, TARGET))
    normalizes("TRUNCATE TB1", "TRUNCATE TABLE tb2", to=TruncateTable(TARGET))


def test_normalize_keeps_what_matters() -> None:
    # each pair differs in one thing, which its normal form keeps
    normalizes("ALTER TABLE tb1 ADD COLUMN a INT", to=routed(AddColumn(Column("a", INT))))
    normalizes(
        "ALTER TABLE tb2 ADD COLUMN a INT FIRST", to=routed(AddColumn(Column("a", INT), Position()))
    )
    normalizes(
        "ALTER TABLE tb1 ADD COLUMN a INT AFTER b",
        to=routed(AddColumn(Column("a", INT), Position("b"))),
    )
    normalizes(
        "ALTER TABLE tb2 ADD COLUMN a INT AFTER c",
        to=routed(AddColumn(Column("a", INT), Position("c"))),
    )
    normalizes(
        "ALTER TABLE tb1 ADD COLUMN new_col1 INT", to=routed(AddColumn(Column("new_col1", INT)))
    )
    normalizes(
        "ALTER TABLE tb2 ADD COLUMN new_col1 FLOAT",
        to=routed(AddColumn(Column("new_col1", typed("FLOAT")))),
    )
    normalizes(
        "ALTER TABLE tb1 MODIFY b INT DEFAULT 0",
        to=routed(ModifyColumn(Column("b", INT, default="0"))),
    )
    normalizes(
        "ALTER TABLE tb2 MODIFY b INT DEFAULT -1",
        to=routed(ModifyColumn(Column("b", INT, default="-1"))),
    )
    normalizes("ALTER TABLE tb1 CHANGE a c INT", to=routed(ChangeColumn("a", Column("c", INT))))
    normalizes("ALTER TABLE tb2 CHANGE a d INT", to=routed(ChangeColumn("a", Column("d", INT))))
    # ENUM members are values, not identifiers: their case stays
    normalizes(
        "ALTER TABLE tb1 ADD a ENUM('X')",
        to=routed(AddColumn(Column("a", typed("ENUM", members=("X",))))),
    )
    normalizes(
        "ALTER TABLE tb2 ADD a ENUM('x')",
        to=routed(AddColumn(Column("a", typed("ENUM", members=("x",))))),
    )


def test_normalize_routes_and_lowers_names() -> None:
    change = parse_ddl("ALTER TABLE `DB`.`TB1` ADD COLUMN `B` INT AFTER `A`")[0]
    assert normalize(change) == AlterTable(
        TableName("tb1", "db"), (AddColumn(col("b"), Position("a")),)
    )
    assert normalize(change, TARGET).table == TARGET
    create = normalize(parse_ddl("CREATE TABLE TB1 (ID INT, KEY IX (ID))")[0], TARGET)
    assert isinstance(create, CreateTable)
    assert create.schema.name == "tb" and create.schema.indexes == (Index("ix", ("id",)),)
    assert normalize(parse_ddl("CREATE DATABASE D")[0]) == CreateDatabase("d")


# --- apply -----------------------------------------------------------------------------

BASE = "id INT PRIMARY KEY, a INT, b VARCHAR(10)"


def after(spec: str, expect: str, base: str = BASE) -> None:
    """``ALTER TABLE t spec`` on ``CREATE TABLE t (base)`` gives ``CREATE TABLE t (expect)``."""
    applied(
        f"CREATE TABLE t ({base})", f"ALTER TABLE t {spec}", expect=f"CREATE TABLE t ({expect})"
    )


def fails(spec: str, *message: str, base: str = BASE) -> None:
    invalid(f"CREATE TABLE t ({base})", f"ALTER TABLE t {spec}", *message)


def test_apply_add_and_drop_columns() -> None:
    after("ADD COLUMN c INT", "id INT PRIMARY KEY, a INT, b VARCHAR(10), c INT")
    after("ADD c INT FIRST", "c INT, id INT PRIMARY KEY, a INT, b VARCHAR(10)")
    after("ADD c INT AFTER ID", "id INT PRIMARY KEY, c INT, a INT, b VARCHAR(10)")
    after("ADD (c INT, d INT)", "id INT PRIMARY KEY, a INT, b VARCHAR(10), c INT, d INT")
    after(
        "ADD c INT AFTER a, ADD d INT AFTER c",
        "id INT PRIMARY KEY, a INT, c INT, d INT, b VARCHAR(10)",
    )
    after("DROP COLUMN a", "id INT PRIMARY KEY, b VARCHAR(10)")
    after(
        "DROP a",
        "id INT, b INT, PRIMARY KEY (id), KEY ab (b)",
        base="id INT, a INT, b INT, PRIMARY KEY (id, a), KEY ab (a, b), KEY ka (a)",
    )
    after("DROP COLUMN a, ADD COLUMN a BIGINT", "id INT PRIMARY KEY, b VARCHAR(10), a BIGINT")


def test_apply_DM_150_modify_and_DM_049_change() -> None:
    after("MODIFY a BIGINT NOT NULL", "id INT PRIMARY KEY, a BIGINT NOT NULL, b VARCHAR(10)")
    after("MODIFY b VARCHAR(20) FIRST", "b VARCHAR(20), id INT PRIMARY KEY, a INT")
    after("MODIFY COLUMN a INT AFTER b", "id INT PRIMARY KEY, b VARCHAR(10), a INT")
    after("CHANGE a c BIGINT", "id INT PRIMARY KEY, c BIGINT, b VARCHAR(10)")
    after("CHANGE id pk INT", "pk INT PRIMARY KEY, a INT, b VARCHAR(10)")
    after("CHANGE a A INT", "id INT PRIMARY KEY, A INT, b VARCHAR(10)")
    after("CHANGE COLUMN a c INT FIRST", "c INT, id INT PRIMARY KEY, b VARCHAR(10)")
    after(
        "RENAME COLUMN a TO c",
        "id INT, c INT NOT NULL, KEY ka (c), PRIMARY KEY (id, c)",
        base="id INT, a INT, KEY ka (a), PRIMARY KEY (id, a)",
    )


def test_apply_DM_130_defaults() -> None:
    after("ALTER a SET DEFAULT '7'", "id INT PRIMARY KEY, a INT DEFAULT 7, b VARCHAR(10)")
    after("ALTER b SET DEFAULT 7", "id INT PRIMARY KEY, a INT, b VARCHAR(10) DEFAULT '7'")
    after("MODIFY a INT DEFAULT 0", "id INT PRIMARY KEY, a INT DEFAULT 0, b VARCHAR(10)")
    after("ALTER COLUMN a DROP DEFAULT", "a INT", base="a INT DEFAULT 1")
    after("ALTER a SET DEFAULT NULL", "a INT", base="a INT DEFAULT 1")


def test_apply_keys() -> None:
    after("ADD INDEX (a), ADD KEY (a)", f"{BASE}, KEY a (a), KEY a_2 (a)")
    after("ADD UNIQUE (b), ADD FULLTEXT ft (b)", f"{BASE}, UNIQUE KEY b (b), FULLTEXT KEY ft (b)")
    after("ADD INDEX ix (a, b), RENAME INDEX ix TO iy", f"{BASE}, KEY iy (a, b)")
    after("ADD INDEX ix (a), DROP INDEX ix", BASE)
    after("DROP PRIMARY KEY", "id INT NOT NULL, a INT, b VARCHAR(10)")
    after(
        "DROP PRIMARY KEY, ADD PRIMARY KEY (a)", "id INT NOT NULL, a INT PRIMARY KEY, b VARCHAR(10)"
    )
    after(
        "ADD PRIMARY KEY (a, b)",
        "a INT NOT NULL, b INT NOT NULL, PRIMARY KEY (a, b)",
        base="a INT, b INT",
    )
    after("ADD COLUMN id INT PRIMARY KEY FIRST", "id INT PRIMARY KEY, a INT", base="a INT")
    applied(
        f"CREATE TABLE t ({BASE})",
        "CREATE INDEX ix ON t (a)",
        expect=f"CREATE TABLE t ({BASE}, KEY ix (a))",
    )
    applied(
        f"CREATE TABLE t ({BASE}, KEY ix (a))",
        "DROP INDEX ix ON t",
        expect=f"CREATE TABLE t ({BASE})",
    )


def test_apply_charsets() -> None:
    # dm-change-utf-charset: the table default changes, existing columns keep theirs.
    utf8 = "CREATE TABLE t (name VARCHAR(10)) DEFAULT CHARSET=utf8mb3 COLLATE=utf8mb3_bin"
    utf8mb4 = "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    applied(
        utf8,
        "ALTER TABLE t CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        expect=f"CREATE TABLE t (name VARCHAR(10) CHARSET utf8mb3 COLLATE utf8mb3_bin) {utf8mb4}",
    )
    applied(
        utf8,
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        expect=f"CREATE TABLE t (name VARCHAR(10)) {utf8mb4}",
    )
    applied(
        utf8,
        "ALTER TABLE t CHARSET latin1",
        "ALTER TABLE t ADD c TEXT, MODIFY name VARCHAR(10)",
        expect="CREATE TABLE t (name VARCHAR(10), c TEXT) CHARSET latin1",
    )
    after("ADD c CHAR(2)", "a VARCHAR(3), c CHAR(2)", base="a VARCHAR(3)")
    applied(
        "CREATE TABLE t (a VARCHAR(3), b INT)",
        "ALTER TABLE t CONVERT TO CHARSET latin1",
        expect="CREATE TABLE t (a VARCHAR(3) CHARSET latin1, b INT) CHARSET latin1",
    )


def test_apply_errors_name_column_and_table() -> None:
    fails("DROP COLUMN nope", "'nope'", "'t'")
    fails("MODIFY nope INT", "'nope'", "'t'")
    fails("CHANGE nope c INT", "'nope'", "'t'")
    fails("ADD COLUMN A INT", "'A'", "already exists", "'t'")
    fails("ADD c INT AFTER nope", "'nope'", "AFTER")
    fails("MODIFY a INT AFTER nope", "'nope'", "AFTER")
    fails("CHANGE a b INT", "'b'", "already exists")
    fails("RENAME COLUMN nope TO c", "'nope'")
    fails("RENAME COLUMN a TO b", "'b'", "already exists")
    fails("ALTER nope SET DEFAULT 1", "'nope'")
    fails("DROP INDEX nope", "index 'nope'", "'t'")
    fails("RENAME INDEX nope TO x", "index 'nope'")
    fails("ADD INDEX ix (nope)", "'nope'")
    fails("ADD PRIMARY KEY (a)", "primary key")
    fails("ADD PRIMARY KEY (nope)", "'nope'", base="a INT")
    fails("DROP PRIMARY KEY", "no primary key", base="a INT")
    fails("ALTER a SET DEFAULT NULL", "'a'", "NOT NULL", base="a INT NOT NULL")
    fails("ADD INDEX ix (a), ADD INDEX ix (b)", "'ix'", "already exists")
    fails("DROP a", "only column", base="a INT")


def test_apply_refuses_non_transforms() -> None:
    schema = parse_create_table(f"CREATE TABLE t ({BASE})")
    for sql in ("RENAME TABLE t TO u", "DROP TABLE t", "TRUNCATE t", "CREATE TABLE u LIKE t"):
        with pytest.raises(SchemaError, match="not a schema transform"):
            apply(parse_ddl(sql)[0], schema)
    with pytest.raises(SchemaError, match="unknown"):
        apply(parse_ddl("ALTER TABLE t ADD a INT")[0], None)


# --- round trip ------------------------------------------------------------------------

ROUND_TRIP = [
    "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20))",
    "CREATE TABLE t (a TINYINT UNSIGNED ZEROFILL, b SMALLINT, c MEDIUMINT, d BIGINT UNSIGNED)",
    "CREATE TABLE t (a DECIMAL(12,4) UNSIGNED, b NUMERIC, c FLOAT, d DOUBLE, e FLOAT(30), f BIT)",
    "CREATE TABLE t (a CHAR(3), b VARCHAR(255) CHARSET latin1 COLLATE latin1_bin, c BINARY(2))",
    "CREATE TABLE t (a TINYTEXT, b TEXT, c MEDIUMTEXT, d LONGTEXT, e TINYBLOB, f BLOB, g LONGBLOB)",
    "CREATE TABLE t (a ENUM('x', 'it''s', 'a,b'), b SET('p', 'q') DEFAULT 'p')",
    "CREATE TABLE t (a DATE, b DATETIME(6), c TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3), d TIME)",
    "CREATE TABLE t (e YEAR NOT NULL DEFAULT 2000, f TIME(3) DEFAULT '10:00:00.000')",
    "CREATE TABLE t (a JSON, b VARBINARY(16))",
    "CREATE TABLE t (a INT NOT NULL DEFAULT -1, b VARCHAR(3) DEFAULT 'x''y', c DOUBLE DEFAULT 1.5)",
    "CREATE TABLE t (a VARCHAR(10) DEFAULT 'back\\\\slash', b TEXT DEFAULT '')",
    "CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, g INT AS (a + 1) STORED)",
    "CREATE TABLE t (a INT, v INT AS (a * 2), w VARCHAR(9) GENERATED ALWAYS AS (CONCAT(a, 'x')))",
    "CREATE TABLE t (a INT, b TEXT, PRIMARY KEY (a), UNIQUE KEY ub (a), KEY (a, b), FULLTEXT (b))",
    "CREATE TABLE t (a INT UNIQUE, b INT, KEY (b), KEY (b))",
    "CREATE TABLE t (a VARCHAR(3), b ENUM('a')) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
    "CREATE TABLE t (a VARCHAR(3) CHARACTER SET utf8 COLLATE utf8_bin) CHARSET latin1",
    "CREATE TABLE t (ts DATETIME DEFAULT NOW(), d DATE DEFAULT '2020-01-01', b BIT DEFAULT b'1')",
    "CREATE TABLE `Odd Name` (`a``b` INT, `Sel` INT, KEY `my key` (`a``b`))",
    "CREATE TABLE t (a INT DEFAULT (RAND() * 10))",
]


@pytest.mark.parametrize("sql", ROUND_TRIP)
def test_round_trip(sql: str) -> None:
    round_trip(sql)
