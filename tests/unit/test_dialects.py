"""A target's table per database dialect (schemas.dialects): types, CREATE TABLE and the
ALTERs still needed, rendered with sqlglot, for hostile names and values too."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from schemas.changes import AddColumn, DropColumn
from schemas.ddl import parse_ddl
from schemas.dialects import (
    DIALECTS,
    DialectConflict,
    alter_statements,
    collation,
    column_type,
    create_table,
    postgres_type,
    widens,
)
from schemas.model import Column, ColumnType, TableSchema

HOSTILE = "a`b'c;--\""
SG = {"mariadb": "mysql", "mysql": "mysql", "postgresql": "postgres"}


def schema_of(sql: str) -> TableSchema:
    (create,) = parse_ddl(sql)
    return create.schema


def specs_of(sql: str) -> tuple:
    (alter,) = parse_ddl(sql)
    return alter.specs


ORDERS = schema_of(
    "CREATE TABLE o (id BIGINT UNSIGNED NOT NULL, `a``b'c;--\"` VARCHAR(10) "
    "CHARACTER SET utf8mb4 DEFAULT 'it''s \\\\ x', n INT NOT NULL DEFAULT 0, "
    "d DECIMAL(10,2) DEFAULT -1.5, ts TIMESTAMP(3) NULL DEFAULT CURRENT_TIMESTAMP(3), "
    "z DATETIME NOT NULL DEFAULT '0000-00-00 00:00:00', e ENUM('a','b') DEFAULT 'a', "
    "j JSON, PRIMARY KEY (id))"
)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_create_table_names_every_column_and_the_key_and_parses_back(dialect):
    sql = create_table(dialect, "sh'op", HOSTILE, ORDERS, ["id"])
    tree = sqlglot.parse_one(sql, read=SG[dialect])
    assert isinstance(tree, exp.Create)
    table = tree.this.this
    assert (table.db, table.name) == ("sh'op", HOSTILE)
    defs = [e for e in tree.this.expressions if isinstance(e, exp.ColumnDef)]
    assert [d.name for d in defs] == [c.name for c in ORDERS.columns]
    (pk,) = [e for e in tree.this.expressions if isinstance(e, exp.PrimaryKey)]
    assert [i.name for i in pk.expressions] == ["id"]
    hostile = defs[1]
    default = hostile.find(exp.DefaultColumnConstraint).this
    assert default.this == "it's \\ x"  # the value MySQL held, in the dialect's own escaping
    zero = defs[5]
    assert zero.find(exp.DefaultColumnConstraint) is None  # a zero date is left out


def test_mysql_keeps_the_shards_type_and_charset_postgres_maps_it_wider():
    mysql = create_table("mysql", None, "t", ORDERS, ["id"])
    assert "BIGINT UNSIGNED NOT NULL" in mysql
    assert "CHARACTER SET utf8mb4" in mysql
    assert "DEFAULT CURRENT_TIMESTAMP(3)" in mysql
    pg = create_table("postgresql", None, "t", ORDERS, ["id"])
    assert '"id" DECIMAL(20, 0) NOT NULL' in pg
    assert '"e" TEXT' in pg and '"j" JSONB' in pg and '"ts" TIMESTAMPTZ(3)' in pg
    assert "CHARACTER SET" not in pg


@pytest.mark.parametrize(
    ("mysql", "pg"),
    [
        ("TINYINT UNSIGNED", "SMALLINT"),
        ("SMALLINT UNSIGNED", "INT"),
        ("MEDIUMINT", "INT"),
        ("INT UNSIGNED", "BIGINT"),
        ("BIGINT", "BIGINT"),
        ("FLOAT", "REAL"),
        ("DOUBLE", "DOUBLE PRECISION"),
        ("YEAR", "SMALLINT"),
        ("LONGBLOB", "BYTEA"),
        ("VARBINARY(8)", "BYTEA"),
        ("BIT(1)", "BOOLEAN"),
        ("SET('x','y')", "TEXT"),
        ("DATETIME(6)", "TIMESTAMP(6)"),
        ("TIME", "INTERVAL"),
    ],
)
def test_postgres_type_holds_every_mysql_value(mysql, pg):
    (col,) = schema_of(f"CREATE TABLE t (c {mysql})").columns
    assert postgres_type(col.type).sql("postgres") == pg


def test_a_spatial_type_has_no_postgres_column():
    with pytest.raises(DialectConflict, match="POINT"):
        postgres_type(ColumnType("POINT"))


def existing(schema: TableSchema) -> dict[str, ColumnType]:
    return {c.key: c.type for c in schema.columns}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_change_already_made_renders_nothing(dialect):
    after = schema_of("CREATE TABLE t (id INT NOT NULL, b VARCHAR(20), PRIMARY KEY (id))")
    specs = specs_of("ALTER TABLE t ADD COLUMN b VARCHAR(20)")
    assert alter_statements(dialect, "db", "t", existing(after), specs, after) == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_add_rename_drop_and_widen_each_once(dialect):
    before = schema_of(
        "CREATE TABLE t (id INT NOT NULL, old INT, gone INT, v VARCHAR(5), PRIMARY KEY (id))"
    )
    specs = specs_of(
        f"ALTER TABLE t RENAME COLUMN old TO `{HOSTILE.replace('`', '``')}`, DROP COLUMN gone, "
        "MODIFY v VARCHAR(50), ADD COLUMN w DECIMAL(12,3) DEFAULT 0.5"
    )
    after = schema_of(
        f"CREATE TABLE t (id INT NOT NULL, `{HOSTILE.replace('`', '``')}` INT, v VARCHAR(50), "
        "w DECIMAL(12,3) DEFAULT 0.5, PRIMARY KEY (id))"
    )
    statements = alter_statements(dialect, "db", "t", existing(before), specs, after)
    trees = [sqlglot.parse_one(s, read=SG[dialect]) for s in statements]
    actions = [type(t.args["actions"][0]).__name__ for t in trees]
    assert actions[0] == "RenameColumn" and trees[0].args["actions"][0].args["to"].name == HOSTILE
    assert actions[1] == "Drop"
    assert [c.name for c in trees[1].args["actions"][0].args["tables"]] == ["gone"]
    assert sorted(actions[2:]) == sorted(
        ["ColumnDef", "ModifyColumn" if SG[dialect] == "mysql" else "AlterColumn"]
    )
    # after it ran (the table has the new columns), nothing is left to do
    done = alter_statements(dialect, "db", "t", existing(after), specs, after)
    assert done == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_change_column_renames_then_widens(dialect):
    before = schema_of("CREATE TABLE t (id INT NOT NULL, a SMALLINT, PRIMARY KEY (id))")
    specs = specs_of("ALTER TABLE t CHANGE a b BIGINT")
    after = schema_of("CREATE TABLE t (id INT NOT NULL, b BIGINT, PRIMARY KEY (id))")
    statements = alter_statements(dialect, None, "t", existing(before), specs, after)
    assert len(statements) == 2
    assert "RENAME COLUMN" in statements[0]
    assert "BIGINT" in statements[1]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_change_of_kind_is_a_conflict_that_names_the_column(dialect):
    before = schema_of("CREATE TABLE t (id INT NOT NULL, a VARCHAR(50), PRIMARY KEY (id))")
    specs = specs_of("ALTER TABLE t MODIFY a INT")
    after = schema_of("CREATE TABLE t (id INT NOT NULL, a INT, PRIMARY KEY (id))")
    with pytest.raises(DialectConflict, match=r"column 'a'.*by hand"):
        alter_statements(dialect, None, "t", existing(before), specs, after)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_narrowing_in_one_family_is_left_to_the_database_to_check(dialect):
    before = schema_of(
        "CREATE TABLE t (id INT NOT NULL, a VARCHAR(20), n BIGINT, PRIMARY KEY (id))"
    )
    specs = specs_of("ALTER TABLE t MODIFY a VARCHAR(10), MODIFY n INT")
    after = schema_of("CREATE TABLE t (id INT NOT NULL, a VARCHAR(10), n INT, PRIMARY KEY (id))")
    statements = alter_statements(dialect, None, "t", existing(before), specs, after)
    assert len(statements) == 2
    assert all("USING" not in s for s in statements)  # PostgreSQL: the assignment cast checks


@pytest.mark.parametrize("dialect", DIALECTS)
def test_enum_and_set_members_appended_or_reordered_keep_every_value(dialect):
    members = "'plain','c\\\\d','it''s','end\\\\'"
    before = schema_of(
        f"CREATE TABLE t (id INT NOT NULL, e ENUM({members}), s SET('a','b'), PRIMARY KEY (id))"
    )
    specs = specs_of(
        f"ALTER TABLE t MODIFY e ENUM({members},'new\\\\one'), MODIFY s SET('b','a','c')"
    )
    after = schema_of(
        f"CREATE TABLE t (id INT NOT NULL, e ENUM({members},'new\\\\one'), s SET('b','a','c'), "
        "PRIMARY KEY (id))"
    )
    assert after.column("e").type.members[-1] == "new\\one"
    statements = alter_statements(dialect, None, "t", existing(before), specs, after)
    # MySQL's MODIFY of each; PostgreSQL's TEXT holds either already
    assert len(statements) == (0 if dialect == "postgresql" else 2)
    # a member taken away is a change of values: the operator's
    gone = schema_of(
        "CREATE TABLE t (id INT NOT NULL, e ENUM('plain'), s SET('a','b'), PRIMARY KEY (id))"
    )
    specs = specs_of("ALTER TABLE t MODIFY e ENUM('plain')")
    if dialect != "postgresql":
        with pytest.raises(DialectConflict, match=r"column 'e'"):
            alter_statements(dialect, None, "t", existing(before), specs, gone)


def test_widening_rules_follow_the_values_each_type_holds():
    def t(sql: str) -> ColumnType:
        return schema_of(f"CREATE TABLE t (c {sql})").columns[0].type

    assert widens(t("INT"), t("BIGINT"), "mysql")
    assert widens(t("INT"), t("DOUBLE"), "postgresql")  # exact in 53 bits
    assert not widens(t("BIGINT"), t("DOUBLE"), "mysql")
    assert not widens(t("INT"), t("FLOAT"), "mysql")
    assert not widens(t("BIGINT"), t("INT"), "mysql")
    assert not widens(t("INT"), t("INT UNSIGNED"), "mysql")  # negatives
    assert widens(t("INT UNSIGNED"), t("BIGINT"), "mysql")
    assert widens(t("INT UNSIGNED"), t("BIGINT"), "postgresql")
    assert widens(t("DECIMAL(10,2)"), t("DECIMAL(12,3)"), "mysql")
    assert not widens(t("DECIMAL(10,2)"), t("DECIMAL(10,3)"), "mysql")
    assert widens(t("VARCHAR(10)"), t("TEXT"), "mysql")
    assert not widens(t("TEXT"), t("VARCHAR(10)"), "postgresql")
    assert widens(t("TINYINT UNSIGNED"), t("SMALLINT UNSIGNED"), "postgresql")


def test_an_unknown_dialect_is_refused_by_name():
    with pytest.raises(ValueError, match="oracle"):
        column_type(ColumnType("INT"), "oracle")  # type: ignore[arg-type]


def test_a_key_that_is_not_a_column_is_refused():
    with pytest.raises(ValueError, match="shard"):
        create_table("mysql", None, "t", ORDERS, ["id", "shard"])


def test_shard_columns_join_the_table_and_its_key():
    shard = Column("_source_db", ColumnType("VARCHAR", length=64), nullable=False)
    sql = create_table("postgresql", None, "t", ORDERS, ["_source_db", "id"], extra=[shard])
    assert '"_source_db" VARCHAR(64) NOT NULL' in sql
    assert 'PRIMARY KEY ("_source_db", "id")' in sql


def test_a_column_added_then_dropped_in_one_decision_renders_nothing():
    after = schema_of("CREATE TABLE t (id INT NOT NULL, PRIMARY KEY (id))")
    specs = (AddColumn(Column("x", ColumnType("INT"))), DropColumn("x"))
    assert alter_statements("mysql", None, "t", existing(after), specs, after) == []


@pytest.mark.parametrize(
    ("name", "mariadb"),
    [
        ("utf8mb4_0900_ai_ci", "utf8mb4_uca1400_nopad_ai_ci"),
        ("UTF8MB4_0900_AS_CS", "utf8mb4_uca1400_nopad_as_cs"),
        ("utf8mb4_0900_as_ci", "utf8mb4_uca1400_nopad_as_ci"),
        ("utf8mb4_0900_bin", "utf8mb4_nopad_bin"),
        ("utf8mb4_de_pb_0900_ai_ci", "utf8mb4_uca1400_german2_nopad_ai_ci"),
        ("utf8mb4_es_trad_0900_as_cs", "utf8mb4_uca1400_spanish2_nopad_as_cs"),
        ("utf8mb4_ja_0900_as_cs_ks", "utf8mb4_uca1400_nopad_as_cs"),  # no tailoring: the root
        ("utf8mb4_general_ci", "utf8mb4_general_ci"),
        ("latin1_swedish_ci", "latin1_swedish_ci"),
        ("utf8mb4_0900_ai_ci_x", "utf8mb4_0900_ai_ci_x"),  # not one of MySQL's: as it is
    ],
)
def test_mysql8_collations_are_named_as_mariadb_names_them(name: str, mariadb: str) -> None:
    assert collation(name, "mariadb") == mariadb
    assert collation(name, "mysql") == name


def test_a_name_postgresql_would_cut_is_a_conflict_that_names_it() -> None:
    """PostgreSQL keeps 63 bytes of a name (MySQL's limit is 64 characters): a longer one
    is refused by name, at CREATE and at ALTER, never cut silently."""
    fits, long = "c" * 63, "c" * 64
    wide_fits, wide_long = "列" * 21, "列" * 22  # 63 and 66 bytes in UTF-8
    schema = TableSchema(
        (Column("id", ColumnType("INT")), Column(fits, ColumnType("INT")),
         Column(wide_fits, ColumnType("INT"))),
        ("id",),
    )  # fmt: skip
    create_table("postgresql", "db", "t", schema, ["id"])
    for name in (long, wide_long):
        bad = TableSchema(
            (Column("id", ColumnType("INT")), Column(name, ColumnType("INT"))), ("id",)
        )
        with pytest.raises(DialectConflict, match=r"column of 't' '[^']+' is (64|66) bytes"):
            create_table("postgresql", "db", "t", bad, ["id"])
        create_table("mariadb", "db", "t", bad, ["id"])  # MySQL's own limit: kept
        with pytest.raises(DialectConflict, match="PostgreSQL keeps 63 bytes"):
            alter_statements("postgresql", "db", "t", {"id": ColumnType("INT")}, (), bad)
    with pytest.raises(DialectConflict, match="table"):
        create_table("postgresql", "db", "t" * 64, schema, ["id"])


def test_types_a_database_table_cannot_take_are_conflicts_that_name_them() -> None:
    """A spatial column (the job keeps its WKB without the SRID a database's geometry
    needs: MariaDB refuses the bytes) is refused on every database, at CREATE and ALTER;
    MariaDB's own INET4 and INET6 (from a MariaDB shard) are kept on MariaDB and refused
    on MySQL, which has no such type."""
    for spatial in ("POINT", "GEOMETRY", "MULTIPOLYGON"):
        schema = TableSchema(
            (Column("id", ColumnType("INT")), Column("g", ColumnType(spatial))), ("id",)
        )
        for dialect in DIALECTS:
            with pytest.raises(DialectConflict, match=spatial):
                create_table(dialect, "db", "t", schema, ["id"])
            with pytest.raises(DialectConflict, match=spatial):
                alter_statements(dialect, "db", "t", {"id": ColumnType("INT")}, (), schema)
    inet = ColumnType("INET6")
    assert column_type(inet, "mariadb").sql("mysql") == "INET6"
    with pytest.raises(DialectConflict, match=r"INET6 \(MariaDB's\) has no mysql column"):
        column_type(inet, "mysql")
    assert column_type(ColumnType("UUID"), "mariadb").sql("mysql") == "UUID"
    with pytest.raises(DialectConflict, match="UUID"):
        column_type(ColumnType("UUID"), "mysql")


@pytest.mark.parametrize(
    ("current", "wanted", "safe"),
    [
        ("ENUM('red','green','orange')", "VARCHAR(32)", True),  # gh-ost's own test
        ("ENUM('red','green','orange')", "VARCHAR(6)", True),
        ("ENUM('red','green','orange')", "VARCHAR(5)", False),  # 'orange' would not fit
        ("ENUM('red','green','orange')", "CHAR(6)", True),
        ("ENUM('é')", "TINYTEXT", True),
        ("SET('a','bb')", "VARCHAR(4)", True),  # 'a,bb'
        ("SET('a','bb')", "VARCHAR(3)", False),
        ("ENUM('a')", "INT", False),  # a member is no number
    ],
)
def test_an_enum_or_set_becomes_text_that_holds_its_longest_value(
    current: str, wanted: str, safe: bool
) -> None:
    from schemas.ddl import parse_type
    from schemas.dialects import changes_safely

    have, want = parse_type(current), parse_type(wanted)
    assert changes_safely(have, want, "mariadb") is safe
    assert widens(have, want, "mysql") is safe
