"""The rule of the append path (streaming.batch.new_keys): which keys can be proved absent,
and islands that only ever cover more keys, never fewer."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from coordinator.routing import Extract
from schemas.changes import AddColumn, ChangeColumn, DropColumn, ModifyColumn, RenameColumn
from schemas.ddl import parse_create_table
from streaming.batch.new_keys import ISLANDS, KeyMarks, Marks, coalesce, key_space, spec_names


def _schema(sql: str):
    return parse_create_table(sql)


def test_key_space_is_extract_columns_plus_one_integer_column():
    schema = _schema(
        "CREATE TABLE t (id BIGINT UNSIGNED, _db VARCHAR(64), a INT, PRIMARY KEY (_db, id))"
    )
    assert key_space(schema, Extract(db_column="_db")) == ("id", ("_db",))
    assert key_space(_schema("CREATE TABLE t (id INT PRIMARY KEY, a INT)"), Extract()) == ("id", ())


def test_keys_that_cannot_be_ordered_take_the_merge():
    no_key = _schema("CREATE TABLE t (id INT, a INT)")
    text_key = _schema("CREATE TABLE t (id VARCHAR(36) PRIMARY KEY, a INT)")
    two = _schema("CREATE TABLE t (a INT, b INT, PRIMARY KEY (a, b))")
    decimal_key = _schema("CREATE TABLE t (id DECIMAL(20,0) PRIMARY KEY)")
    for schema in (no_key, text_key, two, decimal_key):
        assert key_space(schema, Extract()) is None
    # an extract column that is not in the key leaves two non-extract key columns
    assert key_space(two, Extract(db_column="a")) == ("b", ("a",))


def test_coalesce_unions_and_never_narrows():
    assert coalesce([(5, 9), (1, 3), (4, 4), (20, 30)], 10) == [(1, 9), (20, 30)]
    # over the limit: the smallest gap is filled
    assert coalesce([(0, 1), (10, 11), (13, 14)], 2) == [(0, 1), (10, 14)]
    assert coalesce([(0, 1), (10, 11), (13, 14)], 1) == [(0, 14)]
    assert coalesce([], 3) == []


@given(
    st.lists(st.tuples(st.integers(-(2**63), 2**64), st.integers(0, 2**40)), max_size=200),
    st.integers(1, 70),
)
def test_coalesce_covers_every_input_within_the_limit(pairs, limit):
    ranges = [(a, a + w) for a, w in pairs]
    out = coalesce(ranges, limit)
    assert len(out) <= limit
    assert all(a <= b for a, b in out)
    assert all(out[i][1] + 1 < out[i + 1][0] for i in range(len(out) - 1))  # disjoint, apart
    for a, b in ranges:
        assert any(x <= a and b <= y for x, y in out)


def test_islands_grow_per_prefix_and_a_prefix_keeps_one():
    marks = KeyMarks("id", ())
    for i in range(ISLANDS + 10):
        marks.add((), [(i * 1_000_000_000, i * 1_000_000_000 + 5)])
    assert len(marks.islands[()]) == ISLANDS
    prefixed = KeyMarks("id", ("_db",))
    prefixed.add(("db_1",), [(1, 10)])
    prefixed.add(("db_1",), [(1_000_000, 1_000_010)])
    prefixed.add(("db_2",), [(5, 6)])
    assert prefixed.islands == {("db_1",): [(1, 1_000_010)], ("db_2",): [(5, 6)]}
    assert prefixed.bounds_rows() == [
        ("db_1", Decimal(1), Decimal(1_000_010)),
        ("db_2", Decimal(5), Decimal(6)),
    ]


def test_free_sql_names_every_island():
    marks = KeyMarks("id", ())
    assert marks.free_sql("`id`") == "(CAST(`id` AS DECIMAL(20,0)) IS NOT NULL)"
    marks.add((), [(1, 100), (2**64 - 10, 2**64 - 1)])
    sql = marks.free_sql("`id`")
    assert "BETWEEN 1BD AND 100BD" in sql
    assert f"BETWEEN {2**64 - 10}BD AND {2**64 - 1}BD" in sql
    assert sql.startswith("(CAST(`id` AS DECIMAL(20,0)) IS NOT NULL AND NOT (")


def test_marks_survive_the_saved_state():
    marks = Marks()
    km = KeyMarks("a`b'c;--", ("_src", "_db"))
    km.add(("s1", None), [(2**64 - 1, 2**64 - 1)])
    km.add(("s1", "db_0"), [(-5, 7)])
    marks.put("shop.orders", marks.get("shop.orders") or km)
    again = Marks(marks.to_json())
    restored = again.get("shop.orders")
    assert restored == km
    again.drop("shop.orders")
    assert again.get("shop.orders") is None and again.to_json() == {}


def test_islands_fit_only_the_key_they_were_read_for():
    schema = _schema("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    marks = KeyMarks("id", ())
    assert marks.fits(schema, Extract())
    renamed = _schema("CREATE TABLE t (order_id INT PRIMARY KEY, a INT)")
    assert not marks.fits(renamed, Extract())
    # an extract column outside the key leaves the key space as it was
    assert marks.fits(schema, Extract(db_column="_db"))
    assert not KeyMarks("id", ("_db",)).fits(schema, Extract(db_column="_db"))


def test_spec_names_are_the_columns_an_alter_can_change():
    schema = _schema("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    col = schema.column("a")
    assert col is not None
    assert spec_names(AddColumn(col)) == {"a"}
    assert spec_names(ModifyColumn(col)) == {"a"}
    assert spec_names(DropColumn("ID")) == {"id"}
    assert spec_names(ChangeColumn("Id", col)) == {"id", "a"}
    assert spec_names(RenameColumn("id", "order_id")) == {"id", "order_id"}
    assert spec_names(object()) == set()


def test_islands_are_dropped_when_keys_move_or_the_key_changes_in_the_batch():
    """Whether or not the batch has rows of the target (streaming.batch.writer)."""
    from types import SimpleNamespace

    from coordinator.decisions import ApplyDDL
    from coordinator.ids import TargetId
    from streaming.batch.executor import RowWork
    from streaming.batch.writer import Writer

    keyed = _schema("CREATE TABLE t (id INT, _db VARCHAR(64), a INT, PRIMARY KEY (_db, id))")
    plain = _schema("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    targets = {TargetId.parse(f"shop.t{i}"): keyed if i < 2 else plain for i in range(5)}
    extract = {t: Extract(db_column="_db") if s is keyed else Extract() for t, s in targets.items()}
    work = RowWork()
    t0, _t1, t2, t3, t4 = targets  # t1: nothing happened to it (kept)
    # t0: a shard re-homed while the key has a prefix; t2: re-homed, no prefix (kept)
    for t in (t0, t2):
        work.renames.append(SimpleNamespace(target=t))  # type: ignore[arg-type]
    # t3: an ALTER names the key column; t4: one that does not (kept)
    col = plain.column("a")
    assert col is not None
    work.altered[t3] = [ApplyDDL(t3, (DropColumn("id"),), plain, "ALTER ...", "r")]
    work.altered[t4] = [ApplyDDL(t4, (ModifyColumn(col),), plain, "ALTER ...", "r")]
    marks = Marks()
    for t, s in targets.items():
        space = key_space(s, extract[t])
        assert space is not None
        marks.put(str(t), KeyMarks(*space, {(): [(1, 5)]}))
    marks.put("shop.gone", KeyMarks("id", ()))  # a target the settings no longer have
    coordinator = SimpleNamespace(extract_of=lambda t: extract[t])
    w = Writer(
        None, SimpleNamespace(c=coordinator), SimpleNamespace(schemas=targets, work=work),
        None, None, None, "app", None, 0, None, [], [], None, None, marks,
    )  # fmt: skip
    w.forget_moved_keys()
    assert sorted(marks.targets) == ["shop.t1", "shop.t2", "shop.t4"]


def test_a_batch_is_split_only_when_asked_and_appended_when_its_keys_are_all_new() -> None:
    from streaming.batch.new_keys import how_written

    assert how_written(0, 5, mixed=False) == "append"
    assert how_written(0, 5, mixed=True) == "append"
    assert how_written(3, 5, mixed=False) == "merge"  # one MERGE of both sides
    assert how_written(3, 5, mixed=True) == "split"
    assert how_written(3, 0, mixed=True) == "merge"
    assert how_written(0, 0, mixed=False) == "merge"  # nothing to append
