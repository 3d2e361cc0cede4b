"""The job's state store through Hadoop's FileSystem API of a real SparkSession: restore
order, fixed intents, the commit-marker protocol (a half-written record is never read),
pruning, and the checkpoint's id. Runs on the local filesystem here; the object-store
variant runs the same checks on S3 (test_object_store.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.commands import CommandError, OperatorCommand, parse_command
from coordinator.ids import ShardId, TargetId
from streaming.storage.state_store import KEEP, StateStore, StateStoreError, command_of

pytestmark = [pytest.mark.spark]


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    return tmp_path.as_uri()  # file:///...: a URI, as on a cluster


def files(store: StateStore, folder: str) -> list[str]:
    return store.fs.names(store.uri(folder))


def restores_from_the_newest_earlier_state(store: StateStore) -> None:
    assert store.load_before(0) is None and store.latest() is None
    store.save(3, {"batch": 3})
    store.save(5, {"batch": 5})
    assert store.load_before(5) == {"batch": 3}  # a re-run of batch 5 starts from before it
    assert store.load_before(6) == {"batch": 5}
    assert store.latest() == (5, {"batch": 5})
    store.save(5, {"batch": 5, "attempt": 2})  # batch 5 run again: its newest state wins
    assert store.latest() == (5, {"batch": 5, "attempt": 2})


def a_rerun_batch_applies_exactly_the_commands_of_its_first_run(store: StateStore) -> None:
    first = store.submit(parse_command("unlock a.b --force-remove"))
    chosen = store.intent(7, applied=set())
    assert [c["id"] for c in chosen] == [first]
    store.submit(
        parse_command("unlock a.b --shard s.d.t --action skip")
    )  # arrives after the first run
    assert store.intent(7, applied=set()) == chosen
    assert len(store.intent(8, applied={first})) == 1
    store.forget_commands({first})
    assert [c["words"] for c in store.inbox()] == ["unlock a.b --shard s.d.t --action skip"]


def a_withdrawn_command_is_never_applied(store: StateStore) -> None:
    first = store.submit(parse_command("unlock a.b --force-remove"))
    second = store.submit(parse_command("unlock a.b --shard s.d.t --action skip"))
    assert [c["id"] for c in store.intent(7, applied=set())] == [first, second]
    assert store.cancel(first) is None
    # not even by the batch whose intent fixed it, when Spark runs that batch again
    assert [c["id"] for c in store.intent(7, applied=set())] == [second]
    assert [c["id"] for c in store.inbox()] == [second]
    assert "no queued command nope" in (store.cancel("nope") or "")
    store.save(7, {"batch": 7})
    store.forget_commands({second})
    assert store.inbox() == []
    assert "no queued command" in (store.cancel(first) or "")
    # the withdrawal stays while intent 7 is kept (a run of batch 7 again leaves it out)
    assert [c["id"] for c in store.intent(7, applied=set())] == [second]
    for batch in range(8, 8 + KEEP + 1):
        store.save(batch, {"batch": batch})
    assert store.cancelled() == set()


def a_half_written_record_is_never_read(store: StateStore) -> None:
    store.save(1, {"batch": 1})
    # A writer died after the data of batch 2's state, before its marker; and one died
    # half-way through the data of batch 3's (an object store shows no such file; a
    # filesystem can).
    store.fs.create(store.uri("state", "000000000002-000001.json"), b'{"batch": 2}')
    store.fs.create(store.uri("state", "000000000003-000001.json"), b'{"bat')
    assert store.latest() == (1, {"batch": 1})
    assert store.load_before(4) == {"batch": 1}
    store.save(2, {"batch": 2, "rerun": True})  # the re-run takes the next name
    assert store.latest() == (2, {"batch": 2, "rerun": True})
    assert "000000000002-000002.ok" in files(store, "state")
    # A dead writer's half of an intent: the re-run fixes the intent anew, once.
    store.fs.create(store.uri("intent", "000000000009-000001.json"), b"[")
    store.submit(parse_command("unlock a.b --retry"))
    fixed = store.intent(9, applied=set())
    assert [c["words"] for c in fixed] == ["unlock a.b --retry"]
    assert store.intent(9, applied=set()) == fixed


def old_states_and_intents_are_pruned(store: StateStore) -> None:
    for batch in range(KEEP + 10):
        store.intent(batch, applied=set())
        store.save(batch, {"batch": batch})
    store.save(KEEP + 9, {"batch": KEEP + 9, "attempt": 2})
    states = files(store, "state")
    assert len(states) == 2 * KEEP  # one record (data + marker) per kept batch
    assert min(states).startswith(f"{10:012d}-")
    assert f"{KEEP + 9:012d}-000001.json" not in states  # the superseded attempt
    assert min(files(store, "intent")).startswith(f"{10:012d}-")
    assert store.load_before(KEEP + 9) == {"batch": KEEP + 8}


def the_checkpoint_id_is_created_once(store: StateStore, reopen: Callable[[], StateStore]):
    first = store.app_id()
    assert first.startswith("shardmerge-") and reopen().app_id() == first


def a_failure_is_kept_until_a_batch_succeeds(store: StateStore) -> None:
    store.save_failure({"batch": 4, "error": "strict conflict"})
    assert store.failure() == {"batch": 4, "error": "strict conflict"}
    store.save(4, {"batch": 4})
    assert store.failure() is None and files(store, "failed") == []


def a_committed_record_that_cannot_be_read_is_an_error(store: StateStore) -> None:
    store.save(1, {"batch": 1})
    # A storage that lost the data of a record after its marker was written (a crash
    # before the bytes reached the disk, without hsync): an error naming the file.
    store.fs.create(store.uri("state", "000000000002-000001.json"), b"")
    store.fs.create(store.uri("state", "000000000002-000001.ok"), b"")
    with pytest.raises(StateStoreError, match=r"000000000002-000001\.json has a commit marker"):
        store.latest()
    with pytest.raises(StateStoreError, match="is empty"):
        store.load_before(3)


def a_command_is_stored_as_its_value(store: StateStore) -> None:
    # Names an operator may have to type: a space, a quote, words that look like options.
    command = OperatorCommand.of(
        TargetId("shop", "orders --force-remove"), "skip", ShardId("s1", "db", "o'brien items")
    )
    store.submit(command)
    (record,) = store.inbox()
    assert record["command"] == {
        "target": "shop.orders --force-remove", "action": "skip",
        "shard": "s1.db.o'brien items", "statements": [],
    }  # fmt: skip
    assert command_of(record) == command
    assert parse_command(record["words"]) == command  # the words read back as the value
    # A record queued by an older version holds words only: still read, by its words.
    legacy = {"id": "1-a", "words": "unlock a.b --shard s.d.t --action exec"}
    assert command_of(legacy) == OperatorCommand.of(
        TargetId("a", "b"), "exec", ShardId("s", "d", "t")
    )
    with pytest.raises(CommandError, match="No closing quotation"):
        command_of({"id": "1-b", "words": "unlock a.b --shard o'brien --action skip"})


CHECKS = [
    a_command_is_stored_as_its_value,
    restores_from_the_newest_earlier_state,
    a_committed_record_that_cannot_be_read_is_an_error,
    a_rerun_batch_applies_exactly_the_commands_of_its_first_run,
    a_withdrawn_command_is_never_applied,
    a_half_written_record_is_never_read,
    old_states_and_intents_are_pruned,
    a_failure_is_kept_until_a_batch_succeeds,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_state_store(spark, checkpoint: str, check: Callable[[StateStore], None]) -> None:
    check(StateStore(spark, checkpoint))


def test_a_file_checkpoint_is_synced_to_disk(spark, checkpoint: str) -> None:
    store = StateStore(spark, checkpoint)
    assert store.fs.create(store.uri("probe", "synced.json"), b"{}") is True


def test_the_checkpoint_id_is_created_once_and_differs_per_checkpoint(spark, tmp_path: Path):
    one, two = (tmp_path / "one").as_uri(), (tmp_path / "two").as_uri()
    the_checkpoint_id_is_created_once(StateStore(spark, one), lambda: StateStore(spark, one))
    assert StateStore(spark, one).app_id() != StateStore(spark, two).app_id()


def test_states_of_the_earlier_layout_are_refused_not_ignored(spark, tmp_path: Path):
    (tmp_path / "shardmerge" / "state").mkdir(parents=True)
    (tmp_path / "shardmerge" / "state" / "000000000003.json").write_text(json.dumps({}))
    with pytest.raises(StateStoreError, match="earlier shardmerge layout"):
        StateStore(spark, tmp_path.as_uri()).latest()
