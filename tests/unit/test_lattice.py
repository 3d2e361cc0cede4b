"""The schema lattice: type order one line per case, laws on every row, laws by hypothesis
over the primitives and over random types, columns and tables, and ``diff``.

Reference: shared/reference/shard-ddl-semantics.md, "Optimistic mode" / "Type order".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import column_types, columns, families, tables

from schemas._lattice_primitives import (
    Bool,
    Field,
    Lattice,
    Map,
    Maybe,
    Poset,
    Prefix,
    Singleton,
    Tuple,
    Widening,
)
from schemas.changes import AddColumn, DropColumn, ModifyColumn, Position, TableOptions
from schemas.errors import Incompatible
from schemas.lattice import _CHARSETS, _COLUMNS, _FILL, _TYPES, compare, diff, join
from schemas.model import IMPLICIT_DEFAULT, Column, ColumnType, Index, TableSchema

T = TypeVar("T")

# --- tiny builders -----------------------------------------------------------------------

_TYPE_RE = re.compile(r"^\s*(\w+)\s*(?:\((.*?)\))?\s*(.*)$")


def ty(text: str) -> ColumnType:
    """``DECIMAL(10,2) UNSIGNED``, ``VARCHAR(10) CHARSET latin1 COLLATE latin1_bin``,
    ``ENUM('a','b')`` -> ColumnType (a test helper, not the DDL parser)."""
    m = _TYPE_RE.match(text)
    assert m, text
    base, args, rest = m.group(1).upper(), m.group(2), m.group(3).split()
    kw: dict[str, Any] = {}
    if base in ("ENUM", "SET"):
        kw["members"] = tuple(re.findall(r"'([^']*)'", args or ""))
    elif args:
        nums = [int(x) for x in args.split(",")]
        kw["length"] = nums[0]
        if len(nums) > 1:
            kw["scale"] = nums[1]
    words = iter(rest)
    for word in words:
        w = word.upper()
        if w in ("UNSIGNED", "ZEROFILL"):
            kw[w.lower()] = True
        elif w == "CHARSET":
            kw["charset"] = next(words)
        elif w == "COLLATE":
            kw["collation"] = next(words)
        else:
            raise AssertionError(f"unknown word {word!r} in {text!r}")
    return ColumnType(base, **kw)


def col(name: str, type_text: str = "INT", **kw: Any) -> Column:
    return Column(name, ty(type_text), **kw)


def tbl(*cols: Column, **kw: Any) -> TableSchema:
    return TableSchema(columns=cols, **kw)


def one(type_text: str, **kw: Any) -> TableSchema:
    """A table of one column ``c``: comparing two of them compares the column."""
    return tbl(col("c", type_text, **kw))


def outcome(f: Callable[[], T]) -> T | None:
    try:
        return f()
    except Incompatible:
        return None


def check_table_laws(a: TableSchema, b: TableSchema) -> None:
    """The laws on one pair (run on every row of the case tables)."""
    ab, ba = outcome(lambda: compare(a, b)), outcome(lambda: compare(b, a))
    assert (ab is None) == (ba is None) and (ab is None or ba is None or ab == -ba), (ab, ba)
    jab, jba = outcome(lambda: join(a, b)), outcome(lambda: join(b, a))
    assert (jab is None) == (jba is None)
    if jab is not None and jba is not None:
        assert same_table(jab, jba)
        assert compare(jab, a) >= 0 and compare(jab, b) >= 0
    assert (ab is not None and ab <= 0) == (jab is not None and compare(jab, b) == 0)


def same_table(x: TableSchema, y: TableSchema) -> bool:
    return compare(x, y) == 0 and {c.key for c in x.columns} == {c.key for c in y.columns}


# --- the type order, one line per case ---------------------------------------------------


def order(a: str, b: str, expected: int | None) -> Any:
    """compare(a, b) == expected (None: incompatible) for a column ``c`` of each type."""
    return pytest.param(a, b, expected, id=f"{a} ? {b}")


TYPE_ORDER = [
    order("TINYINT", "SMALLINT", -1),
    order("SMALLINT", "MEDIUMINT", -1),
    order("MEDIUMINT", "INT", -1),
    order("INT", "BIGINT", -1),
    order("BIGINT", "TINYINT", 1),
    order("INT", "INT", 0),
    order("INT", "INT UNSIGNED", None),
    order("TINYINT UNSIGNED", "BIGINT UNSIGNED", -1),
    order("INT UNSIGNED", "BIGINT", None),
    order("INT ZEROFILL", "INT", None),
    order("INT", "VARCHAR(10)", None),
    order("INT", "DOUBLE", None),
    order("INT", "DECIMAL(10,0)", None),
    order("VARCHAR(10)", "VARCHAR(20)", -1),
    order("CHAR(10)", "CHAR(5)", 1),
    order("CHAR", "CHAR(1)", 0),
    order("CHAR(10)", "VARCHAR(10)", None),
    order("BINARY(4)", "BINARY(8)", -1),
    order("VARBINARY(4)", "VARBINARY(2)", 1),
    order("VARBINARY(4)", "VARCHAR(4)", None),
    order("BIT(1)", "BIT(8)", -1),
    order("BIT", "BIT(1)", 0),
    order("DATETIME", "DATETIME(3)", -1),
    order("TIMESTAMP(6)", "TIMESTAMP(3)", 1),
    order("TIME(0)", "TIME", 0),
    order("DATETIME", "TIMESTAMP", None),
    order("DECIMAL(10,2)", "DECIMAL(12,2)", -1),
    order("DECIMAL(10,2)", "DECIMAL(11,3)", -1),
    order("DECIMAL(5,2)", "DECIMAL(7,4)", -1),
    order("DECIMAL(10,2)", "DECIMAL(10,4)", None),
    order("DECIMAL", "DECIMAL(10,0)", 0),
    order("DECIMAL(10,2) UNSIGNED", "DECIMAL(10,2)", None),
    order("FLOAT", "DOUBLE", -1),
    order("DOUBLE", "DECIMAL(10,2)", None),
    order("TINYTEXT", "TEXT", -1),
    order("TEXT", "MEDIUMTEXT", -1),
    order("LONGTEXT", "MEDIUMTEXT", 1),
    order("TINYBLOB", "BLOB", -1),
    order("MEDIUMBLOB", "LONGBLOB", -1),
    order("TEXT", "BLOB", None),
    order("VARCHAR(10)", "TEXT", None),
    order("ENUM('a','b')", "ENUM('a','b','c')", -1),
    order("ENUM('a','b','c')", "ENUM('a')", 1),
    order("ENUM('a','b')", "ENUM('b','a')", None),
    order("ENUM('a','b')", "ENUM('a','c')", None),
    order("SET('a')", "SET('a','b')", -1),
    order("ENUM('a')", "SET('a')", None),
    order("DATE", "DATE", 0),
    order("DATE", "DATETIME", None),
    order("YEAR", "DATE", None),
    order("JSON", "TEXT", None),
    order("VARCHAR(10)", "VARCHAR(10) CHARSET latin1", -1),
    order("VARCHAR(10) CHARSET latin1", "VARCHAR(10) CHARSET utf8mb4", -1),
    order("VARCHAR(10) CHARSET utf8mb3", "VARCHAR(10) CHARSET utf8mb4", -1),
    order("VARCHAR(10) CHARSET utf8", "VARCHAR(10) CHARSET utf8mb4", -1),
    order("VARCHAR(10) CHARSET utf8", "VARCHAR(10) CHARSET utf8mb3", 0),
    order("VARCHAR(10) CHARSET latin1", "VARCHAR(10) CHARSET utf8mb3", None),
    order("VARCHAR(10) CHARSET ascii", "VARCHAR(10) CHARSET utf8mb4", None),
    order("TEXT CHARSET utf8mb4", "TEXT CHARSET latin1", 1),
    order("VARCHAR(10)", "VARCHAR(10) COLLATE utf8mb4_bin", -1),
    order("VARCHAR(10) COLLATE utf8mb3_bin", "VARCHAR(10) COLLATE utf8mb4_bin", -1),
    order("VARCHAR(10) COLLATE utf8_bin", "VARCHAR(10) COLLATE utf8mb4_bin", -1),
    order("VARCHAR(10) COLLATE latin1_bin", "VARCHAR(10) COLLATE utf8mb4_bin", -1),
    order("VARCHAR(10) COLLATE utf8mb4_bin", "VARCHAR(10) COLLATE utf8mb4_general_ci", None),
    order("VARCHAR(10) COLLATE latin1_swedish_ci", "VARCHAR(10) COLLATE utf8mb4_bin", None),
    order("VARCHAR(20) CHARSET latin1", "VARCHAR(10) CHARSET utf8mb4", None),
    order("VARCHAR(20) CHARSET utf8mb4", "VARCHAR(10) CHARSET latin1", 1),
]


@pytest.mark.parametrize(("a", "b", "expected"), TYPE_ORDER)
def test_type_order(a: str, b: str, expected: int | None) -> None:
    x, y = one(a), one(b)
    if expected is None:
        with pytest.raises(Incompatible, match=r'^at column "c": '):
            compare(x, y)
    else:
        assert compare(x, y) == expected
        if expected <= 0:
            assert same_table(join(x, y), y)
    check_table_laws(x, y)


def joined(a: str, b: str, result: str | None) -> Any:
    """join(a, b) has type ``result`` (None: no upper bound)."""
    return pytest.param(a, b, result, id=f"{a} v {b}")


TYPE_JOIN = [
    joined("TINYINT", "BIGINT", "BIGINT"),
    joined("INT", "VARCHAR(10)", None),
    joined("INT", "INT UNSIGNED", None),
    joined("INT ZEROFILL", "BIGINT ZEROFILL", "BIGINT ZEROFILL"),
    joined("FLOAT", "DOUBLE", "DOUBLE"),
    joined("CHAR", "CHAR(5)", "CHAR(5)"),
    joined("CHAR(5)", "CHAR", "CHAR(5)"),
    joined("DATETIME(6)", "DATETIME", "DATETIME(6)"),
    joined("DECIMAL(10,2)", "DECIMAL(12,1)", "DECIMAL(13,2)"),
    joined("DECIMAL(10,2)", "DECIMAL(10,4)", "DECIMAL(12,4)"),
    joined("DECIMAL", "DECIMAL(5,2)", "DECIMAL(12,2)"),
    joined("DECIMAL(65,0)", "DECIMAL(65,30)", None),
    joined("DECIMAL(40,0)", "DECIMAL(30,25)", "DECIMAL(65,25)"),
    joined("MEDIUMBLOB", "TINYBLOB", "MEDIUMBLOB"),
    joined("TEXT", "BLOB", None),
    joined("ENUM('a')", "ENUM('a','b')", "ENUM('a','b')"),
    joined("ENUM('a','b')", "ENUM('a','c')", None),
    joined("CHAR(20) CHARSET latin1", "CHAR(10) CHARSET utf8mb4", "CHAR(20) CHARSET utf8mb4"),
    joined("VARCHAR(1) CHARSET latin1", "VARCHAR(1) CHARSET utf8mb3", "VARCHAR(1) CHARSET utf8mb4"),
    joined("VARCHAR(1) CHARSET utf8", "VARCHAR(9) CHARSET utf8mb3", "VARCHAR(9) CHARSET utf8mb3"),
    joined("VARCHAR(9) CHARSET utf8", "VARCHAR(1) CHARSET utf8mb4", "VARCHAR(9) CHARSET utf8mb4"),
    joined("CHAR(9) COLLATE utf8_bin", "CHAR COLLATE utf8mb3_bin", "CHAR(9) COLLATE utf8_bin"),
    joined("VARCHAR(1) CHARSET ascii", "VARCHAR(1) CHARSET latin1", None),
    joined("CHAR COLLATE latin1_bin", "CHAR COLLATE utf8_bin", "CHAR COLLATE utf8mb4_bin"),
    joined("VARCHAR(1) COLLATE utf8mb4_bin", "VARCHAR(1) COLLATE utf8mb4_general_ci", None),
    joined("VARCHAR(1)", "VARCHAR(1) COLLATE utf8mb4_bin", "VARCHAR(1) COLLATE utf8mb4_bin"),
]


@pytest.mark.parametrize(("a", "b", "result"), TYPE_JOIN)
def test_type_join(a: str, b: str, result: str | None) -> None:
    x, y = one(a), one(b)
    if result is None:
        with pytest.raises(Incompatible, match=r'^at column "c": '):
            join(x, y)
    else:
        got = join(x, y).columns[0].type
        assert got == ty(result), got.to_sql()
    check_table_laws(x, y)


def test_type_messages() -> None:
    with pytest.raises(Incompatible) as e:
        compare(one("INT"), one("VARCHAR(10)"))
    assert str(e.value) == 'at column "c": INT vs VARCHAR(10)'
    assert e.value.path == ('column "c"',) and e.value.detail == "INT vs VARCHAR(10)"
    price = tbl(col("price", "DECIMAL(10,2)"))
    with pytest.raises(
        Incompatible, match=r'^at column "price": DECIMAL\(10,2\) vs DECIMAL\(10,4\)$'
    ):
        compare(price, tbl(col("price", "DECIMAL(10,4)")))
    with pytest.raises(Incompatible, match=r"COLLATE utf8mb4_bin vs .* COLLATE utf8mb4_general_ci"):
        join(one("VARCHAR(1) COLLATE utf8mb4_bin"), one("VARCHAR(1) COLLATE utf8mb4_general_ci"))
    with pytest.raises(Incompatible, match="exceeds MySQL's maximum precision 65"):
        join(one("DECIMAL(65,0)"), one("DECIMAL(65,30)"))


# --- columns: nullability, defaults, generated, absence ----------------------------------


def corder(a: Column, b: Column, expected: int | None, result: Column | None = None) -> Any:
    """compare of two tables of one column; ``result`` is the expected join when given."""
    return pytest.param(a, b, expected, result, id=f"{a.to_sql()} ? {b.to_sql()}")


NN: dict[str, Any] = {"nullable": False}
COLUMN_ORDER = [
    corder(col("c", **NN), col("c"), -1),
    corder(col("c"), col("c", default="0"), -1),
    corder(col("c", **NN), col("c", **NN, default="0"), -1),
    corder(col("c", default="0"), col("c", default="-1"), None),
    corder(col("c", **NN, default="0"), col("c", **NN, default="-1"), None),
    corder(col("c", **NN, default="0"), col("c"), None, col("c", default="0")),
    corder(col("c", **NN), col("c", **NN, default=IMPLICIT_DEFAULT), -1),
    corder(col("c", **NN, default=IMPLICIT_DEFAULT), col("c", **NN, default="0"), -1),
    corder(col("c", default=IMPLICIT_DEFAULT), col("c", default="0"), -1),
    corder(col("c", default=IMPLICIT_DEFAULT), col("c"), 1),
    # The refinement documented in schemas/lattice.py: keeps join(absent, c NOT NULL) least.
    corder(col("c", **NN, default=IMPLICIT_DEFAULT), col("c"), -1),
    corder(col("c", "BIGINT", **NN), col("c", "INT"), None, col("c", "BIGINT")),
    corder(col("c", "BIGINT", **NN), col("c", "INT", **NN), 1),
    corder(col("c", generated="`a` + 1"), col("c", generated="`a` + 2"), None),
    corder(col("c", generated="`a` + 1"), col("c"), None),
    corder(col("c", generated="`a` + 1", stored=True), col("c", generated="`a` + 1"), None),
    corder(col("c", auto_increment=True), col("c"), None),
]


@pytest.mark.parametrize(("a", "b", "expected", "result"), COLUMN_ORDER)
def test_column_order(a: Column, b: Column, expected: int | None, result: Column | None) -> None:
    x, y = tbl(a), tbl(b)
    assert outcome(lambda: compare(x, y)) == expected
    if result is not None:
        assert join(x, y).columns == (result,)
    check_table_laws(x, y)


def test_column_messages() -> None:
    with pytest.raises(Incompatible) as e:
        compare(tbl(col("c", default="0")), tbl(col("c", default="-1")))
    assert str(e.value) == 'at column "c": INT NULL DEFAULT 0 vs INT NULL DEFAULT -1'
    with pytest.raises(Incompatible, match=r'^at column "c": BIGINT NOT NULL vs INT NULL$'):
        compare(tbl(col("c", "BIGINT", **NN)), tbl(col("c", "INT")))


ID = col("id", **NN)


def test_present_column_with_default_is_larger_than_absent() -> None:
    base = tbl(ID, primary_key=("id",))
    for c in (
        col("c"),
        col("c", **NN, default="0"),
        col("c", **NN, generated="`id` + 1"),
        col("c", default=IMPLICIT_DEFAULT),
    ):
        wide = tbl(ID, c, primary_key=("id",))
        assert compare(wide, base) == 1 and compare(base, wide) == -1
        assert join(base, wide) == wide
        check_table_laws(base, wide)


def test_not_null_without_default_vs_absent() -> None:
    base = tbl(ID, primary_key=("id",))
    wide = tbl(ID, col("c", **NN), primary_key=("id",))
    with pytest.raises(Incompatible) as e:
        compare(wide, base)
    assert str(e.value) == 'at column "c": NOT NULL without default vs absent'
    with pytest.raises(Incompatible) as e:
        compare(base, wide)
    assert str(e.value) == 'at column "c": absent vs NOT NULL without default'
    expected = (ID, col("c", **NN, default=IMPLICIT_DEFAULT))
    assert join(base, wide).columns == expected
    assert join(wide, base).columns == expected
    assert join(wide, base).columns[1].fill_sql() == "0"
    check_table_laws(base, wide)


def test_absent_then_nullable_is_associative() -> None:
    # Without the NOT NULL DEFAULT <implicit> < NULL refinement these two would differ.
    absent = tbl(ID)
    not_null, nullable = tbl(ID, col("c", **NN)), tbl(ID, col("c"))
    left = join(join(absent, not_null), nullable)
    right = join(absent, join(not_null, nullable))
    assert left == right == nullable


# --- tables ------------------------------------------------------------------------------


def test_column_order_is_ignored_and_join_keeps_a_then_b() -> None:
    ab = tbl(col("a"), col("b"))
    ba = tbl(col("b"), col("a"))
    assert compare(ab, ba) == 0
    assert join(ab, ba).column_names() == ("a", "b")
    ac = tbl(col("c"), col("a"))
    assert join(ab, ac).column_names() == ("a", "b", "c")
    assert join(ac, ab).column_names() == ("c", "a", "b")


def test_tables_with_different_extra_columns_have_no_order_but_a_join() -> None:
    ab, ac = tbl(col("a"), col("b")), tbl(col("a"), col("c"))
    with pytest.raises(Incompatible) as e:
        compare(ab, ac)
    assert e.value.path in (('column "b"',), ('column "c"',))
    assert str(e.value) == (
        'at column "c": absent vs INT NULL, while column "b" is INT NULL vs absent'
    )
    check_table_laws(ab, ac)


def test_column_names_are_case_insensitive_and_join_keeps_a_spelling() -> None:
    upper, lower = tbl(col("C", "BIGINT")), tbl(col("c", "INT"), col("d"))
    assert compare(upper, tbl(col("c", "BIGINT"))) == 0
    assert join(upper, lower).column_names() == ("C", "d")
    assert join(lower, upper).column_names() == ("c", "d")
    assert join(lower, upper).columns[0].type == ty("BIGINT")


def test_primary_key_must_match() -> None:
    x = tbl(ID, col("x", **NN), primary_key=("id",))
    y = tbl(ID, col("x", **NN), primary_key=("id", "x"))
    for f in (compare, join):
        with pytest.raises(Incompatible) as e:
            f(x, y)
        assert str(e.value) == "at primary key: (id) vs (id, x)"
    assert compare(x, tbl(col("ID", **NN), col("x", **NN), primary_key=("Id",))) == 0


def test_table_charset_and_collation() -> None:
    cols = (col("a"),)
    latin1, utf8 = tbl(*cols, charset="latin1"), tbl(*cols, charset="utf8")
    with pytest.raises(Incompatible) as e:
        compare(latin1, utf8)
    assert str(e.value) == "at table charset: latin1 vs utf8mb3"
    assert join(latin1, utf8).charset == "utf8mb4"
    assert compare(latin1, tbl(*cols, charset="utf8mb4")) == -1
    assert compare(tbl(*cols), latin1) == -1
    assert compare(utf8, tbl(*cols, charset="UTF8MB3")) == 0
    with pytest.raises(Incompatible, match=r"^at table collation: "):
        compare(tbl(*cols, collation="utf8mb4_bin"), tbl(*cols, collation="utf8mb4_general_ci"))
    assert compare(tbl(*cols, collation="utf8_bin"), tbl(*cols, collation="utf8mb4_bin")) == -1
    j = join(tbl(*cols, collation="latin1_bin"), tbl(*cols, collation="utf8mb3_bin"))
    assert j.collation == "utf8mb4_bin"
    # Columns larger on one side, charset on the other: no order, but a join.
    wide = tbl(col("a"), col("b"), charset="latin1")
    narrow = tbl(col("a"), charset="utf8mb4")
    with pytest.raises(Incompatible) as e:
        compare(wide, narrow)
    assert (
        str(e.value)
        == 'at table charset: latin1 vs utf8mb4, while column "b" is INT NULL vs absent'
    )
    assert e.value.path == ("table charset",)
    assert join(wide, narrow) == tbl(col("a"), col("b"), charset="utf8mb4")


def test_indexes_never_block_and_join_keeps_common_ones() -> None:
    ia, ib = Index("ia", ("a",)), Index("ib", ("b",), "UNIQUE")
    cols = (col("a"), col("b"))
    x = tbl(*cols, indexes=(ia, ib))
    y = tbl(*cols, indexes=(Index("IB", ("B",), "UNIQUE"), Index("ia", ("a", "b"))))
    assert compare(x, y) == 0
    assert join(x, y).indexes == (ib,)
    assert join(x, tbl(*cols)).indexes == ()
    assert join(x, tbl(*cols, indexes=(ib, ia))).indexes == (ia, ib)


def test_name_is_not_compared_and_join_keeps_a_name() -> None:
    x, y = tbl(col("a"), name="t_1"), tbl(col("a"), col("b"), name="t_2")
    assert compare(x, x.renamed("other")) == 0
    assert join(x, y).name == "t_1"
    assert join(y, x).name == "t_2"


def test_fast_path_returns_the_larger_input_itself() -> None:
    small, big = tbl(col("a", "INT")), tbl(col("a", "BIGINT"), col("b"), indexes=())
    assert join(big, big) is big
    assert join(big, small) is big
    assert join(big, tbl(col("a", "BIGINT"), name="x")) is big


# --- laws by hypothesis ------------------------------------------------------------------

LAWS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # the same examples every run: the coverage counts below cannot flake
    derandomize=True,
)
_BOTTOM = object()


def check_laws(
    lat: Lattice[Any], a: Any, b: Any, c: Any, same: Callable[[Any, Any], bool] | None = None
) -> Counter[str]:
    """Every law on a triple; returns which outcomes the pair (a, b) exercised."""
    eq = same or (lambda x, y: x == y)

    def cmp(x: Any, y: Any) -> int | None:
        return outcome(lambda: lat.compare(x, y))

    def jn(x: Any, y: Any) -> Any:
        try:
            return lat.join(x, y)
        except Incompatible:
            return _BOTTOM

    assert cmp(a, a) == 0
    assert eq(lat.join(a, a), a)
    ab, ba = cmp(a, b), cmp(b, a)
    assert (ab is None) == (ba is None), (a, b, ab, ba)
    assert ab is None or ba is None or ab == -ba
    jab, jba = jn(a, b), jn(b, a)
    assert (jab is _BOTTOM) == (jba is _BOTTOM), (a, b)
    if jab is not _BOTTOM:
        assert eq(jab, jba)
        assert cmp(jab, a) in (0, 1) and cmp(jab, b) in (0, 1), (a, b, jab)
        # least: an upper bound of both is above the join
        if cmp(a, c) in (-1, 0) and cmp(b, c) in (-1, 0):
            assert cmp(jab, c) in (-1, 0), (a, b, c, jab)
    assert (ab is not None and ab <= 0) == (jab is not _BOTTOM and cmp(jab, b) == 0)
    jbc = jn(b, c)
    left = _BOTTOM if jab is _BOTTOM else jn(jab, c)
    right = _BOTTOM if jbc is _BOTTOM else jn(a, jbc)
    assert (left is _BOTTOM) == (right is _BOTTOM), (a, b, c)
    if left is not _BOTTOM:
        assert eq(left, right), (left, right)
    return Counter(
        {
            "incompatible": ab is None,
            "ordered": ab in (-1, 1),
            "equivalent": ab == 0,
            "joined": ab is None and jab is not _BOTTOM,
            "no join": jab is _BOTTOM,
        }
    )


def triples(s: st.SearchStrategy[T]) -> st.SearchStrategy[tuple[T, T, T]]:
    return st.tuples(s, s, s)


def _words(n: int) -> st.SearchStrategy[tuple[str, ...]]:
    return st.lists(st.sampled_from("ab"), max_size=n).map(tuple)


class _IntEntry:
    """A Map value for the primitive law test: a Widening int, larger than its absence
    when positive (as a column is when it has a default)."""

    compare = Widening().compare
    join = Widening().join

    def absent_conflict(self, value: int) -> str | None:
        return None if value > 0 else "zero"

    def join_absent(self, value: int) -> int:
        return max(value, 1)

    def describe(self, value: int) -> str:
        return str(value)


_MAP: Map[int] = Map(_IntEntry(), lambda v: f"entry {v}")
_TUPLE = Tuple(Field(Widening(), "w"), Field(Singleton[int](), "s"), Field(Prefix(), "p"))
_POSET_VALUES = st.sampled_from(["latin1", "utf8mb3", "utf8mb4", "ascii", "x"])
_FILL_VALUES = st.sampled_from(sorted(_FILL._up))

_TOTAL = ("ordered", "equivalent")  # a total order: never incompatible
_ALL = ("ordered", "equivalent", "incompatible", "joined")
_PARTIAL = ("ordered", "no join")
PRIMITIVES: list[tuple[str, Lattice[Any], st.SearchStrategy[Any], tuple[str, ...]]] = [
    ("Bool", Bool(), st.booleans(), _TOTAL),
    ("Widening", Widening(), st.integers(0, 4), _TOTAL),
    ("Singleton", Singleton[int](), st.integers(0, 2), ("equivalent", "no join")),
    ("Maybe(Widening)", Maybe(Widening()), st.none() | st.integers(0, 3), _TOTAL),
    (
        "Maybe(Singleton)",
        Maybe(Singleton[int]()),
        st.none() | st.integers(0, 2),
        ("ordered", "no join"),
    ),
    ("Prefix", Prefix(), _words(3), ("ordered", "no join")),
    ("Poset(charsets)", _CHARSETS, _POSET_VALUES, (*_ALL, "no join")),
    ("Poset(fill)", _FILL, _FILL_VALUES, _ALL),
    ("Poset(diamond)", Poset({"0": "xy", "x": "1", "y": "1"}), st.sampled_from("0xy1z"), _ALL),
    ("Tuple", _TUPLE, st.tuples(st.integers(0, 2), st.integers(0, 1), _words(2)), _ALL),
    ("Map", _MAP, st.dictionaries(st.sampled_from("pqr"), st.integers(0, 2), max_size=3), _ALL),
]


@pytest.mark.parametrize(
    ("lat", "values", "expect"), [p[1:] for p in PRIMITIVES], ids=[p[0] for p in PRIMITIVES]
)
def test_primitive_laws(
    lat: Lattice[Any], values: st.SearchStrategy[Any], expect: tuple[str, ...]
) -> None:
    seen: Counter[str] = Counter()

    @LAWS
    @given(triples(values))
    def run(abc: tuple[Any, Any, Any]) -> None:
        seen.update(check_laws(lat, *abc))

    run()
    # A law test that cannot fail is a defect: the pairs did meet in these ways.
    assert all(seen[k] > 0 for k in ("equivalent", *expect)), seen


def _type_equiv(x: ColumnType, y: ColumnType) -> bool:
    return _TYPES.compare(x, y) == 0


@st.composite
def _type_triples(draw: st.DrawFn) -> tuple[ColumnType, ColumnType, ColumnType]:
    family = draw(families)
    pick = column_types(family if draw(st.integers(0, 5)) else None)
    return draw(pick), draw(pick), draw(pick)


@st.composite
def _column_triples(draw: st.DrawFn) -> tuple[Column, Column, Column]:
    family = draw(families)
    names = st.sampled_from(["c", "C"])
    return tuple(draw(columns(draw(names), family)) for _ in range(3))  # type: ignore[return-value]


def test_type_laws() -> None:
    seen: Counter[str] = Counter()

    @settings(LAWS, max_examples=400)
    @given(_type_triples())
    def run(abc: tuple[ColumnType, ColumnType, ColumnType]) -> None:
        seen.update(check_laws(_TYPES, *abc, same=_type_equiv))

    run()
    assert min(seen[k] for k in ("incompatible", "ordered", "joined", "no join")) >= 10, seen


def test_column_laws() -> None:
    seen: Counter[str] = Counter()
    lat = _COLUMNS.value

    @settings(LAWS, max_examples=400)
    @given(_column_triples())
    def run(abc: tuple[Column, Column, Column]) -> None:
        seen.update(check_laws(lat, *abc, same=lambda x, y: lat.compare(x, y) == 0))

    run()
    assert min(seen[k] for k in ("incompatible", "ordered", "joined", "no join")) >= 10, seen


def test_column_map_laws() -> None:
    seen: Counter[str] = Counter()

    def by_key(cols: list[Column]) -> Mapping[str, Column]:
        return {c.key: c for c in cols}

    maps = st.lists(columns(family="integer"), max_size=3).map(by_key)

    @settings(LAWS, max_examples=300)
    @given(triples(maps))
    def run(abc: tuple[Mapping[str, Column], Mapping[str, Column], Mapping[str, Column]]) -> None:
        a, b, c = abc
        seen.update(check_laws(_COLUMNS, a, b, c, same=lambda x, y: _COLUMNS.compare(x, y) == 0))

    run()
    assert min(seen[k] for k in ("incompatible", "ordered", "joined", "no join")) >= 10, seen


class _Tables:
    compare = staticmethod(compare)
    join = staticmethod(join)


def test_table_laws() -> None:
    seen: Counter[str] = Counter()

    @settings(LAWS, max_examples=500)
    @given(triples(tables()))
    def run(abc: tuple[TableSchema, TableSchema, TableSchema]) -> None:
        seen.update(check_laws(_Tables(), *abc, same=same_table))
        a, b, _ = abc
        j = outcome(lambda: join(a, b))
        if j is not None:
            assert [c.key for c in j.columns[: len(a.columns)]] == [c.key for c in a.columns]
            assert {i.canonical() for i in j.indexes} <= {i.canonical() for i in b.indexes}

    run()
    assert min(seen[k] for k in ("incompatible", "ordered", "joined", "no join")) >= 10, seen
    assert seen["equivalent"] >= 10, seen


# --- diff --------------------------------------------------------------------------------


def test_diff_of_equal_tables_is_empty() -> None:
    x = tbl(ID, col("a"), primary_key=("id",), charset="utf8mb4")
    assert diff(x, x) == ()
    assert diff(x, x.renamed("other")) == ()
    assert diff(x, tbl(ID, col("A"), primary_key=("id",), charset="utf8mb4")) == ()


def test_diff_adds_drops_modifies_and_sets_options() -> None:
    old = tbl(ID, col("a"), col("b"), col("gone"), charset="latin1")
    new = tbl(
        col("first"),
        ID,
        col("a", "BIGINT"),
        col("mid"),
        col("b"),
        col("last", **NN, default="0"),
        charset="utf8mb4",
        collation="utf8mb4_bin",
    )
    assert diff(old, new) == (
        DropColumn("gone"),
        AddColumn(col("first"), Position(None)),
        AddColumn(col("mid"), Position("a")),
        AddColumn(col("last", **NN, default="0"), Position("b")),
        ModifyColumn(col("a", "BIGINT")),
        TableOptions(charset="utf8mb4", collation="utf8mb4_bin"),
    )


def test_diff_from_a_shard_to_the_join() -> None:
    shard = tbl(ID, col("a"))
    other = tbl(ID, col("a", "BIGINT"), col("c", **NN))
    joined_ = join(shard, other)
    assert diff(shard, joined_) == (
        AddColumn(col("c", **NN, default=IMPLICIT_DEFAULT), Position("a")),
        ModifyColumn(col("a", "BIGINT")),
    )
    assert diff(joined_, shard) == (DropColumn("c"), ModifyColumn(col("a")))


def test_schemas_import_no_engine() -> None:
    import subprocess
    import sys

    code = (
        "import sys, schemas.lattice, schemas._lattice_primitives;"
        "engines = ('pyspark', 'kafka', 'confluent_kafka', 'streaming');"
        "bad = [m for m in engines if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
