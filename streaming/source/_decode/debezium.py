"""Internal: Debezium MySQL (data envelope and schema-change topic) in Spark SQL.

Mirrors :mod:`tests.oracle.debezium` (the reference decoder) rule for rule; the order
of the checks below is the order in which the reference raises, so a record that is wrong
in several ways gets the same reason from both. How each quirk is decoded in the JVM:

- ``schemas.enable``: the value is parsed once with a schema holding both the bare
  envelope and ``payload``; of ``schema`` only the envelope's fields and their row fields
  are read (a struct), which give the DECIMAL scales and the fingerprint: ``sha1`` of the
  canonical JSON of ``[[field, type, name, optional, parameters], ...]`` built with
  ``concat`` (parameters sorted by key), the reference's ``fingerprint(_fp_form(...))``;
- row images are kept as JSON text (``before``/``after`` parsed as STRING: Spark writes
  the object back as compact JSON, numbers stay numbers), so one schema serves every
  table. DECIMAL fields are replaced in that text (``instr`` of ``"col":``, then
  ``replace``): no per-row map or VARIANT;
- DECIMAL bytes: ``unbase64`` + ``hex``; up to 7 bytes ``conv`` to a BIGINT minus 2^(8n)
  when negative, longer ones folded into a DECIMAL(38,0) with ``aggregate`` (negative
  numbers through the inverted bytes); then the point placed by ``scale`` as text, as
  ``format(Decimal(unscaled).scaleb(-scale), "f")``;
- ``snapshot`` is a string ("true", "last", "incremental", ...);
- several statements in one ``ddl``: a regex tokenizer (quotes, comments) and an
  ``aggregate`` that cuts at ``;`` outside them, as ``split_statements`` does.
"""

from __future__ import annotations

from coordinator.routing import SHADOW_TABLE
from streaming.source._decode.sql import (
    Stage,
    case,
    diagnose_json,
    event,
    first,
    let,
    lit,
    pyrepr,
    strip,
    wrong_type,
)
from streaming.sql.quoting import ident

__all__ = ["PARSE_SCHEMA", "events_sql", "reason_sql", "stages"]

DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"
SNAPSHOT_TRUE = (
    "true",
    "first",
    "last",
    "incremental",
    "first_in_data_collection",
    "last_in_data_collection",
)
_INT_SOURCE_FIELDS = ("ts_ms", "server_id", "pos", "row", "thread")
_SOURCE = (
    "struct<name:string,db:string,table:string,file:string,pos:string,row:string,"
    "gtid:string,ts_ms:string,snapshot:string,server_id:string,thread:string>"
)
# Every scalar is read as STRING (a number's text, a string's content): a type mismatch
# then never voids the whole record, and each field is checked with a reason of its own.
_BODY = (
    ("op", "string"),
    ("source", _SOURCE),
    ("before", "string"),
    ("after", "string"),
    ("ts_ms", "string"),
    ("transaction", "string"),
    ("ddl", "string"),
    ("databaseName", "string"),
    ("tableChanges", "array<struct<type:string,id:string,previousId:string>>"),
)
_BODY_STRUCT = "struct<" + ",".join(f"{n}:{t}" for n, t in _BODY) + ">"
# Of the Connect schema only what the fingerprint and the DECIMAL scales need: the
# envelope's fields and their row fields (parameters are string -> string in Connect).
_CONNECT_SCHEMA = (
    "struct<fields:array<struct<field:string,fields:array<struct<field:string,type:string,"
    "name:string,optional:string,parameters:map<string,string>>>>>>"
)
PARSE_SCHEMA = (
    f"schema {_CONNECT_SCHEMA}, payload {_BODY_STRUCT}, "
    + ", ".join(f"{ident(n)} {t}" for n, t in _BODY)
    + ", _corrupt string"
)

_DB_LEVEL = r"(?i)^\s*(create|drop|alter)\s+(database|schema)\b"
# A schema-change event about no database that only sets session variables (Debezium's
# snapshot starts with ``SET character_set_server=...``): it concerns no table.
_SESSION_ONLY = r"(?is)^\s*SET\s[^;]*;?\s*$"
_NEEDS_ESCAPE = r'["\\\p{Cntrl}]'
_WORD = r"(?U)[\w$]+"
# Runs of characters are matched possessively (``++``, ``*+``): Java's regex engine
# recurses once per repetition of a group, so ``(?:x|y)*`` over a 3,000-character quoted
# string overflows the thread's stack (a StackOverflowError, not a dead letter). Each
# rewrite matches what the plain form matches: a run is always followed by a character it
# cannot take, and a quoted DDL string always ends at its quote or at the end.
_ID_PART = r'"((?:[^"]++|"")*)"'
_ID_TEXT = "IF(coalesce({t}.previousId, '') != '', {t}.previousId, {t}.id)"
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
# One token of a DDL text, as split_statements walks it: a quoted string (backslash escapes
# except in backticks; unterminated runs to the end), a comment, ';', or anything else.
_DDL_TOKEN = (
    r"'(?:[^'\\]++|\\[\s\S]?)*+(?:'|\z)"
    r'|"(?:[^"\\]++|\\[\s\S]?)*+(?:"|\z)'
    r"|`[^`]*(?:`|\z)"
    r"|(?:--|#)[^\n]*"
    r"|/\*(?!!)[\s\S]*?(?:\*/|\z)"
    r"|;"
    r"|[^;'\"`#/\-]+"
    r"|[\s\S]"
)


def stages(source_map: str) -> list[Stage]:
    """From the parsed value ``_j`` to the body ``_b`` (the bare envelope or the payload),
    the schema's fingerprint and DECIMAL fields, and the converted DECIMALs."""
    body = "named_struct(" + ", ".join(f"{lit(n)}, _j.{ident(n)}" for n, _ in _BODY) + ")"
    env = (
        "(_j.payload IS NOT NULL AND "
        "(_j.schema IS NOT NULL OR array_contains(json_object_keys(_v), 'schema')))"
    )
    entry = (
        "coalesce(try_element_at(filter(_sch.fields, f -> f.field = 'after'), -1), "
        "try_element_at(filter(_sch.fields, f -> f.field = 'before'), -1))"
    )
    # _fp_form of the reference: [field, type, name, optional, parameters or {}] per row
    # field, as canonical JSON (compact; parameters with sorted keys).
    param = f"concat({_json_str('p.key')}, ':', {_json_str('p.value')})"
    params = (
        "coalesce(concat('{', array_join(transform(array_sort(map_entries(f.parameters)), "
        f"p -> {param}), ','), '}}'), '{{}}')"
    )
    fp_item = (
        f"concat('[', {_json_str('f.field')}, ',', {_json_str('f.type')}, ',', "
        f"{_json_str('f.name')}, ',', IF(lower(f.optional) = 'true', 'true', 'false'), ',', "
        f"{params}, ']')"
    )
    return [
        ([("_env", env)], ()),
        (
            [
                ("_bad", "_j IS NULL OR _j._corrupt IS NOT NULL"),
                ("_tomb", _tombstone()),
                ("_at", "IF(_env, 'payload.', '')"),
                ("_b", f"IF(_env, _j.payload, {body})"),
                ("_sch", "IF(_env, _j.schema, NULL)"),
                # The text is only needed to explain a bad record: NULL for the others,
                # so that later projections do not copy it.
                (
                    "_vbad",
                    "IF(_j IS NULL OR _j._corrupt IS NOT NULL OR NOT is_valid_utf8(_v), _v, NULL)",
                ),
            ],
            ("_j", "_env", "_v"),
        ),
        ([("_name", f"coalesce(nullif(_b.source.name, ''), {source_map}[topic])")], ()),
        (
            [("_rowf", f"CASE WHEN _sch IS NOT NULL THEN {entry}.fields END")],
            ("_sch",),
        ),
        (
            [
                (
                    "_fptext",
                    "CASE WHEN size(_rowf) > 0 THEN concat('[', "
                    f"array_join(transform(_rowf, f -> {fp_item}), ','), ']') END",
                )
            ],
            (),
        ),
        (
            [
                ("_fp", "substr(sha1(_fptext), 1, 16)"),
                # The row schema itself only for online-DDL shadow tables (the cut-over of
                # a shadow whose CREATE the job never read takes its schema from its rows).
                (
                    "_rsch",
                    f"CASE WHEN _b.source.table rlike {lit(SHADOW_TABLE.pattern)} THEN _fptext END",
                ),
                (
                    "_dec",
                    "CASE WHEN size(_rowf) > 0 THEN transform(filter(_rowf, f -> "
                    f"f.name = {lit(DECIMAL_LOGICAL)} AND f.field IS NOT NULL), f -> "
                    "named_struct('field', f.field, 'key', "
                    f"concat({_json_str('f.field')}, ':'), 'scale', f.parameters['scale'])) END",
                ),
            ],
            ("_rowf", "_fptext"),
        ),
        *_convert_stages(),
    ]


def _tombstone() -> str:
    """``{"schema": ..., "payload": null}``: the JsonConverter's tombstone."""
    return (
        "(NOT _env AND _j.schema IS NOT NULL AND _j.payload IS NULL AND _j.op IS NULL "
        "AND _j.ddl IS NULL AND _j.tableChanges IS NULL "
        "AND array_contains(json_object_keys(_v), 'payload'))"
    )


def _json_str(expr: str) -> str:
    """``expr`` as a JSON value: a quoted string, or ``null``. Plain text is quoted by
    ``concat``; only text needing escapes goes through ``to_json`` (a JSON generator per
    call is the expensive part of the fingerprint)."""
    escaped = let(f"to_json(array({expr}))", "_js", "substr(_js, 2, length(_js) - 2)")
    return (
        f"CASE WHEN {expr} IS NULL THEN 'null' WHEN {expr} rlike {lit(_NEEDS_ESCAPE)} "
        f"THEN {escaped} ELSE concat('\"', {expr}, '\"') END"
    )


def _convert_stages() -> list[Stage]:
    """DECIMAL conversions of before/after (only for rows whose schema has DECIMALs).

    Done on the image's text: Spark writes a STRING-read object back as compact JSON
    (``"amount":"AeI="``), and a flat row image holds each column name once as a key (a
    ``"`` inside a value is escaped), so the value is found after ``"amount":`` and
    replaced in place. No per-row map or VARIANT is built."""
    conversions = [(f"_{i}_conv", _conversions(i)) for i in ("before", "after")]
    return [(conversions, ("_dec",))]


def _conversions(image: str) -> str:
    """``struct(err, text)``: the first DECIMAL error of the image, and its text with
    every DECIMAL replaced by its decimal string.

    Per DECIMAL field ``d``, in schema order, ``_f`` holds: ``pos`` where ``"col":``
    starts (0: absent), ``c`` the first character of its value, ``s`` a string value's
    text and ``dec`` its decimal string (computed once, used by both the check and the
    replacement)."""
    text = f"_b.{image}"
    rest = f"substr({text}, _pos + length(d.key))"
    located = let(
        f"instr({text}, d.key)",
        "_pos",
        f"named_struct('d', d, 'pos', _pos, 'c', substr({rest}, 1, 1), "
        f"'s', substring_index(substr({rest}, 2), '\"', 1), "
        f"'token', regexp_extract({rest}, '^[^,}}]*', 0))",
    )
    valued = (
        "transform(_loc, f -> named_struct('d', f.d, 'pos', f.pos, 'c', f.c, 's', f.s, "
        "'token', f.token, 'dec', IF(f.pos > 0 AND f.c = '\"', "
        f"{_decimal('f.s', 'try_cast(f.d.scale AS INT)')}, NULL)))"
    )
    errors = f"filter(transform(_f, f -> {_decimal_error(image)}), e -> e IS NOT NULL)"
    replaced = (
        f"aggregate(_f, {text}, (acc, f) -> IF(f.dec IS NULL, acc, "
        "replace(acc, concat(f.d.key, '\"', f.s, '\"'), concat(f.d.key, '\"', f.dec, '\"'))))"
    )
    body = f"named_struct('err', {first(errors)}, 'text', {replaced})"
    return (
        f"CASE WHEN size(_dec) > 0 AND {text} IS NOT NULL AND _b.op != 't' THEN "
        + let(f"transform(_dec, d -> {located})", "_loc", let(valued, "_f", body))
        + " END"
    )


def _decimal_error(image: str) -> str:
    """The reference's checks of one DECIMAL value ``f`` (see ``_conversions``), in order."""
    at = f"concat(_at, '{image}.', f.d.field)"
    return case(
        [
            ("f.pos = 0 OR f.c = 'n'", "NULL"),  # absent or null: nothing to decode
            (
                "f.d.scale IS NULL OR NOT f.d.scale rlike '^-?[0-9]+$'",
                "concat('DECIMAL without a scale parameter in the schema of ', "
                f"f.d.field, ' at ', {at})",
            ),
            (
                "f.c != '\"'",
                f"concat('DECIMAL is not base64 bytes (got ', f.token, ') at ', {at})",
            ),
            (
                f"NOT f.s rlike {lit(_BASE64)}",
                f"concat('DECIMAL ', {pyrepr('f.s')}, ' is not base64 at ', {at})",
            ),
            (
                "f.dec IS NULL",
                f"concat('DECIMAL ', {pyrepr('f.s')}, ' has more than 38 digits at ', {at})",
            ),
        ]
    )


def _decimal(s: str, scale: str) -> str:
    """The decimal string of base64 two's-complement bytes ``s`` at ``scale``, as
    ``format(Decimal(unscaled).scaleb(-scale), "f")``; NULL if not base64 or > 38 digits.

    Up to 7 bytes (DECIMAL(16) and below) the unscaled value fits a BIGINT: ``conv`` of
    the hex, minus 2^(8n) when the sign bit is set. Longer values are folded byte by byte
    into a DECIMAL(38,0), negative ones through the inverted bytes (-(~x) - 1)."""
    byte = "CAST(conv(substr(_h, 2 * _i + 1, 2), 16, 10) AS INT)"
    folded = (
        "aggregate(sequence(0, length(_h) div 2 - 1), CAST(0 AS DECIMAL(38,0)), "
        "(_acc, _i) -> CAST(try_add(try_multiply(_acc, 256), "
        f"IF(_neg, 255 - {byte}, {byte})) AS DECIMAL(38,0)))"
    )
    small = "abs(CAST(conv(_h, 16, 10) AS BIGINT) - IF(_neg, shiftleft(1L, 4 * length(_h)), 0L))"
    digits = (
        "CASE WHEN length(_h) = 0 THEN '0' "
        f"WHEN length(_h) <= 14 THEN CAST({small} AS STRING) "
        f"ELSE CAST(IF(_neg, try_add({folded}, 1), {folded}) AS STRING) END"
    )
    point = (
        "CASE WHEN _d IS NULL OR _k IS NULL THEN NULL "
        "WHEN _k = 0 THEN concat(IF(_neg, '-', ''), _d) "
        "WHEN _k > 0 THEN "
        + let(
            "lpad(_d, greatest(length(_d), _k + 1), '0')",
            "_p",
            "concat(IF(_neg, '-', ''), substr(_p, 1, length(_p) - _k), '.', "
            "substr(_p, length(_p) - _k + 1))",
        )
        + " WHEN _d = '0' THEN '0' "
        "ELSE concat(IF(_neg, '-', ''), _d, repeat('0', -_k)) END"
    )
    with_digits = let(digits, "_d", let(scale, "_k", point))
    with_sign = let("length(_h) > 0 AND substr(_h, 1, 1) >= '8'", "_neg", with_digits)
    hexed = let(f"hex(unbase64({s}))", "_h", with_sign)
    return f"IF({s} rlike {lit(_BASE64)}, {hexed}, NULL)"


def _int_checks(prefix: str) -> list[tuple[str, str]]:
    src = f"{prefix}source"
    return [
        (
            f"_b.source.{f} IS NOT NULL AND try_cast(_b.source.{f} AS BIGINT) IS NULL",
            f"concat('not an integer: ', {pyrepr(f'_b.source.{f}')}, ' at ', _at, '{src}.{f}')",
        )
        for f in _INT_SOURCE_FIELDS
    ]


def _snapshot_check() -> tuple[str, str]:
    known = ", ".join(lit(v) for v in (*SNAPSHOT_TRUE, "false"))
    return (
        f"_b.source.snapshot IS NOT NULL AND lower(_b.source.snapshot) NOT IN ({known})",
        f"concat('unknown snapshot ', {pyrepr('_b.source.snapshot')}, ' at ', _at, "
        "'source.snapshot')",
    )


def _table_ids() -> str:
    """tableChanges as ``(db, tbl, n)``: the quoted parts of ``previousId or id`` (the old
    table on a rename); ``n`` is how many parts there were (at least 2 when valid)."""
    parts = (
        f"transform(regexp_extract_all({_ID_TEXT.format(t='t')}, {lit(_ID_PART)}, 1), "
        "p -> replace(p, '\"\"', '\"'))"
    )
    item = "named_struct('db', try_element_at(_p, 1), 'tbl', try_element_at(_p, 2), 'n', size(_p))"
    return f"transform(_b.tableChanges, t -> {let(parts, '_p', item)})"


def reason_sql() -> str:
    """Why the record is a dead letter, or NULL (events, or a tombstone)."""
    diagnose = diagnose_json(
        "_vbad",
        wrong_type(
            [
                ("$.payload", "payload", "object"),
                ("$.source", "source", "object"),
                ("$.payload.source", "payload.source", "object"),
                ("$.tableChanges", "tableChanges", "array"),
                ("$.payload.tableChanges", "payload.tableChanges", "array"),
            ],
            "_vbad",
        ),
    )
    item_err = (
        "transform(_b.tableChanges, (t, i) -> CASE "
        "WHEN t IS NULL THEN concat('expected a JSON object at ', _at, 'tableChanges[', i, ']') "
        "WHEN t.type IS NULL THEN concat('missing type at ', _at, 'tableChanges[', i, '].type') "
        "WHEN t.id IS NULL THEN concat('missing id at ', _at, 'tableChanges[', i, '].id') END)"
    )
    id_text = _ID_TEXT.format(t="try_element_at(_b.tableChanges, i + 1)")
    id_err = (
        f"transform({_table_ids()}, (t, i) -> CASE WHEN t.n < 2 THEN concat('table id ', "
        f"{pyrepr(id_text)}, ' is not \"db\".\"table\" at ', _at, 'tableChanges[', i, '].id') "
        "END)"
    )
    ddl = [
        ("_b.source IS NULL", "concat('missing source at ', _at, 'source')"),
        *_int_checks(""),
        ("_b.ddl IS NULL", "concat('missing ddl at ', _at, 'ddl')"),
        (
            f"{first(f'filter({item_err}, e -> e IS NOT NULL)')} IS NOT NULL",
            first(f"filter({item_err}, e -> e IS NOT NULL)"),
        ),
        (
            "coalesce(nullif(_b.source.db, ''), nullif(_b.databaseName, '')) IS NULL "
            f"AND NOT {_session_only()}",
            "concat('missing db at ', _at, 'source.db')",
        ),
        _snapshot_check(),
        (
            f"{first(f'filter({id_err}, e -> e IS NOT NULL)')} IS NOT NULL",
            first(f"filter({id_err}, e -> e IS NOT NULL)"),
        ),
    ]
    not_object = "{0} IS NOT NULL AND NOT startswith(ltrim({0}), '{{')"
    data = [
        ("_b.op IS NULL", "concat('missing op at ', _at, 'op')"),
        ("_b.source IS NULL", "concat('missing source at ', _at, 'source')"),
        *_int_checks(""),
        (not_object.format("_b.before"), "concat('expected a JSON object at ', _at, 'before')"),
        (not_object.format("_b.after"), "concat('expected a JSON object at ', _at, 'after')"),
        (
            "_b.ts_ms IS NOT NULL AND try_cast(_b.ts_ms AS BIGINT) IS NULL",
            f"concat('not an integer: ', {pyrepr('_b.ts_ms')}, ' at ', _at, 'ts_ms')",
        ),
        (
            "_b.op NOT IN ('c', 'u', 'd', 'r', 't')",
            "concat('unknown op \"', _b.op, '\" at ', _at, 'op')",
        ),
        (
            "_name IS NULL",
            "concat('missing name (and no source configured for the topic) at ', _at, "
            "'source.name')",
        ),
        ("coalesce(_b.source.db, '') = ''", "concat('missing db at ', _at, 'source.db')"),
        _snapshot_check(),
        ("coalesce(_b.source.table, '') = ''", "concat('missing table at ', _at, 'source.table')"),
        (
            "_b.op IN ('c', 'r', 'u') AND _b.after IS NULL",
            "concat('missing after for op \"', _b.op, '\" at ', _at, 'after')",
        ),
        (
            "_b.op = 'd' AND _b.before IS NULL",
            "concat('missing before for op \"d\" at ', _at, 'before')",
        ),
        (
            "_before_conv.err IS NOT NULL",
            "_before_conv.err",
        ),
        (
            "_after_conv.err IS NOT NULL",
            "_after_conv.err",
        ),
    ]
    is_ddl = "(_b.ddl IS NOT NULL OR _b.tableChanges IS NOT NULL)"
    return (
        "CASE WHEN NOT is_valid_utf8(_vbad) THEN 'bad JSON (not UTF-8) at value' "
        f"WHEN _bad THEN {diagnose} "
        "WHEN _tomb THEN NULL "
        f"WHEN {is_ddl} THEN {case(ddl)} "
        f"ELSE {case(data)} END"
    )


def _image(image: str) -> str:
    conv = f"_{image}_conv"
    return (
        f"CASE WHEN _b.op = 't' THEN NULL WHEN {conv} IS NOT NULL THEN {conv}.text "
        f"ELSE _b.{image} END"
    )


def _snapshot() -> str:
    known = ", ".join(lit(v) for v in SNAPSHOT_TRUE)
    return f"coalesce(lower(_b.source.snapshot) IN ({known}), false)"


def events_sql() -> str:
    """The events of a good record (array of event structs)."""
    common = {
        "pos_file": "_b.source.file",
        "pos": "try_cast(_b.source.pos AS BIGINT)",
        "pos_row": "try_cast(_b.source.row AS INT)",
        "gtid": "_b.source.gtid",
        "snapshot": _snapshot(),
    }
    data = event(
        source="_name",
        db="_b.source.db",
        tbl="_b.source.table",
        op="_b.op",
        before=_image("before"),
        after=_image("after"),
        ts_ms="coalesce(try_cast(_b.source.ts_ms AS BIGINT), try_cast(_b.ts_ms AS BIGINT))",
        schema_fp="_fp",
        row_schema="_rsch",
        **common,
    )
    db = "coalesce(nullif(_b.source.db, ''), _b.databaseName)"
    words = f"transform(regexp_extract_all(_s, {lit(_WORD)}, 0), w -> lower(w))"
    table_of = (
        f"coalesce({first(f'filter(_tables, t -> array_contains({words}, lower(t.tbl)))')}, "
        f"{first('_tables')}, named_struct('db', {db}, 'tbl', coalesce(_b.source.table, ''), "
        "'n', 2))"
    )
    ddl_event = event(
        source="coalesce(nullif(_b.source.name, ''), _name, topic)",
        db=f"IF(_s rlike {lit(_DB_LEVEL)}, {db}, _t.db)",
        tbl=f"IF(_s rlike {lit(_DB_LEVEL)}, '', _t.tbl)",
        op="'ddl'",
        ddl="_s",
        ts_ms="try_cast(_b.source.ts_ms AS BIGINT)",
        **common,
    )
    per_statement = (
        f"transform({split_statements('_b.ddl')}, _s -> {let(table_of, '_t', ddl_event)})"
    )
    ddl = let(_table_ids(), "_tables", per_statement)
    return (
        f"CASE WHEN {_session_only()} THEN filter(array({data}), _e -> false) "
        "WHEN _b.ddl IS NOT NULL OR _b.tableChanges IS NOT NULL "
        f"THEN {ddl} ELSE array({data}) END"
    )


def _session_only() -> str:
    """True for a schema-change event of no database that only sets session variables."""
    return (
        "(coalesce(nullif(_b.source.db, ''), nullif(_b.databaseName, '')) IS NULL "
        f"AND coalesce(_b.ddl, '') rlike {lit(_SESSION_ONLY)})"
    )


def split_statements(text: str) -> str:
    """``split_statements`` of the reference decoder, as SQL over the string ``text``."""
    step = (
        "CASE WHEN _t = ';' THEN named_struct('done', concat(_a.done, array(_a.cur)), 'cur', '') "
        "WHEN startswith(_t, '--') OR startswith(_t, '#') THEN _a "
        "WHEN startswith(_t, '/*') AND NOT startswith(_t, '/*!') "
        "THEN named_struct('done', _a.done, 'cur', concat(_a.cur, ' ')) "
        "ELSE named_struct('done', _a.done, 'cur', concat(_a.cur, _t)) END"
    )
    pieces = (
        f"aggregate(regexp_extract_all({text}, {lit(_DDL_TOKEN)}, 0), "
        "named_struct('done', CAST(array() AS ARRAY<STRING>), 'cur', ''), "
        f"(_a, _t) -> {step}, _a -> concat(_a.done, array(_a.cur)))"
    )
    return f"filter(transform({pieces}, _x -> {strip('_x')}), _x -> _x != '')"
