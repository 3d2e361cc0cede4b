"""The operator CLI on a local checkpoint without a JVM: the state store's checks on the
plain-Python filesystem, and `shardmerge locks` / `unlock` against a saved state."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from shardmerge.cli import main
from streaming.fs.arrow import ArrowFs, s3a_settings
from streaming.fs.local import local_path
from streaming.storage.state_store import StateStore, StateStoreError
from tests.integration.test_state_store import CHECKS

CONFIG = """
kafka: {{bootstrap: "localhost:9092"}}
sources: [{{format: debezium, pattern: 'shop(\\\\..*)?'}}]
routes: [{{target: shop.orders, table: 'orders_*'}}]
sink: {{path: /tmp/lake}}
checkpoint: {checkpoint}
"""


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_state_store_on_the_local_filesystem(
    tmp_path: Path, check: Callable[[StateStore], None]
) -> None:
    check(StateStore(None, tmp_path.as_uri()))


def test_local_and_object_store_checkpoints_go_without_spark() -> None:
    assert local_path("file:///data/ck") == "/data/ck"
    assert local_path("file:/data/a%20b") == "/data/a b"
    assert local_path("/data/ck") == "/data/ck"
    for remote in ("s3a://bucket/ck", "hdfs://nn:8020/ck", "abfss://c@a.dfs.core.windows.net/x"):
        assert local_path(remote) is None
    assert isinstance(StateStore(None, "s3a://bucket/ck").fs, ArrowFs)  # nothing read yet
    for other in ("hdfs://nn:8020/ck", "viewfs://cluster/ck"):  # Hadoop's own: a session
        with pytest.raises(StateStoreError, match="without a Spark session"):
            StateStore(None, other)


def test_s3a_settings_come_from_spark_defaults(tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# comment\nspark.hadoop.fs.s3a.endpoint  http://127.0.0.1:9000\n"
        "spark.hadoop.fs.s3a.access.key=AK\nspark.hadoop.fs.s3a.secret.key: S K\n"
        "spark.executor.memory 2g\n"
    )
    assert s3a_settings(str(tmp_path)) == {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.access.key": "AK",
        "fs.s3a.secret.key": "S K",
    }
    assert s3a_settings(str(tmp_path / "none")) == {}


def test_locks_and_unlock_read_and_write_a_local_checkpoint_without_a_jvm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_session(*args: object, **kwargs: object) -> None:
        raise AssertionError("the light CLI asked for a Spark session")

    # Another test of the same process may have a session running already, so the check is
    # that this CLI never asks for one.
    monkeypatch.setattr("streaming.runtime.spark_session.session_for_job", no_session)
    checkpoint = (tmp_path / "ck").as_uri()
    config = tmp_path / "job.yaml"
    config.write_text(CONFIG.format(checkpoint=checkpoint))
    held = "s1.shop.orders_1"
    lock = {
        "target": "shop.orders", "mode": "pessimistic", "stage": "waiting", "blocked": [held],
        "pending_ddl": [{"shard": held, "sql": "ALTER TABLE orders_1 ADD c INT -- \x1b[2J"}],
        "conflict": None, "shards": 2, "columns": {},
    }  # fmt: skip
    late = {
        "target": "shop.orders", "shard": "s1.shop.orders_\x1b[2J", "kind": "before_create",
        "since": 1_700_000_000.0, "reason": "rows came before the table's CREATE TABLE",
    }  # fmt: skip
    state = {"batch": 3, "locks": [lock], "stats": {}, "waiting": [late]}
    StateStore(None, checkpoint).save(3, state)
    assert main(["locks", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "after batch 3:" in out and held in out
    assert "shards whose rows wait without a DDL lock" in out
    assert "s1.shop.orders_\\x1b[2J  before_create  since 2023-11-14 22:13:20 UTC" in out
    assert "ADD c INT -- \\x1b[2J" in out and "\x1b" not in out  # upstream text escaped
    unlock = ["unlock", "--config", str(config), "shop.orders", "--shard"]
    assert main([*unlock, held, "--action", "skip"]) == 0
    assert main([*unlock, "s1.shop.orders_0", "--action", "skip"]) == 2
    assert "is not held" in capsys.readouterr().err
    words = [c["words"] for c in StateStore(None, checkpoint).inbox()]
    assert words == [f"unlock shop.orders --shard {held} --action skip"]
    # the queued command listed with its id, and withdrawn by it
    assert main(["locks", "--config", str(config)]) == 0
    listed = capsys.readouterr().out
    (queued,) = StateStore(None, checkpoint).inbox()
    assert f"{queued['id']}  {words[0]}" in listed
    assert main(["unlock", "--config", str(config), "--cancel", queued["id"]]) == 0
    assert "withdrawn" in capsys.readouterr().out
    assert StateStore(None, checkpoint).inbox() == []
    assert main(["unlock", "--config", str(config), "--cancel", queued["id"]]) == 0  # again: kept
    assert main(["unlock", "--config", str(config), "--cancel", "nope"]) == 2
    assert "no queued command nope" in capsys.readouterr().err
    assert main(["unlock", "--config", str(config), "shop.orders", "--cancel", "x"]) == 2
    assert main(["unlock", "--config", str(config), "--action", "skip"]) == 2


def test_locks_loads_neither_sqlglot_nor_pyspark(tmp_path: Path) -> None:
    """What `shardmerge locks` imports on a local checkpoint: no DDL parser, no Spark (the
    command answers in well under a second on the project's machine)."""
    checkpoint = (tmp_path / "ck").as_uri()
    config = tmp_path / "job.yaml"
    config.write_text(CONFIG.format(checkpoint=checkpoint))
    StateStore(None, checkpoint).save(1, {"batch": 1, "locks": [], "stats": {}})
    probe = (
        "import sys\n"
        "from shardmerge.cli import main\n"
        f"assert main(['locks', '--config', {str(config)!r}]) == 0\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlglot', 'pyspark'))\n"
        "print('heavy:', heavy[:5])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "after batch 1:" in out
    assert "heavy: []" in out, out


def test_move_show_and_abort_against_a_saved_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = (tmp_path / "ck").as_uri()
    config = tmp_path / "job.yaml"
    config.write_text(CONFIG.format(checkpoint=checkpoint))
    assert main(["move", "show", "--config", str(config)]) == 0
    assert "no move in the job's state" in capsys.readouterr().out
    frozen = {"s3": ["mysql-bin.000003", 120, 0, 1_700_000_000_000, 7]}
    progress = {
        "m1": {"state": "switching", "frozen": frozen, "switched_at": None, "dropped": 0,
               "shadow": 2},
        "m2": {"state": "switched", "frozen": {}, "switched_at": None, "dropped": 0, "shadow": 0},
    }  # fmt: skip
    waits = ["move m1: s9.db_9.orders_23 does not have the schema \x1b[2J"]
    moves = {
        "progress": progress, "unmet": {"m1": waits},
        "deferred": {"m1": [{"source": "s3", "db": "db_3", "tbl": "orders_7", "op": "t",
                             "ddl": None}]},
        "pending": [{"source": "s9", "db": "db_9", "tbl": "orders_23", "op": "ddl",
                     "ddl": "ALTER TABLE orders_23 ADD c INT"}],
    }  # fmt: skip
    StateStore(None, checkpoint).save(4, {"batch": 4, "locks": [], "stats": {}, "moves": moves})
    assert main(["move", "show", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "m1" in out and "switching" in out and "mysql-bin.000003" in out
    assert "waits: move m1: s9.db_9.orders_23 does not have the schema \\x1b[2J" in out
    assert "deferred statement of s3.db_3.orders_7: TRUNCATE" in out
    assert (
        "watermark (heartbeat rows):\n  s9.db_9.orders_23: ALTER TABLE orders_23 ADD c INT" in out
    )
    assert main(["move", "abort", "--config", str(config), "m2"]) == 2
    assert "move m2 is switched" in capsys.readouterr().err
    assert main(["move", "abort", "--config", str(config), "m9"]) == 2
    assert "no move m9 in the job's state (moves: m1, m2)" in capsys.readouterr().err
    assert main(["move", "abort", "--config", str(config), "m1"]) == 0
    (queued,) = StateStore(None, checkpoint).inbox()
    assert queued["words"] == "move abort m1" and queued["command"]["move"] == "m1"
    from streaming.storage.state_store import command_of

    assert command_of(queued).words() == "move abort m1"
    switch = ["move", "switch", "--config", str(config), "m1"]
    assert main([*switch, "--frozen", "s3=bin.000003:120"]) == 2  # no --switched
    assert "move switch needs --frozen per from source and --switched" in capsys.readouterr().err
    assert main([*switch, "--frozen", "s3=bin.000003", "--switched", "bin.000007:4"]) == 2
    assert "'bin.000003' is no binlog position FILE:POS" in capsys.readouterr().err
    args = ["--frozen", "s3=bin.000003:120", "--switched", "bin.000007:4"]
    assert main([*switch, *args]) == 2  # m1's switch marker was read
    assert "move m1 is switching" in capsys.readouterr().err
    progress["m1"]["state"] = "copying"
    StateStore(None, checkpoint).save(5, {"batch": 5, "locks": [], "stats": {}, "moves": moves})
    assert main([*switch, *args]) == 0
    queued = StateStore(None, checkpoint).inbox()[-1]
    command = command_of(queued)
    assert command.words() == "move switch m1 --frozen s3=bin.000003:120 --switched bin.000007:4"
    assert (command.frozen, command.switched) == ((("s3", ("bin.000003", 120)),), ("bin.000007", 4))


def test_locks_lists_a_page_of_held_shards_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At thousands of held shards: 20 per target by default, the rest counted;
    ``--shards 0`` lists every one; ``--json`` always has all."""
    import json

    checkpoint = (tmp_path / "ck").as_uri()
    config = tmp_path / "job.yaml"
    config.write_text(CONFIG.format(checkpoint=checkpoint))
    blocked = [f"s1.db_{i // 16}.orders_{i % 16}" for i in range(100)]
    lock = {"target": "shop.orders", "mode": "pessimistic", "stage": "waiting", "shards": 200,
            "blocked": blocked, "conflict": None, "columns": {},
            "pending_ddl": [{"shard": s, "sql": "ALTER TABLE t ADD c INT"} for s in blocked]}  # fmt: skip
    StateStore(None, checkpoint).save(3, {"batch": 3, "locks": [lock], "stats": {}})
    assert main(["locks", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    # the 20th shard, then the count of the rest; not the 21st
    assert "s1.db_1.orders_3 and 80 more held (100 in all; --shards 0 lists them)" in out
    assert "s1.db_1.orders_4" not in out
    assert "... 80 more pending statements" in out
    assert main(["locks", "--config", str(config), "--shards", "0"]) == 0
    out = capsys.readouterr().out
    assert "s1.db_6.orders_3" in out and "more held" not in out
    assert main(["locks", "--config", str(config), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["locks"][0]["blocked"]) == 100
