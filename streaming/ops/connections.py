"""The ops server's connections: waitress, with a deadline per request and caps. Internal.

waitress keeps every open connection on one I/O thread and answers with a fixed pool of
worker threads, so a held connection costs a file descriptor, not a thread. What it does
not bound is how long a connection may hold its slot: its ``channel_timeout`` closes only
connections silent for that long, so one that trickles a header byte every few seconds is
kept for ever, and ``connection_limit`` of them silence the server (nothing is accepted
while the cap is reached). Three limits keep it answering (docs/operations.md, "Security"):

1. **A deadline per request** (``ops.request_timeout_s``): a connection must send a
   whole request, headers and body, within that time of being opened (its first
   request) or of the first byte of a later one, else it is closed in the next
   maintenance pass, whatever it keeps sending. Idle connections between requests are
   still waitress's ``channel_timeout`` (``ops.idle_timeout_s``).
2. **A cap sized for idle sockets** (``ops.max_connections``, at most half the process's
   open-file limit: the job needs descriptors too).
3. **A cap per remote address** (``ops.max_connections_per_peer``): a further connection
   from that address is closed as soon as it is accepted. Loopback peers are not
   counted: every local process is 127.0.0.1 (or ::1), so a per-address cap there would
   let one local process lock out every other, the scraper and a local TLS proxy
   included. On loopback the deadline is the defence.

The deadline is kept by waitress's own maintenance pass (``BaseWSGIServer.maintenance``,
run every ``cleanup_interval`` seconds from the I/O thread), here once a second; the
per-address cap by the server's ``accept``, which waitress's ``handle_accept`` calls and
whose ``None`` means "nothing to accept".
"""

from __future__ import annotations

import ipaddress
import logging
import resource
import socket
import time
from collections import Counter
from typing import Any, cast

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask

from shardmerge.printable import printable
from streaming.config import OpsSettings

__all__ = ["THREADS", "Server", "listen"]

log = logging.getLogger("shardmerge.ops")

MAX_BODY = 64 * 1024
MAX_HEADERS = 16 * 1024
THREADS = 4
SWEEP_S = 1  # the maintenance pass: request deadlines are kept to about a second
REPORT_S = 60.0  # closed and refused connections are logged at most this often


class _ShortQueue(logging.Filter):
    """waitress logs ``Task queue depth is N`` whenever a request waits for a worker: the
    dashboard asks several things at once, so a depth below the pool's size is the normal
    case, not news. Deeper queues are still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        depth = record.args[0] if isinstance(record.args, tuple) and record.args else None
        return not (isinstance(depth, int) and depth < THREADS)


logging.getLogger("waitress.queue").addFilter(_ShortQueue())


class _Refused(ErrorTask):
    """waitress's answer to a request it cannot parse (400, 413, 431...), logged once."""

    def execute(self) -> None:
        request: Any = self.request
        error: Any = request.error  # a waitress.utilities.Error: code, reason, body
        peer = self.channel.addr[0] if self.channel.addr else "?"
        log.warning(
            "ops: refused a malformed request from %s: %s %s (%s)",
            peer,
            error.code,
            error.reason,
            printable(error.body),
        )
        super().execute()


class _Channel(HTTPChannel):
    """waitress's channel, which also knows since when it waits for a whole request.

    ``waiting_since`` (``time.monotonic``) is when the current request's clock started:
    the connection's opening for its first request, the first byte of a later one.
    ``None`` once every byte received made whole requests: while they are answered, and
    between requests (``channel_timeout``'s part).
    """

    error_task_class = _Refused
    waiting_since: float | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting_since = time.monotonic()

    def received(self, data: bytes) -> bool:
        now = time.monotonic()
        if self.waiting_since is None:
            self.waiting_since = now
        before = self.request
        taken = super().received(data)
        if self.request is None:  # no request left half-read
            self.waiting_since = None
        elif before is not None and self.request is not before:
            self.waiting_since = now  # one came whole, the next began in the same bytes
        return taken


def _loopback(peer: str) -> bool:
    try:
        return ipaddress.ip_address(peer).is_loopback
    except ValueError:
        return False


def _connection_cap(wanted: int) -> int:
    """``wanted``, or half the process's open-file limit when that is lower: each
    connection holds a descriptor, and the job (Kafka clients, the state files, Py4J)
    needs the others."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or wanted <= soft // 2:
        return wanted
    cap = max(1, soft // 2)
    log.warning(
        "ops: max_connections %d is above half this process's open-file limit (%d); "
        "using %d (raise the limit, ulimit -n, to allow more)",
        wanted,
        soft,
        cap,
    )
    return cap


def listen(bind: str, port: int) -> socket.socket:
    """A listening socket on ``bind`` (an IPv4 or IPv6 address, or a name)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        bind, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class Server(TcpWSGIServer):
    """waitress's TCP server on ``sock`` with the limits of ``settings``; ``run()`` serves
    until the socket map is closed."""

    channel_class = _Channel

    def __init__(self, app: Any, sock: socket.socket, settings: OpsSettings) -> None:
        self.request_timeout = settings.request_timeout_s
        self.per_peer = settings.max_connections_per_peer
        self.timed_out: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.next_report = 0.0
        adj = Adjustments(
            sockets=[sock],
            threads=THREADS,
            connection_limit=_connection_cap(settings.max_connections),
            channel_timeout=settings.idle_timeout_s,
            cleanup_interval=SWEEP_S,
            max_request_body_size=MAX_BODY,
            max_request_header_size=MAX_HEADERS,
            expose_tracebacks=False,
            ident="shardmerge",
            asyncore_use_poll=True,
        )
        # As waitress's create_server builds its server for a socket it is given.
        sockinfo = (sock.family, sock.type, sock.proto, sock.getsockname())
        super().__init__(app, _sock=sock, adj=adj, bind_socket=False, sockinfo=sockinfo)

    def _channels(self) -> list[_Channel]:
        # waitress keeps them by descriptor (the stubs type it as one channel)
        return list(cast("dict[int, _Channel]", self.active_channels).values())

    def accept(self) -> tuple[socket.socket, Any] | None:
        pair = super().accept()
        if pair is None:
            return None
        conn, addr = pair
        peer = str(addr[0])
        if not _loopback(peer):
            held = sum(1 for c in self._channels() if c.addr and c.addr[0] == peer)
            if held >= self.per_peer:
                conn.close()
                self.refused[peer] += 1
                return None
        return pair

    def maintenance(self, now: float) -> None:
        # idle connections (channel_timeout); waitress passes time.time(), its stubs say int
        super().maintenance(now)  # type: ignore[arg-type]
        cutoff = time.monotonic() - self.request_timeout
        for channel in self._channels():
            since = channel.waiting_since
            if since is None or since >= cutoff or channel.requests or channel.will_close:
                continue
            channel.will_close = True  # the I/O loop closes it on its next pass
            if channel.request is not None:
                self.timed_out[str(channel.addr[0]) if channel.addr else "?"] += 1
            # else it sent nothing: browsers open spare connections they may never use
        self._report()

    def _report(self) -> None:
        """One line a minute at most for connections closed with half a request or
        refused (an attack opens them by the thousand; the log must stay readable)."""
        now = time.monotonic()
        if now < self.next_report or not (self.timed_out or self.refused):
            return
        self.next_report = now + REPORT_S
        if self.timed_out:
            log.warning(
                "ops: closed %d connection(s) that sent part of a request but not all of "
                "it within %d s (ops.request_timeout_s), from %s",
                self.timed_out.total(),
                self.request_timeout,
                _peers(self.timed_out),
            )
        if self.refused:
            log.warning(
                "ops: refused %d connection(s) from addresses holding %d already "
                "(ops.max_connections_per_peer), from %s",
                self.refused.total(),
                self.per_peer,
                _peers(self.refused),
            )
        self.timed_out.clear()
        self.refused.clear()


def _peers(counts: Counter[str]) -> str:
    shown = ", ".join(f"{peer} ({n})" for peer, n in counts.most_common(3))
    more = len(counts) - 3
    return f"{shown} and {more} more address(es)" if more > 0 else shown
