"""The local broker: data round-trips through it, and stopping it leaves nothing behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import streaming.runtime._jars
from devkit.kafka_local import KafkaBroker, running
from streaming.runtime._jars import REPO_ROOT, JarsMissing, jars

pytestmark = pytest.mark.timeout(180)


@pytest.mark.kafka
def test_lz4_messages_come_back_in_key_order(kafka: KafkaBroker, topic: Callable[..., str]) -> None:
    name = topic(partitions=3)
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "compression.type": "lz4",
            "linger.ms": 5,
            # retries on a loaded machine must not reorder a partition
            "enable.idempotence": True,
        }
    )
    sent: dict[bytes, list[bytes]] = defaultdict(list)
    failed: list[str] = []
    delivered = [0]

    def report(err: Any, msg: Any) -> None:
        if err is None:
            delivered[0] += 1
        else:
            failed.append(f"{msg.value()!r}: {err}")

    for i in range(3000):
        key, value = f"k{i % 17}".encode(), f"v{i}".encode()
        producer.produce(name, key=key, value=value, on_delivery=report)
        sent[key].append(value)
    assert producer.flush(30) == 0
    # flush() counts what is still queued; a failed delivery is only told to the callback
    assert failed == [] and delivered[0] == 3000, (delivered[0], failed[:5])

    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": f"it-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    # Each partition read from its beginning, with no consumer group to coordinate (the
    # broker's group coordinator is not what this test is about).
    consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in range(3)])
    got: dict[bytes, list[bytes]] = defaultdict(list)
    partitions_seen = set()
    # A bound on the wait, not a timing check: a new consumer group's first fetch can take
    # tens of seconds on a loaded 2-core machine (the test's own timeout is 180 s).
    deadline = time.monotonic() + 120
    try:
        while sum(map(len, got.values())) < 3000 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.key()].append(msg.value())
            partitions_seen.add(msg.partition())
    finally:
        consumer.close()
    assert got == sent  # every message, and per key (so per partition) in produce order
    assert partitions_seen == {0, 1, 2}


def _gone(pid: int) -> bool:
    """No thread of ``pid`` runs (a zombie waiting for init to reap it has none)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state == "Z" and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except FileNotFoundError:
        return True


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def _port_open(bootstrap: str) -> bool:
    host, port = bootstrap.split(":")
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) == 0


@pytest.mark.kafka
def test_cli_start_status_stop_leaves_no_process(tmp_path: Path) -> None:
    """The broker outlives the CLI that started it; `stop` from another process ends it."""

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "devkit.kafka_local", *args, "--base-dir", str(tmp_path)]
        return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)

    started = cli("start")
    assert started.returncode == 0, started.stderr
    record = json.loads((tmp_path / "default" / "broker.json").read_text())
    pid, bootstrap = record["pid"], record["bootstrap"]
    try:
        assert not _gone(pid)
        assert _port_open(bootstrap)
        status = cli("status")
        assert status.returncode == 0 and bootstrap in status.stdout
        again = cli("start")  # idempotent: the same broker
        assert again.returncode == 0 and f"pid {pid}" in again.stdout
    finally:
        stopped = cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert _gone(pid)
    assert _group_members(pid) == []
    assert not _port_open(bootstrap)
    assert cli("status").returncode == 3


@pytest.mark.kafka
def test_context_manager_stops_its_broker(tmp_path: Path) -> None:
    with running("ctx", tmp_path) as broker:
        pid = broker.pid
        assert not _gone(pid)
    assert _gone(pid)
    assert _group_members(pid) == []
    assert not (tmp_path / "ctx" / "broker.json").exists()


def test_missing_jars_say_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streaming.runtime._jars, "JARS_DIR", tmp_path)
    with pytest.raises(JarsMissing, match="scripts/fetch-jars"):
        jars("kafka")
