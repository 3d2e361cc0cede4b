"""Every column a batch adds to its frames is declared once (streaming.batch.columns).

The modules that build the batch's frames name those columns in SQL text and in
DataFrame calls: every string literal in them (docstrings aside) is read for names
beginning with one underscore, and each must be declared; each declaration must still
be used."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from streaming.batch.columns import COLUMNS, PREFIXES

STREAMING = Path(__file__).resolve().parents[2] / "streaming"
# The modules that add, read or join the batch's columns.
MODULES = [
    "batch/protocol", "batch/columns", "source/control", "source/decode", "batch/move_keys",
    "batch/moves", "batch/plan", "batch/row_fit", "batch/rows", "storage/stash",
    "batch/summary", "batch/writer",
]  # fmt: skip
# Strings in those modules that name things other than columns.
NOT_COLUMNS = {"_delta_log", "_move"}  # a Delta table's log folder; a move copy's target db
NAME = re.compile(r"(?<![A-Za-z0-9_.$])_[a-z][a-z0-9_]*")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        kinds = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def names_in(source: str) -> set[str]:
    """The underscore names in the string literals of a module's source, docstrings
    left out."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found |= set(NAME.findall(node.value))
    return found


def _declared(name: str) -> bool:
    return name in COLUMNS or any(name.startswith(p) for p in PREFIXES)


def _used() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for module in MODULES:
        if module == "batch/columns":
            continue
        for name in names_in((STREAMING / f"{module}.py").read_text()) - NOT_COLUMNS:
            used.setdefault(name, set()).add(module)
    return used


def test_every_column_the_batch_names_is_declared() -> None:
    missing = {n: sorted(m) for n, m in _used().items() if not _declared(n)}
    assert not missing, f"declare these in streaming/batch/columns.py (name: modules): {missing}"


def test_every_declared_column_is_used() -> None:
    used = _used()
    stale = [n for n in COLUMNS if n not in used and not any(u.startswith(n) for u in used)]
    assert not stale, f"declared in streaming/batch/columns.py, used by none of {MODULES}: {stale}"


def test_every_declaration_says_where_and_what() -> None:
    for name, (frame, meaning) in COLUMNS.items():
        assert NAME.fullmatch(name), name
        assert frame.strip() and len(meaning) > 10, name


def test_the_reader_finds_names_in_sql_and_calls_but_not_in_docstrings() -> None:
    source = '''
"""Module text naming _not_this."""
def f():
    """Nor _this."""
    df.withColumn("_fresh", F.expr("CASE WHEN _okey < _hold_from THEN 1 END"))
    return f"{ident('_c_' + name)} x.`_quoted` y._field"
'''
    assert names_in(source) == {"_fresh", "_okey", "_hold_from", "_c_", "_quoted"}
