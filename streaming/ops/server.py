"""The driver's HTTP server: ``/metrics``, the dashboard and the JSON operator API.

Routes (every one behind the token when a token is set):

- ``GET /metrics``: Prometheus exposition format.
- ``GET /``, ``GET /static/<file>``: the dashboard (files vendored in the package).
- ``GET /api/locks``, ``/api/shards``, ``/api/progress``, ``/api/dead-letters``,
  ``/api/commands`` (the commands queued for the next micro-batch).
- ``POST /api/commands`` with ``{"target", "action", "shard"?, "statements"?}``: an
  operator command, queued in the same durable inbox as ``shardmerge unlock`` (it survives
  a restart and applies at the next micro-batch). Answers 202 with its id and words.
- ``POST /api/commands/cancel`` with ``{"id"}``: withdraws a queued command (as
  ``shardmerge unlock --cancel``); 404 when no such command is queued.

Security: binds 127.0.0.1 by default; another address needs ``ops.token`` (the settings
refuse it otherwise). With a token, a request without ``Authorization: Bearer <token>``
gets 401 (a GET may give it as ``?token=`` instead, so a browser can open the page).
Commands are POST only, with a JSON body; a POST from another origin is refused (403);
no CORS header is ever sent, so other sites' scripts cannot read the answers. Without a
token, the Host header must name a loopback address (no DNS rebinding).
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from coordinator.commands import CommandError, OperatorCommand, parse_command, refusal
from coordinator.ids import ShardId, TargetId
from streaming.config import LOOPBACK, OpsSettings
from streaming.ops.views import Views

__all__ = ["OpsServer"]

log = logging.getLogger("shardmerge.ops")

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
API = ("locks", "shards", "progress", "dead-letters", "commands")
ACTIONS = ("skip", "exec", "replace", "force-remove", "retry")
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'none'",
}
MAX_BODY = 64 * 1024


class ApiError(Exception):
    """An answer other than 200 (not a failure of the job: the request was wrong)."""

    def __init__(self, status: HTTPStatus, message: str, **headers: str) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def command_from_json(body: dict[str, Any]) -> OperatorCommand:
    """An operator command from the API's JSON, checked by the CLI's own parser."""
    action = body.get("action")
    if action not in ACTIONS:
        raise CommandError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    try:
        target = TargetId.parse(str(body.get("target", "")))
        shard = ShardId.parse(str(body["shard"])) if body.get("shard") else None
    except ValueError as e:
        raise CommandError(str(e)) from e
    statements = body.get("statements") or ()
    if not isinstance(statements, list | tuple) or not all(isinstance(s, str) for s in statements):
        raise CommandError("statements must be a list of SQL strings")
    command = OperatorCommand(target, action, shard, tuple(statements))
    return parse_command(command.words())  # the same checks as `shardmerge unlock`


class OpsServer:
    def __init__(self, settings: OpsSettings, views: Views, registry: CollectorRegistry) -> None:
        self.settings = settings
        self.views = views
        self.registry = registry
        token = settings.token.get_secret_value() if settings.token else ""
        self.token = token.encode() if token else None
        self.httpd = ThreadingHTTPServer((settings.bind, settings.port), self._handler())
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="shardmerge-ops-http", daemon=True
        )

    @property
    def url(self) -> str:
        address = self.httpd.server_address  # (host, port[, ...]) for an IP socket
        host, port = str(address[0]), int(address[1])
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        shown = f"[{shown}]" if ":" in shown else shown
        return f"http://{shown}:{port}/"

    def start(self) -> OpsServer:
        self._thread.start()
        log.info("dashboard and /metrics on %s", self.url)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)

    # --- request handling ----------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "shardmerge"
            sys_version = ""

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s " + format, self.address_string(), *args)

            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                # The path only: a query may hold the token.
                where = urlsplit(self.path).path
                log.debug("%s %s %s %s", self.address_string(), self.command, where, code)

            def do_GET(self) -> None:
                self._answer(lambda: server.get(self))

            def do_POST(self) -> None:
                self._answer(lambda: server.post(self))

            def do_PUT(self) -> None:
                self._answer(server.not_allowed)

            do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_PUT

            def _answer(self, route: Any) -> None:
                try:
                    server.authorize(self)
                    status, ctype, body = route()
                except ApiError as e:
                    status, ctype = e.status, "application/json"
                    body = json.dumps({"error": str(e)}).encode()
                    extra = e.headers
                except CommandError as e:
                    status, ctype = HTTPStatus.BAD_REQUEST, "application/json"
                    body = json.dumps({"error": str(e)}).encode()
                    extra = {}
                except Exception as e:
                    # A bug or an unreadable state file: the caller gets a 500 naming it,
                    # the log gets the stack; the job itself is not affected.
                    log.exception("%s %s failed", self.command, urlsplit(self.path).path)
                    status, ctype = HTTPStatus.INTERNAL_SERVER_ERROR, "application/json"
                    body = json.dumps({"error": f"{type(e).__name__}: {e}"}).encode()
                    extra = {}
                else:
                    extra = {}
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in {**HEADERS, **extra}.items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

        return Handler

    def authorize(self, h: BaseHTTPRequestHandler) -> None:
        if self.token is None:
            host = (h.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
            if host not in LOOPBACK:
                raise ApiError(HTTPStatus.FORBIDDEN, f"host {host!r} is not a loopback name")
            return
        given = ""
        auth = h.headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            given = auth[len("Bearer ") :].strip()
        elif h.command == "GET":
            given = parse_qs(urlsplit(h.path).query).get("token", [""])[0]
        if not hmac.compare_digest(given.encode(), self.token):
            raise ApiError(
                HTTPStatus.UNAUTHORIZED, "a bearer token is required", **{
                    "WWW-Authenticate": 'Bearer realm="shardmerge"'
                }
            )  # fmt: skip

    def not_allowed(self) -> tuple[HTTPStatus, str, bytes]:
        raise ApiError(HTTPStatus.METHOD_NOT_ALLOWED, "GET or POST only", Allow="GET, POST")

    def get(self, h: BaseHTTPRequestHandler) -> tuple[HTTPStatus, str, bytes]:
        path = urlsplit(h.path).path
        if path == "/metrics":
            return HTTPStatus.OK, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path in ("/", "/index.html") or path.startswith("/static/"):
            name = "index.html" if not path.startswith("/static/") else path[len("/static/") :]
            if name not in STATIC:
                raise ApiError(HTTPStatus.NOT_FOUND, f"no file {name!r}")
            data = resources.files("streaming.ops").joinpath("dashboard", name).read_bytes()
            return HTTPStatus.OK, STATIC[name], data
        if path.startswith("/api/") and path[len("/api/") :] in API:
            which = path[len("/api/") :]
            view: Any
            if which == "commands":
                view = {"waiting": self.views.store.inbox()}
            else:
                view = getattr(self.views, which.replace("-", "_"))()
            return HTTPStatus.OK, "application/json", json.dumps(view, default=str).encode()
        raise ApiError(HTTPStatus.NOT_FOUND, f"no such page {path!r}")

    def post(self, h: BaseHTTPRequestHandler) -> tuple[HTTPStatus, str, bytes]:
        path = urlsplit(h.path).path
        if path not in ("/api/commands", "/api/commands/cancel"):
            if path.startswith("/api/") or path in ("/", "/metrics"):
                raise ApiError(
                    HTTPStatus.METHOD_NOT_ALLOWED,
                    "only /api/commands and /api/commands/cancel take POST",
                    Allow="GET",
                )
            raise ApiError(HTTPStatus.NOT_FOUND, f"no such page {path!r}")
        body = self._json_body(h)
        if path == "/api/commands/cancel":
            return self._cancel(h, body)
        command = command_from_json(body)
        known = {t["target"] for t in self.views.locks()["targets"]}
        if str(command.target) not in known:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no target {command.target} in the job's state")
        latest = self.views.store.latest()
        why = refusal(command, latest[1]["locks"]) if latest is not None else None
        if why is not None:  # a shard not held, a replacement for another table, ...
            raise ApiError(HTTPStatus.BAD_REQUEST, why)
        words = command.words()
        command_id = self.views.store.submit(words)
        log.info("operator command queued from %s: %s (%s)", h.address_string(), words, command_id)
        answer = {"id": command_id, "words": words, "applies": "at the next micro-batch"}
        return HTTPStatus.ACCEPTED, "application/json", json.dumps(answer).encode()

    def _json_body(self, h: BaseHTTPRequestHandler) -> dict[str, Any]:
        """The POST's JSON object, from the page's own origin."""
        origin = h.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != h.headers.get("Host"):
            raise ApiError(HTTPStatus.FORBIDDEN, f"a command from origin {origin!r} is refused")
        if (h.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            raise ApiError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send the command as JSON")
        length = int(h.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the command is too long")
        try:
            body = json.loads(h.rfile.read(length) or b"null")
        except ValueError as e:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"not JSON: {e}") from e
        if not isinstance(body, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "send a JSON object {target, action, ...}")
        return body

    def _cancel(
        self, h: BaseHTTPRequestHandler, body: dict[str, Any]
    ) -> tuple[HTTPStatus, str, bytes]:
        """Withdraw a queued command (``shardmerge unlock --cancel ID``)."""
        command_id = body.get("id")
        if not isinstance(command_id, str) or set(body) != {"id"}:
            raise ApiError(HTTPStatus.BAD_REQUEST, 'send {"id": "<a queued command\'s id>"}')
        why = self.views.store.cancel(command_id)
        if why is not None:
            raise ApiError(HTTPStatus.NOT_FOUND, why)
        log.info("operator command %s withdrawn from %s", command_id, h.address_string())
        answer = {"id": command_id, "withdrawn": True}
        return HTTPStatus.OK, "application/json", json.dumps(answer).encode()
