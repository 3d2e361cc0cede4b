"""The group store's put-if-absent on the local filesystem, raced by several processes and
threads: one winner per name, no record overwritten or partly read, a dense log."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest

from streaming.storage.group_store import (
    GroupStore,
    GroupStoreError,
    LocalRecords,
    group_store,
    probe,
)

PROCESSES, THREADS, APPENDS = 3, 4, 15
# Fresh interpreters, not forks of a test process that may run JVM and client threads.
SPAWN = multiprocessing.get_context("spawn")


def race_threads(
    store: GroupStore,
    worker: str,
    threads: int,
    appends: int,
    pad: int,
    outcomes: list[bool] | None = None,
) -> None:
    """``threads`` threads of one writer, each ``appends`` records to the log (``pad``
    bytes: a torn write would show as invalid JSON); with ``outcomes``, each first tries
    for one name and records whether it won."""

    def one(thread: int) -> None:
        if outcomes is not None:
            outcomes.append(store.create_new("owner/000000000001.json", {"worker": worker}))
        for i in range(appends):
            store.append({"writer": f"{worker}/{thread}", "i": i, "pad": "x" * pad})

    pool = [threading.Thread(target=one, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(180)


def _race_appends(root: str, worker: int) -> None:
    race_threads(group_store(root), str(worker), THREADS, APPENDS, 20_000)


def _race_one_name(
    root: str, worker: int, results: multiprocessing.Queue[tuple[int, bool]]
) -> None:
    store = group_store(root)
    results.put((worker, store.create_new("owner/000000000001.json", {"worker": worker})))


def test_processes_and_threads_appending_fill_every_number_once(tmp_path: Path) -> None:
    root = (tmp_path / "group").as_uri()
    procs = [SPAWN.Process(target=_race_appends, args=(root, w)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(120)
            assert p.exitcode == 0
    finally:
        for p in procs:  # none outlives the test, even one that hung
            if p.is_alive():
                p.kill()
    store = group_store(root)
    total = PROCESSES * THREADS * APPENDS
    assert store.numbers("log") == list(range(total))  # dense: no gap, no number twice
    records = list(store.log())
    assert [n for n, _ in records] == list(range(total))
    seen = [(r["writer"], r["i"]) for _, r in records]
    assert len(set(seen)) == total  # every append is there once: nothing overwritten
    for writer in {w for w, _ in seen}:  # each writer's appends in the order it made them
        assert [i for w, i in seen if w == writer] == list(range(APPENDS))
    assert not [p for p in (tmp_path / "group" / "log").iterdir() if p.name.startswith(".")]


def test_one_winner_per_name(tmp_path: Path) -> None:
    root = (tmp_path / "group").as_uri()
    results: multiprocessing.Queue[tuple[int, bool]] = SPAWN.Queue()
    procs = [SPAWN.Process(target=_race_one_name, args=(root, w, results)) for w in range(6)]
    for p in procs:
        p.start()
    try:
        outcomes = dict(results.get(timeout=60) for _ in procs)
        for p in procs:
            p.join(60)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    winners = [w for w, won in outcomes.items() if won]
    assert len(winners) == 1
    assert group_store(root).read("owner/000000000001.json") == {"worker": winners[0]}


def test_the_log_is_read_up_to_its_first_gap(tmp_path: Path) -> None:
    store = group_store(str(tmp_path / "g"))
    assert [store.append({"i": i}) for i in range(3)] == [0, 1, 2]
    assert [n for n, _ in store.log(after=0)] == [1, 2]
    # a number written out of turn (by hand) is not read past a missing one
    assert store.create_new("log/000000000004.json", {"i": 4})
    assert [n for n, _ in store.log()] == [0, 1, 2]
    assert store.append({"i": 5}) == 5  # the next number after the highest taken


def test_a_record_that_is_not_a_json_object_is_an_error(tmp_path: Path) -> None:
    store = group_store(str(tmp_path / "g"))
    (tmp_path / "g" / "log").mkdir(parents=True)
    (tmp_path / "g" / "log" / "000000000000.json").write_text("[1]")
    with pytest.raises(GroupStoreError, match=r"000000000000\.json is not a JSON object"):
        list(store.log())


def test_the_probe_accepts_put_if_absent_and_refuses_a_store_that_overwrites(
    tmp_path: Path,
) -> None:
    probe(group_store(str(tmp_path / "ok")))

    class Overwrites(LocalRecords):
        def create_new(self, uri: str, data: bytes) -> bool:
            path = self._path(uri)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(data)  # a store without create-if-absent
            return True

    with pytest.raises(GroupStoreError, match="cannot create a record only if it is absent"):
        probe(GroupStore(Overwrites(), str(tmp_path / "bad")))


def test_stores_without_create_if_absent_are_refused_with_the_reason() -> None:
    for root in ("gs://bucket/lake/g", "s3://bucket/lake/g", "wasbs://c@a/lake/g"):
        with pytest.raises(GroupStoreError, match="no create-if-absent"):
            group_store(root)
    with pytest.raises(GroupStoreError, match="needs a Spark session"):
        group_store("s3a://bucket/lake/_shardmerge/groups/g")  # tests/integration: on S3
