"""The ops server keeps answering however many connections are held open (issue "64
trickling connections silence the ops server": 70 connections each sending one header
byte every 8 s made every real request time out).

A real server on a free port with no job behind it: these tests only ask for ``/metrics``
of an empty registry, so they need no SparkSession (tests/integration/test_ops_api.py
serves a real job's state). Each held connection is a real socket; the ones beyond the
cap wait in the kernel's accept queue, ahead of the real request.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.registry import CollectorRegistry
from pydantic import ValidationError

from streaming.config import OpsSettings
from streaming.ops import connections
from streaming.ops.server import OpsServer

CAP = 64  # the cap the reproduction filled
DEADLINE_S = 2
ANSWER_WITHIN_S = DEADLINE_S + 5  # the deadline, the once-a-second sweep, and slack
TOKEN = "t0k-en-5f1c9a3e7b2d4086c1e9a7f3b5d2c4e6"
# A request head that never ends: its bytes are sent one at a time.
SLOW_HEAD = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4096


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., OpsServer]]:
    servers: list[OpsServer] = []

    def start(**ops: object) -> OpsServer:
        where = str(tmp_path / f"ops-token-{len(servers)}")
        settings = OpsSettings.model_validate({"port": 0, "generated_token_file": where, **ops})
        server = OpsServer(settings, views=None, registry=CollectorRegistry()).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def get_metrics(server: OpsServer, host: str = "127.0.0.1", timeout: float = 10) -> int:
    """GET /metrics on a new connection: its status, or TimeoutError when not answered."""
    port = server.address[1]
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"Host": f"{host}:{port}"}
    if not server.generated:
        headers["Authorization"] = f"Bearer {server.token.decode()}"
    try:
        conn.request("GET", "/metrics", headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@contextlib.contextmanager
def held(address: tuple[str, int], count: int, *, trickle: bool) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``address``, sending nothing, or one byte of a request
    head each a second (the first at once) when ``trickle``."""
    socks = [socket.create_connection(address, timeout=5) for _ in range(count)]
    stop = threading.Event()

    def drip() -> None:
        for i in range(len(SLOW_HEAD)):
            for sock in socks:
                with contextlib.suppress(OSError):  # closed by the server: the point
                    sock.send(SLOW_HEAD[i : i + 1])
            if stop.wait(1.0):
                return

    dripping = threading.Thread(target=drip, daemon=True)
    if trickle:
        dripping.start()
    try:
        yield socks
    finally:
        stop.set()
        if trickle:
            dripping.join()
        for sock in socks:
            sock.close()


def eventually(condition: Callable[[], bool], within: float = 5) -> bool:
    """Whether ``condition`` holds within ``within`` seconds (the server works on its own
    thread; a busy machine is slower)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def closed_by_server(sock: socket.socket, wait: float = 0) -> bool:
    """Whether the server closed ``sock`` (an end of stream or a reset waits in it)."""
    if not select.select([sock], [], [], wait)[0]:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


@pytest.mark.parametrize("trickle", [True, False], ids=["trickling", "idle"])
def test_more_held_connections_than_the_cap_do_not_silence_the_server(serve, caplog, trickle):
    """CAP + 10 connections that never send a whole request, trickling a byte a second or
    silent: every slot is taken and ten more wait, yet a real request is answered once
    the deadline has closed them. Before the deadline existed the trickling ones were kept
    for ever (waitress's idle timeout counts any byte as activity) and the silent ones 30 s.
    The trickling ones are logged, in one line; the silent ones, as a browser's spare
    connections, are not."""
    server = serve(max_connections=CAP, request_timeout_s=DEADLINE_S)
    with (
        caplog.at_level(logging.WARNING, logger="shardmerge.ops"),
        held(server.address, CAP + 10, trickle=trickle),
    ):
        assert eventually(lambda: server.httpd.in_connection_overflow)  # every slot taken
        started = time.monotonic()
        assert get_metrics(server, timeout=ANSWER_WITHIN_S) == 200
        assert time.monotonic() - started < ANSWER_WITHIN_S
    closed = [r.getMessage() for r in caplog.records if "part of a request" in r.getMessage()]
    assert len(closed) == (1 if trickle else 0), closed


def test_a_kept_alive_connection_idles_but_its_next_request_has_the_deadline(serve):
    """Between requests a connection may idle past the deadline (the idle timeout is
    longer; a scraper keeps its connection); the clock of its next request starts at that
    request's first byte, and trickling it does not keep the connection."""
    server = serve(request_timeout_s=DEADLINE_S, idle_timeout_s=30)
    port = server.address[1]
    whole = f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    with socket.create_connection(server.address, timeout=ANSWER_WITHIN_S) as sock:
        sock.sendall(whole)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")  # empty registry: headers only
        time.sleep(DEADLINE_S + connections.SWEEP_S + 0.2)
        assert not closed_by_server(sock)
        sock.sendall(whole)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        for i in range(len(SLOW_HEAD)):
            with contextlib.suppress(OSError):
                sock.send(SLOW_HEAD[i : i + 1])
            if closed_by_server(sock, wait=0.5) or time.monotonic() - started > ANSWER_WITHIN_S:
                break
        took = time.monotonic() - started
    assert DEADLINE_S <= took < ANSWER_WITHIN_S


def own_address() -> str:
    """This machine's IPv4 address on its default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1 (RFC 5737)
        except OSError as e:
            pytest.skip(f"no non-loopback IPv4 address here: {e}")
        address = str(probe.getsockname()[0])
    if ipaddress.ip_address(address).is_loopback:
        pytest.skip("no non-loopback IPv4 address here")
    return address


def test_one_remote_address_cannot_take_every_connection(serve, caplog):
    """A remote address holds at most ops.max_connections_per_peer connections; further
    ones are closed at once, and logged. Loopback peers are not counted (every local
    process is 127.0.0.1): more local connections than that stay open and are served."""
    here = own_address()
    server = serve(
        bind="0.0.0.0",
        token=TOKEN,
        max_connections=CAP,
        max_connections_per_peer=4,
        request_timeout_s=30,  # not the deadline closing them
    )
    port = server.address[1]
    with caplog.at_level(logging.WARNING, logger="shardmerge.ops"):
        remote = [socket.create_connection((here, port), timeout=5) for _ in range(4 + 3)]
        local = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
        try:
            assert eventually(lambda: len(server.httpd.active_channels) == 4 + 8)
            assert eventually(lambda: sum(closed_by_server(s) for s in remote) == 3)
            assert not any(closed_by_server(s) for s in local)
            assert get_metrics(server, host="127.0.0.1", timeout=ANSWER_WITHIN_S) == 200
            eventually(  # the report comes with the next sweep
                lambda: any("per_peer" in r.getMessage() for r in caplog.records)
            )
        finally:
            for sock in remote + local:
                sock.close()
    (line,) = [r.getMessage() for r in caplog.records if "per_peer" in r.getMessage()]
    assert "refused 3 connection(s)" in line and f"{here} (3)" in line, line


def test_the_cap_stays_under_half_the_open_file_limit(serve, monkeypatch, caplog):
    """Each connection holds a descriptor, and the job needs the others."""
    monkeypatch.setattr(connections.resource, "getrlimit", lambda _: (300, 4096))
    with caplog.at_level(logging.WARNING, logger="shardmerge.ops"):
        server = serve(max_connections=256)
    assert server.httpd.adj.connection_limit == 150
    assert any("open-file limit" in r.getMessage() for r in caplog.records)


def test_a_per_peer_cap_above_the_cap_is_refused():
    with pytest.raises(ValidationError, match="above max_connections"):
        OpsSettings(max_connections=16, max_connections_per_peer=32)


def test_a_queue_shorter_than_the_pool_is_not_logged(caplog):
    """The dashboard's parallel requests queue one or two behind the workers: waitress's
    ``Task queue depth is 1`` is dropped, a queue as long as the pool is still logged."""
    from waitress.task import ThreadedTaskDispatcher

    dispatcher = ThreadedTaskDispatcher()  # no worker threads: every task waits
    with caplog.at_level(logging.WARNING, logger="waitress.queue"):
        for _ in range(connections.THREADS):
            dispatcher.add_task(object())
    depths = [r.getMessage() for r in caplog.records if r.name == "waitress.queue"]
    assert depths == [f"Task queue depth is {connections.THREADS}"]
