"""Ports for the local services: drawn where outgoing connections do not go, and a broker
whose port was taken before its bind starts again on new ones."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from devkit import kafka_local, procs


def test_free_ports_lie_below_the_ephemeral_range_and_are_free() -> None:
    floor = procs._ephemeral_floor()
    ports = {procs.free_port() for _ in range(50)}
    if floor - procs._LISTEN_FLOOR >= 1000:
        assert all(procs._LISTEN_FLOOR <= p < floor for p in ports)
    assert all(procs.port_free(p) for p in ports)
    assert len(ports) > 40  # drawn, not one port over and over


def test_a_listening_port_is_never_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", procs.free_port()))
        held.listen()
        taken = held.getsockname()[1]
        other = procs.free_port()
        draws = iter([taken, taken, other])

        class Draw:
            def randrange(self, low: int, high: int) -> int:
                return next(draws)

        monkeypatch.setattr(procs.random, "SystemRandom", Draw)
        monkeypatch.setattr(procs, "_ephemeral_floor", lambda: procs._LISTEN_FLOOR + 5000)
        got = procs.free_port()
    assert got == other != taken


def test_the_bind_failure_line_is_read_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "kafka.log"
    log.write_text(
        "[x] INFO starting\n"
        "Caused by: org.apache.kafka.common.KafkaException: Socket server failed to bind"
        " to 127.0.0.1:43589: Address already in use.\n"
    )
    line = kafka_local._port_taken_line(log)
    assert line is not None and line.startswith("Socket server failed to bind")
    assert "43589" in line
    log.write_text("java.lang.OutOfMemoryError: Java heap space\n")
    assert kafka_local._port_taken_line(log) is None
    assert kafka_local._port_taken_line(tmp_path / "absent.log") is None


def _no_running(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_local, "status", lambda *a, **k: None)
    monkeypatch.setattr(kafka_local, "jars", lambda _: [Path("/jars/kafka/x.jar")])
    monkeypatch.setattr(procs, "java", lambda: "java")


def test_a_start_whose_port_was_taken_goes_again_on_new_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_running(monkeypatch)
    record = tmp_path / "b" / "ports.json"
    seen_records: list[bool] = []
    outcomes: list[object] = [
        kafka_local._PortTaken("exited", "Socket server failed to bind to 127.0.0.1:1"),
        "broker",
    ]

    def launch(name: str, sdir: Path, *rest: object) -> object:
        seen_records.append(record.exists())
        record.write_text('{"broker": 1, "controller": 2}')
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return type("B", (), {"bootstrap": "127.0.0.1:3"})()

    monkeypatch.setattr(kafka_local, "_launch", launch)
    broker = kafka_local.start("b", tmp_path)
    assert broker.bootstrap == "127.0.0.1:3"
    # the second start found no record of the first start's ports: all are picked anew
    assert seen_records == [False, False]


def _failing_launches(
    monkeypatch: pytest.MonkeyPatch, failure: Callable[[int], Exception]
) -> list[int]:
    """Every start fails with ``failure(n)`` (n: the how-manieth); the starts, counted."""
    _no_running(monkeypatch)
    calls: list[int] = []

    def launch(*args: object) -> object:
        calls.append(len(calls) + 1)
        raise failure(calls[-1])

    monkeypatch.setattr(kafka_local, "_launch", launch)
    return calls


def test_a_port_taken_at_every_start_fails_naming_the_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _failing_launches(
        monkeypatch, lambda n: kafka_local._PortTaken("exited", f"failed to bind to 127.0.0.1:{n}")
    )
    with pytest.raises(kafka_local.KafkaLocalError, match=r"127\.0\.0\.1:1.*127\.0\.0\.1:3"):
        kafka_local.start("b", tmp_path)
    assert len(calls) == kafka_local._BIND_ATTEMPTS


def test_any_other_start_failure_is_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _failing_launches(monkeypatch, lambda n: kafka_local.KafkaLocalError("did not answer"))
    with pytest.raises(kafka_local.KafkaLocalError, match="did not answer"):
        kafka_local.start("b", tmp_path)
    assert len(calls) == 1
