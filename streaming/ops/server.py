"""The driver's HTTP server: ``/metrics``, the dashboard and the JSON operator API.

Routes:

- ``GET /``, ``GET /static/<file>``: the dashboard (files vendored in the package). Never
  behind the token: they hold no data, and the page must load to ask for it.
- ``GET /metrics``: Prometheus exposition format.
- ``GET /api/locks``, ``/api/shards``, ``/api/progress``, ``/api/dead-letters``,
  ``/api/moves`` (the declared moves' states), ``/api/group`` (the group's members, owner
  and versions, docs/groups.md), ``/api/commands`` (the commands queued for
  the next micro-batch).
- ``POST /api/commands`` with ``{"target", "action", "shard"?, "statements"?}``: an
  operator command, queued in the same durable inbox as ``shardmerge unlock`` (it survives
  a restart and applies at the next micro-batch). Answers 202 with its id and words.
- ``POST /api/commands/cancel`` with ``{"id"}``: withdraws a queued command (as
  ``shardmerge unlock --cancel``); 404 when no such command is queued.

Security (docs/operations.md, "Security"): binds 127.0.0.1 by default; another address
needs ``ops.token``. With a configured token every request but the page's own files needs
``Authorization: Bearer <token>`` (never a query parameter: the page takes the token from
its URL's fragment, which no browser sends). Without one, the server makes a token at
start, writes it to a 0600 file and logs the page's URL with it in the fragment; GETs on
loopback need no token, every POST needs that one, so no other local process can queue a
command without reading the owner's file. Without a configured token the Host header must
name a loopback address (no DNS rebinding). Commands are POST only, with a JSON body; a
POST from another origin is refused (403); no CORS header is ever sent.

The server is waitress (pure Python, ``streaming/ops/connections.py``): a fixed pool of
worker threads, open connections kept on one I/O thread, a deadline for each request
(``ops.request_timeout_s``, however slowly its bytes trickle in), at most
``ops.max_connections`` open connections and ``ops.max_connections_per_peer`` from one
remote address, strict request parsing (a malformed request line or ``Content-Length``
is answered 400 by waitress and logged as one line).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from http import HTTPStatus
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from coordinator.commands import CommandError, OperatorCommand, refusal
from coordinator.ids import ShardId, TargetId
from shardmerge.printable import printable
from streaming.config import LOOPBACK, OpsSettings
from streaming.fs.local import write_synced
from streaming.ops.connections import Server, listen

__all__ = ["OpsServer", "command_from_json"]

log = logging.getLogger("shardmerge.ops")

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
API = ("locks", "shards", "progress", "dead-letters", "commands", "moves", "group")
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'none'",
}
CACHE_S = 1.0

Answer = tuple[HTTPStatus, str, bytes]


class ApiError(Exception):
    """An answer other than 200 (not a failure of the job: the request was wrong)."""

    def __init__(self, status: HTTPStatus, message: str, **headers: str) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def page_held(locks: dict[str, Any], query: str) -> dict[str, Any]:
    """``/api/locks`` with each target's held shards counted (``held_count``,
    ``held_rows``: every held shard) and, with ``held=N`` (and ``offset=M``) in the query,
    only N of them listed from the M-th: the dashboard asks for a page, so 4,096 held shards
    do not travel on every refresh; ``shard_schemas`` then holds at most N shards, those
    that differ from the joined schema first (``shard_schemas_count``: all).

    ``shard=TEXT`` keeps the held shards whose name contains TEXT (any case) before the
    page is cut (``held_matching``: how many matched); ``target=NAME`` answers for that
    target only. A parameter that is not a whole number >= 0, or one not named here, is a
    400 that names it."""
    params = parse_qs(query, keep_blank_values=True)
    limits: dict[str, int | None] = {"held": None, "offset": 0}
    for name in params:
        if name not in (*limits, "shard", "target"):
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                f"/api/locks takes held, offset, shard and target, not {name!r}",
            )
    for name in limits:
        if name in params:
            text = params[name][-1]
            if not text.isdigit():
                raise ApiError(
                    HTTPStatus.BAD_REQUEST, f"{name} must be a whole number >= 0, not {text!r}"
                )
            limits[name] = int(text)
    start, limit = limits["offset"] or 0, limits["held"]
    needle = params["shard"][-1].casefold() if "shard" in params else ""
    only = params["target"][-1] if "target" in params else None
    targets = []
    for t in locks["targets"]:
        if only is not None and t["target"] != only:
            continue
        held, schemas = t["held"], t["shard_schemas"]
        matching = [h for h in held if needle in h["shard"].casefold()] if needle else held
        if limit is not None:
            # the shards that differ from the joined schema (or are held) first
            schemas = sorted(schemas, key=lambda s: not (
                s["held"] or s["missing"] or s["extra"] or s["retyped"]))[:limit]  # fmt: skip
        shown = matching[start:] if limit is None else matching[start : start + limit]
        targets.append(
            {**t, "held": shown, "held_count": len(held), "held_matching": len(matching),
             "held_offset": start, "held_rows": sum(h["held_rows"] for h in held),
             "shard_schemas": schemas, "shard_schemas_count": len(t["shard_schemas"])}
        )  # fmt: skip
    return {**locks, "targets": targets}


def command_from_json(body: dict[str, Any]) -> OperatorCommand:
    """An operator command from the API's JSON: each field is a value, never words."""
    unknown = set(body) - {"target", "action", "shard", "statements"}
    if unknown:
        raise CommandError(f"unknown field(s) {', '.join(sorted(map(repr, unknown)))}")
    for field in ("target", "shard"):
        if body.get(field) is not None and not isinstance(body[field], str):
            raise CommandError(f"{field} must be a string")
    statements = body.get("statements") or []
    if not isinstance(statements, list) or not all(isinstance(s, str) for s in statements):
        raise CommandError("statements must be a list of SQL strings")
    try:
        return OperatorCommand.of(
            TargetId.parse(body.get("target") or ""),
            str(body.get("action")),
            ShardId.parse(body["shard"]) if body.get("shard") else None,
            tuple(statements),
        )
    except ValueError as e:
        raise CommandError(str(e)) from e


def token_path(settings: OpsSettings, port: int) -> str:
    """Where a generated token is written: ``ops.generated_token_file``, or
    ``~/.shardmerge/ops-token-<port>``."""
    if settings.generated_token_file:
        return settings.generated_token_file
    return os.path.join(os.path.expanduser("~"), ".shardmerge", f"ops-token-{port}")


def _write_secret(path: str, text: str) -> None:
    """``text`` into a new file only its owner can read (a local path, not a data URI)."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    write_synced(tmp, (text + "\n").encode(), mode=0o600)
    os.replace(tmp, path)


class OpsServer:
    def __init__(self, settings: OpsSettings, views: Any, registry: CollectorRegistry) -> None:
        self.settings = settings
        self.views = views
        self.registry = registry
        sock = listen(settings.bind, settings.port)
        self.address: tuple[str, int] = tuple(sock.getsockname()[:2])
        configured = settings.token.get_secret_value() if settings.token else ""
        self.generated = not configured
        self.token_file: str | None = None
        if configured:
            token = configured
        else:
            token = secrets.token_urlsafe(32)
            self.token_file = token_path(settings, self.address[1])
            try:
                _write_secret(self.token_file, token)
            except OSError as e:
                log.error(
                    "ops: the generated token could not be written to %s (%s); it is only "
                    "in the page address logged below",
                    self.token_file,
                    e.strerror,
                )
                self.token_file = None
        self.token = token.encode()
        self._cache: dict[str, tuple[float, Answer]] = {}
        self._cache_lock = threading.Lock()
        self.httpd = Server(self.app, sock, settings)
        self._thread = threading.Thread(
            target=self.httpd.run, name="shardmerge-ops-http", daemon=True
        )

    @property
    def url(self) -> str:
        """The server's base URL (``/metrics`` and the API are below it)."""
        host, port = self.address
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
        shown = f"[{shown}]" if ":" in shown else shown
        return f"http://{shown}:{port}/"

    @property
    def page(self) -> str:
        """The dashboard's URL; with a generated token, the token in its fragment (never
        sent to a server; the page keeps it for its own requests)."""
        return f"{self.url}#token={self.token.decode()}" if self.generated else self.url

    def start(self) -> OpsServer:
        self._thread.start()
        if self.generated:
            where = f"; also in {self.token_file} (0600)" if self.token_file else ""
            log.info("dashboard on %s (commands need this token%s)", self.page, where)
        else:
            log.info("dashboard and /metrics on %s", self.url)
        return self

    def stop(self) -> None:
        from waitress import wasyncore

        server: Any = self.httpd
        wasyncore.close_all(server._map)
        server.task_dispatcher.shutdown(timeout=5)
        self._thread.join(timeout=10)
        if self.token_file:
            with contextlib.suppress(FileNotFoundError):  # removed by hand already
                os.remove(self.token_file)

    # --- the WSGI application --------------------------------------------------------------

    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO") or "/"
        extra: dict[str, str] = {}
        try:
            status, ctype, body = self.route(environ, method, path)
        except ApiError as e:
            status, ctype, extra = e.status, "application/json", e.headers
            body = json.dumps({"error": str(e)}).encode()
        except CommandError as e:
            status, ctype = HTTPStatus.BAD_REQUEST, "application/json"
            body = json.dumps({"error": str(e)}).encode()
        except Exception:
            # A bug or an unreadable state file: the log gets the stack under an id, the
            # caller only the id; the job itself is not affected.
            incident = uuid.uuid4().hex[:12]
            log.exception("ops: %s %s failed (incident %s)", method, printable(path), incident)
            status, ctype = HTTPStatus.INTERNAL_SERVER_ERROR, "application/json"
            body = json.dumps({"error": f"internal error, see the job's log: {incident}"}).encode()
        log.debug("ops: %s %s %s %d", environ.get("REMOTE_ADDR"), method, printable(path), status)
        headers = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
        headers += list({**HEADERS, **extra}.items())
        start_response(f"{status.value} {status.phrase}", headers)
        return [b"" if method == "HEAD" else body]

    def route(self, environ: dict[str, Any], method: str, path: str) -> Answer:
        self._loopback_host(environ)
        if method not in ("GET", "POST"):
            raise ApiError(HTTPStatus.METHOD_NOT_ALLOWED, "GET or POST only", Allow="GET, POST")
        if method == "GET" and (path in ("/", "/index.html") or path.startswith("/static/")):
            return self.static(path)
        self.authorize(environ, method)
        if method == "GET":
            return self.cached(path, environ.get("QUERY_STRING") or "")
        return self.post(environ, path)

    def _loopback_host(self, environ: dict[str, Any]) -> None:
        if self.generated:  # no configured token: loopback only, by name too
            host = (environ.get("HTTP_HOST") or "").rsplit(":", 1)[0].strip("[]")
            if host not in LOOPBACK:
                raise ApiError(HTTPStatus.FORBIDDEN, f"host {host!r} is not a loopback name")

    def authorize(self, environ: dict[str, Any], method: str) -> None:
        if self.generated and method == "GET":
            return  # reads on loopback; every write needs the generated token
        auth = environ.get("HTTP_AUTHORIZATION") or ""
        given = auth[len("Bearer ") :].strip() if auth.startswith("Bearer ") else ""
        if not hmac.compare_digest(given.encode(), self.token):
            raise ApiError(
                HTTPStatus.UNAUTHORIZED,
                "a bearer token is required (open the page at the address the job logged, "
                "or send Authorization: Bearer <token>)",
                **{"WWW-Authenticate": 'Bearer realm="shardmerge"'},
            )

    def static(self, path: str) -> Answer:
        name = path[len("/static/") :] if path.startswith("/static/") else "index.html"
        if name not in STATIC:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no file {name!r}")
        data = resources.files("streaming.ops").joinpath("dashboard", name).read_bytes()
        return HTTPStatus.OK, STATIC[name], data

    def cached(self, path: str, query: str = "") -> Answer:
        """A GET's answer, computed at most once a second per path and query (many open
        dashboards and a scraper cost the driver one computation)."""
        now = time.monotonic()
        key = f"{path}?{query}"
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < CACHE_S:
                return hit[1]
        answer = self.get(path, query)
        with self._cache_lock:
            self._cache[key] = (now, answer)
        return answer

    def get(self, path: str, query: str = "") -> Answer:
        if path == "/metrics":
            return HTTPStatus.OK, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        which = path[len("/api/") :] if path.startswith("/api/") else None
        if which in API:
            view: Any
            if which == "commands":
                view = {"waiting": self.views.store.inbox()}
            else:
                view = getattr(self.views, which.replace("-", "_"))()
            if which == "locks":
                view = page_held(view, query)
            return HTTPStatus.OK, "application/json", json.dumps(view, default=str).encode()
        raise ApiError(HTTPStatus.NOT_FOUND, f"no such page {path!r}")

    def post(self, environ: dict[str, Any], path: str) -> Answer:
        if path not in ("/api/commands", "/api/commands/cancel"):
            if path.startswith("/api/") or path in ("/", "/metrics"):
                raise ApiError(
                    HTTPStatus.METHOD_NOT_ALLOWED,
                    "only /api/commands and /api/commands/cancel take POST",
                    Allow="GET",
                )
            raise ApiError(HTTPStatus.NOT_FOUND, f"no such page {path!r}")
        body = self._json_body(environ)
        peer = environ.get("REMOTE_ADDR", "?")
        if path == "/api/commands/cancel":
            return self._cancel(peer, body)
        command = command_from_json(body)
        known = {t["target"] for t in self.views.locks()["targets"]}
        if str(command.target) not in known:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no target {command.target} in the job's state")
        latest = self.views.store.latest()
        why = refusal(command, latest[1]["locks"]) if latest is not None else None
        if why is not None:  # a shard not held, a replacement for another table, ...
            raise ApiError(HTTPStatus.BAD_REQUEST, why)
        command_id = self.views.store.submit(command)
        words = command.words()
        log.info("operator command queued from %s: %s (%s)", peer, printable(words), command_id)
        self._forget()
        answer = {"id": command_id, "words": words, "applies": "at the next micro-batch"}
        return HTTPStatus.ACCEPTED, "application/json", json.dumps(answer).encode()

    def _forget(self) -> None:
        with self._cache_lock:
            self._cache.clear()

    def _json_body(self, environ: dict[str, Any]) -> dict[str, Any]:
        """The POST's JSON object, from the page's own origin (waitress already refused a
        body over ``MAX_BODY`` and a malformed ``Content-Length``)."""
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and urlsplit(origin).netloc != environ.get("HTTP_HOST"):
            raise ApiError(HTTPStatus.FORBIDDEN, f"a command from origin {origin!r} is refused")
        if (environ.get("CONTENT_TYPE") or "").split(";")[0].strip() != "application/json":
            raise ApiError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send the command as JSON")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            body = json.loads(environ["wsgi.input"].read(length) or b"null")
        except ValueError as e:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"not JSON: {e}") from e
        if not isinstance(body, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "send a JSON object {target, action, ...}")
        return body

    def _cancel(self, peer: str, body: dict[str, Any]) -> Answer:
        """Withdraw a queued command (``shardmerge unlock --cancel ID``)."""
        command_id = body.get("id")
        if not isinstance(command_id, str) or set(body) != {"id"}:
            raise ApiError(HTTPStatus.BAD_REQUEST, 'send {"id": "<a queued command\'s id>"}')
        why = self.views.store.cancel(command_id)
        if why is not None:
            raise ApiError(HTTPStatus.NOT_FOUND, why)
        log.info("operator command %s withdrawn from %s", printable(command_id), peer)
        self._forget()
        answer = {"id": command_id, "withdrawn": True}
        return HTTPStatus.OK, "application/json", json.dumps(answer).encode()
