"""The job's settings: one frozen pydantic tree, read from a YAML file, overridden by
environment variables.

Every field can be set from the environment as ``SHARDMERGE__<PATH>`` with ``__`` between
levels, e.g. ``SHARDMERGE__KAFKA__BOOTSTRAP=broker:9092`` or
``SHARDMERGE__SINK__PATH=/data/lake``; a value is YAML only where it is a list or a
mapping, anything else is taken verbatim (see :func:`_env_overrides`). Validation
errors name the field and the file. See ``docs/configuration.md`` for every field.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from coordinator.ids import TargetId
from coordinator.moves import MoveSettings, check_moves
from coordinator.policy import ALLOWED, Policy, Word
from coordinator.routing import Extract, Route, Router
from coordinator.target import TargetConfig
from shardmerge.errors import ShardMergeError
from streaming.fs.hadoop import join

__all__ = ["ConfigError", "RestartSettings", "Settings", "anchored", "load_settings"]

ENV_PREFIX = "SHARDMERGE__"


def anchored(pattern: str) -> str:
    """``pattern`` matching whole topic names only.

    Spark's Kafka source keeps a topic when the pattern is *found* in its name (Scala
    ``findFirstIn``), unlike Kafka's consumer, which matches the whole name: ``s1`` would
    also read ``s1-schemahistory``, Debezium's internal schema history, and ``orders``
    every topic containing it. The settings promise whole-name matching, as Kafka does.
    """
    return f"^(?:{pattern})$"


class ConfigError(ShardMergeError):
    """The configuration is invalid; the message names the file and the field."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(_Frozen):
    bootstrap: str = Field(description="Kafka bootstrap servers (env SHARDMERGE__KAFKA__BOOTSTRAP)")
    options: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="extra Kafka consumer options for Spark's Kafka source, e.g. "
        "security.protocol, sasl.jaas.config (secrets; env SHARDMERGE__KAFKA__OPTIONS)",
    )
    starting_offsets: Literal["earliest", "latest"] = Field(
        "earliest", description="where a new job starts reading (env ..._STARTING_OFFSETS)"
    )
    max_offsets_per_trigger: int | None = Field(
        None, gt=0, description="records per micro-batch at most (env ..._MAX_OFFSETS_PER_TRIGGER)"
    )


class SourceSettings(_Frozen):
    """Topics of one CDC connector."""

    format: Literal["debezium", "canal", "maxwell"] = "debezium"
    topics: list[str] = Field(default_factory=list, description="topic names")
    pattern: str | None = Field(
        None, description="a regex of whole topic names (Java syntax), instead of names"
    )
    source: str | None = Field(
        None, description="the source id for canal/maxwell topics (Debezium carries its own)"
    )
    schema_pattern: str | None = Field(
        None,
        description="a regex of the topics among these that carry only DDL: read by a Kafka "
        "source of its own, without maxOffsetsPerTrigger, so a DDL is never read after the "
        "rows that follow it. Debezium sources default to the topics without a dot (the "
        "schema-change topic is named after topic.prefix, data topics prefix.db.table); "
        "canal and maxwell have none by default",
    )
    read_schema_ahead: bool = Field(
        True,
        description="read the schema-change topics (schema_pattern) by a Kafka source of "
        "their own, without maxOffsetsPerTrigger; false: they share the data's source and "
        "rate limit (rows then often wait in the stash for the DDL before them)",
    )

    @model_validator(mode="after")
    def _topics_or_pattern(self) -> SourceSettings:
        if bool(self.topics) == bool(self.pattern):
            raise ValueError("give either topics or pattern")
        return self


class ExtractSettings(_Frozen):
    source_column: str | None = None
    db_column: str | None = None
    table_column: str | None = None


class RouteSettings(_Frozen):
    target: str = Field(pattern=r"^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$", description="db.table")
    source: str = "*"
    db: str = "*"
    table: str = "*"
    extract: ExtractSettings = ExtractSettings()


class TargetSettings(_Frozen):
    mode: Literal["optimistic", "pessimistic"] = "optimistic"
    strict: bool = False
    rewrite_incompatible: bool = Field(
        False,
        description="a type change Delta cannot make in place (e.g. DECIMAL(5,2) to "
        "DECIMAL(5,3)) rewrites the table in one commit instead of waiting in stage conflict",
    )
    policy: dict[str, Word] = Field(
        default_factory=dict,
        description="schema-change policy per DDL kind (add_column, drop_column, ...): "
        "forward, ignore, warn, fail, keep (drop_column only); a kind not named is forward",
    )

    @field_validator("policy", mode="before")
    @classmethod
    def _policy_words(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # pydantic says what a mapping is
        for kind, word in value.items():
            if kind not in ALLOWED:
                raise ValueError(f"unknown DDL kind {kind!r}; kinds: {', '.join(ALLOWED)}")
            if word not in ALLOWED[kind]:
                raise ValueError(
                    f"{kind}: {word!r} is not a policy for it; choose one of "
                    f"{', '.join(ALLOWED[kind])}"
                )
        return value

    def config(self) -> TargetConfig:
        return TargetConfig(self.mode, self.strict, Policy.of(self.policy))


# The URL schemes of each database sink dialect (MariaDB's driver speaks to MySQL too).
_JDBC_SCHEMES = {
    "mariadb": ("jdbc:mariadb:", "jdbc:mysql:"),
    "mysql": ("jdbc:mariadb:", "jdbc:mysql:"),
    "postgresql": ("jdbc:postgresql:",),
}


def _secret_from_file(data: Any, section: str, field: str) -> Any:
    """``<field>_file`` read into ``<field>`` (a mounted secret's file, its last line break
    dropped); both set is refused, as is a file that cannot be read."""
    if not isinstance(data, dict) or not data.get(f"{field}_file"):
        return data
    if data.get(field):
        raise ValueError(f"set {section}.{field} or {section}.{field}_file, not both")
    where = str(data[f"{field}_file"])
    try:
        with open(where, encoding="utf-8") as f:  # a local secret file, not a data URI
            text = f.read()
    except OSError as e:
        raise ValueError(f"{section}.{field}_file {where!r} cannot be read ({e.strerror})") from e
    return {**data, field: text.rstrip("\r\n")}


class SinkSettings(_Frozen):
    """Where the targets are written: Delta tables under ``path`` (``kind: delta``), or
    tables of one MariaDB, MySQL or PostgreSQL database (``kind: jdbc``,
    ``streaming/storage/jdbc_sink.py``). The job's own tables (the stash of held rows, the
    dead letters, a group's store) stay on Delta under ``path`` whatever the kind."""

    kind: Literal["delta", "jdbc"] = "delta"
    path: str = Field(
        description="base folder URI (s3a://bucket/lake, hdfs://..., /data/lake); target "
        "db.table is written to PATH/db/table (kind delta); the job's own Delta tables live "
        "under it (either kind)"
    )
    url: str | None = Field(
        None,
        description="kind jdbc: the database's JDBC URL, jdbc:mariadb://host:3306/ (MariaDB, "
        "MySQL) or jdbc:postgresql://host:5432/db; target db.table is table db.table "
        "(PostgreSQL: schema db) (env SHARDMERGE__SINK__URL)",
    )
    dialect: Literal["mariadb", "mysql", "postgresql"] | None = Field(
        None, description="kind jdbc: the database's SQL dialect (env SHARDMERGE__SINK__DIALECT)"
    )
    user: str | None = Field(
        None, description="kind jdbc: the database user (env SHARDMERGE__SINK__USER)"
    )
    password: SecretStr | None = Field(
        None,
        description="kind jdbc: the password, from the environment only "
        "(SHARDMERGE__SINK__PASSWORD), never a settings file; or password_file",
    )
    password_file: str | None = Field(
        None,
        description="kind jdbc: a local file holding the password (a mounted secret), read "
        "at start (env SHARDMERGE__SINK__PASSWORD_FILE)",
    )
    meta: str = Field(
        "shardmerge",
        description="kind jdbc: the schema (MySQL: database) of the sink's own tables: "
        "write slots, the history of changes, staging (env SHARDMERGE__SINK__META)",
    )

    append_new_keys: bool = Field(
        False,
        description="rows whose keys are provably not in the target are appended instead "
        "of MERGEd (streaming/batch/new_keys.py; Delta targets of a job alone, nothing else "
        "writing their rows); off by default: measured, it pays only on append-mostly "
        "streams (docs/benchmarks.md) (env SHARDMERGE__SINK__APPEND_NEW_KEYS)",
    )
    append_mixed: bool = Field(
        False,
        description="with append_new_keys, a batch that also writes keys the target may "
        "hold is split too: its new keys appended, the rest MERGEd (two commits); off by "
        "default: such a batch is MERGEd whole, and only a batch of new keys alone is "
        "appended (measured: the split costs more than the MERGE it spares, "
        "docs/benchmarks.md) (env SHARDMERGE__SINK__APPEND_MIXED)",
    )
    append_min_rows: int = Field(
        10_000,
        ge=0,
        description="a target starts taking the append path after a batch with at least "
        "this many of its events (its keys are read from the table then, once); smaller "
        "batches of a target that has not started are MERGEd whole "
        "(env SHARDMERGE__SINK__APPEND_MIN_ROWS)",
    )

    @model_validator(mode="before")
    @classmethod
    def _read_password_file(cls, data: Any) -> Any:
        return _secret_from_file(data, "sink", "password")

    @model_validator(mode="after")
    def _jdbc_complete(self) -> SinkSettings:
        if self.kind != "jdbc":
            if self.url or self.dialect:
                raise ValueError("sink.url and sink.dialect are for kind jdbc")
            return self
        if not self.url or not self.dialect:
            raise ValueError("kind jdbc needs sink.url and sink.dialect")
        schemes = _JDBC_SCHEMES
        if not self.url.startswith(schemes[self.dialect]):
            raise ValueError(
                f"sink.url for dialect {self.dialect} starts with "
                f"{' or '.join(schemes[self.dialect])}"
            )
        if re.search(r"(?i)[?&;]password=", self.url):
            raise ValueError(
                "sink.url carries a password: set SHARDMERGE__SINK__PASSWORD or "
                "sink.password_file instead"
            )
        return self


class RestartSettings(_Frozen):
    """Restarts of the query after a transient failure (``streaming/runtime/supervise.py``)."""

    attempts: int = Field(
        5, ge=0, description="restarts in a row before the job gives up (env ..._ATTEMPTS)"
    )
    initial_backoff_s: float = Field(
        2, gt=0, description="wait before the first restart (env ..._INITIAL_BACKOFF_S)"
    )
    max_backoff_s: float = Field(
        60, gt=0, description="the wait doubles per failure up to this (env ..._MAX_BACKOFF_S)"
    )
    reset_after_s: float = Field(
        600,
        gt=0,
        description="a query that ran this long before failing counts from attempt 1 again "
        "(env ..._RESET_AFTER_S)",
    )

    @model_validator(mode="after")
    def _ordered(self) -> RestartSettings:
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError("max_backoff_s must not be below initial_backoff_s")
        return self


LOOPBACK = ("127.0.0.1", "::1", "localhost")
MIN_TOKEN = 32
# Words of example and default tokens: a token containing one is refused.
PLACEHOLDERS = ("change-me", "changeme", "change_me", "placeholder", "your-token", "example")


class OpsSettings(_Frozen):
    """The driver's HTTP server: /metrics, the dashboard and the operator API."""

    enabled: bool = Field(True, description="serve them (env SHARDMERGE__OPS__ENABLED)")
    bind: str = Field(
        "127.0.0.1",
        description="address to listen on; any but loopback requires a token "
        "(env SHARDMERGE__OPS__BIND)",
    )
    port: int = Field(
        9464, ge=0, le=65535, description="port (0: any free one) (env SHARDMERGE__OPS__PORT)"
    )
    token: SecretStr | None = Field(
        None,
        description="bearer token every request must carry when set, at least 32 characters "
        "(env SHARDMERGE__OPS__TOKEN)",
    )
    token_file: str | None = Field(
        None,
        description="a local file holding the token (a mounted secret), instead of token; "
        "read at start (env SHARDMERGE__OPS__TOKEN_FILE)",
    )
    generated_token_file: str | None = Field(
        None,
        description="with no token configured, the job makes one at start (every POST needs "
        "it) and writes it to this local file, mode 0600; default "
        "~/.shardmerge/ops-token-<port> (env SHARDMERGE__OPS__GENERATED_TOKEN_FILE)",
    )
    shard_metrics: bool = Field(
        False,
        description="per-shard and per-topic-partition series (held and waiting shards, "
        "Kafka lag per partition) besides the per-target ones; off, a scrape stays bounded "
        "by the number of targets however many shards there are "
        "(env SHARDMERGE__OPS__SHARD_METRICS)",
    )
    # Connections are cheap to hold and free to open, and the server must keep answering
    # however many are held (docs/operations.md, "Security"): a deadline for each request,
    # a cap sized for idle sockets and a cap per remote address.
    request_timeout_s: int = Field(
        10,
        ge=1,
        description="a connection that has not sent a whole request (headers and body) this "
        "many seconds after it was opened, or after the first byte of a later request, is "
        "closed, however slowly it keeps sending (env SHARDMERGE__OPS__REQUEST_TIMEOUT_S)",
    )
    idle_timeout_s: int = Field(
        30,
        ge=1,
        description="a connection kept open between requests is closed after this many "
        "seconds without one (env SHARDMERGE__OPS__IDLE_TIMEOUT_S)",
    )
    max_connections: int = Field(
        256,
        ge=1,
        description="open connections at most; more wait in the kernel's queue until one "
        "closes. An open connection costs a file descriptor and no thread; at most half of "
        "the process's open-file limit is used (env SHARDMERGE__OPS__MAX_CONNECTIONS)",
    )
    max_connections_per_peer: int = Field(
        32,
        ge=1,
        description="open connections from one remote address at most; a further one is "
        "closed at once. Loopback peers are not counted: every local process shares "
        "127.0.0.1 (env SHARDMERGE__OPS__MAX_CONNECTIONS_PER_PEER)",
    )

    @model_validator(mode="before")
    @classmethod
    def _read_token_file(cls, data: Any) -> Any:
        return _secret_from_file(data, "ops", "token")

    @field_validator("token")
    @classmethod
    def _strong_token(cls, token: SecretStr | None) -> SecretStr | None:
        # The message never shows the value: it is a secret.
        if token is None:
            return None
        value = token.get_secret_value()
        if len(value) < MIN_TOKEN:
            raise ValueError(
                f"the token has {len(value)} characters; use at least {MIN_TOKEN} "
                "(e.g. the output of `openssl rand -hex 24`)"
            )
        lowered = value.lower()
        if any(p in lowered for p in PLACEHOLDERS) or len(set(value)) < 8:
            raise ValueError("the token looks like a placeholder; use a random one")
        return token

    @model_validator(mode="after")
    def _token_off_loopback(self) -> OpsSettings:
        if self.bind not in LOOPBACK and not (self.token and self.token.get_secret_value()):
            raise ValueError(
                f"bind {self.bind!r} is not a loopback address: set ops.token "
                "(SHARDMERGE__OPS__TOKEN), which every request must then carry"
            )
        return self

    @model_validator(mode="after")
    def _peer_cap_within_cap(self) -> OpsSettings:
        if self.max_connections_per_peer > self.max_connections:
            raise ValueError(
                f"max_connections_per_peer ({self.max_connections_per_peer}) is above "
                f"max_connections ({self.max_connections}): one address could take every "
                "connection"
            )
        return self


# A group's and a member's name: each names a folder of the group store
# (``members/NAME/...``) and a Kafka topic (``shardmerge.tick.GROUP.MEMBER``).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _name(field: str, value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(
            f"{field} {value!r} is not a valid name: use 1 to 64 letters, "
            "digits, '.', '_' or '-', starting with a letter or a digit (it names a folder "
            "in the group store and a Kafka topic)"
        )
    return value


class CoordinationSettings(_Frozen):
    """Several jobs writing the same targets (a group, docs/groups.md)."""

    group: str = Field(description="the group's name (shared by its jobs)")
    member: str = Field(description="this job's name in the group")
    members: list[str] = Field(
        min_length=1,
        description="every job of the group, in the order the owner's term passes on "
        "(the same list in every job)",
    )

    lease_s: float = Field(
        30.0,
        gt=0,
        description="a member whose heartbeat has not changed for this long is down: the "
        "owner stops waiting for it, and the member itself stops writing",
    )
    heartbeat_s: float = Field(
        2.0, gt=0, description="how often a member writes its heartbeat and folds the log"
    )
    store: str | None = Field(
        None,
        description="the group store's URI (default SINK/_shardmerge/groups/GROUP); every "
        "job of the group must name the same one",
    )
    gate_timeout_s: float = Field(
        600.0,
        gt=0,
        description="a batch waits at most this long for the owner to bring a target to the "
        "version the group decided; then it fails and runs again",
    )
    snapshot_every: int = Field(
        1000,
        ge=0,
        description="the owner writes a snapshot of the folded group log every this many "
        "records and removes the records every member's batches have folded past, so that "
        "a start reads the newest snapshot and the records after it (0: never)",
    )

    @field_validator("group", "member")
    @classmethod
    def _safe_name(cls, value: str, info: ValidationInfo) -> str:
        return _name(str(info.field_name), value)

    @field_validator("members")
    @classmethod
    def _safe_names(cls, value: list[str]) -> list[str]:
        for i, name in enumerate(value):
            _name(f"members[{i}]", name)
        return value

    @model_validator(mode="after")
    def _member_listed(self) -> CoordinationSettings:
        if self.member not in self.members:
            raise ValueError(f"coordination.member {self.member!r} is not in members")
        if len(set(self.members)) != len(self.members):
            raise ValueError("coordination.members names a job twice")
        if self.heartbeat_s * 2 > self.lease_s:
            raise ValueError("coordination.lease_s must be at least twice heartbeat_s")
        return self


class Settings(_Frozen):
    kafka: KafkaSettings
    sources: list[SourceSettings] = Field(min_length=1)
    routes: list[RouteSettings] = Field(min_length=1)
    targets: dict[str, TargetSettings] = Field(default_factory=dict)
    default_target: TargetSettings = TargetSettings()
    sink: SinkSettings
    checkpoint: str = Field(
        description="checkpoint folder URI (also holds the job's state and held events); "
        "must be shared storage when the driver can run on another node"
    )
    trigger_interval: str = Field("5 seconds", description="micro-batch interval")
    restart: RestartSettings = RestartSettings()
    dead_letter_path: str | None = Field(
        None, description="dead-letter Delta table (default CHECKPOINT/dead_letter)"
    )
    ops: OpsSettings = OpsSettings()
    stash_maintenance_every: int = Field(
        100,
        ge=1,
        description="every this many batches the stash is compacted (OPTIMIZE) and its "
        "unreferenced files removed (VACUUM)",
    )
    one_driver_check: bool = Field(
        True,
        description="each run claims an epoch of the checkpoint and a run that finds a newer "
        "one stops (streaming/storage/epochs.py); a run that cannot claim one does not "
        "start. false: no claim and no check, for a checkpoint store that refuses "
        "conditional creates (an S3-compatible server without If-None-Match); two runs on "
        "one checkpoint then go unnoticed (env SHARDMERGE__ONE_DRIVER_CHECK)",
    )
    ddl_grace_ms: int = Field(
        1_000,
        ge=0,
        description="a batch whose schema-change topics were read to their end, planned at "
        "least this long ago, has every DDL its rows need: a row that still needs one (a "
        "column its shard lacks, a malformed record) is a dead letter with its reason and "
        "its shard goes on (a waiting shard stops waiting). Younger, or with those topics "
        "grown since, the row waits for its DDL in the stash (docs/ordering.md)",
    )
    moves: list[MoveSettings] = Field(
        default_factory=list,
        description="declared upstream moves: a shard table moving to another database or "
        "server, split by keys, or several merged into one (docs/moves.md; the pure core "
        "and the memory engine only for now) (env SHARDMERGE__MOVES)",
    )

    coordination: CoordinationSettings | None = Field(
        None,
        description="this job is one of several writing the same targets (docs/groups.md); "
        "unset: the job is the targets' only writer",
    )

    @model_validator(mode="after")
    def _group_without_moves(self) -> Settings:
        if self.coordination is None:
            return self
        if self.moves:
            raise ValueError("moves are not supported in a group yet (docs/groups.md)")
        strict = [n for n, t in self.targets.items() if t.strict] + (
            ["default_target"] if self.default_target.strict else []
        )
        if strict:
            raise ValueError(
                f"strict targets are not supported in a group yet: {', '.join(strict)} "
                "(docs/groups.md)"
            )
        return self

    def group_root(self) -> str:
        """The group store's URI (``coordination.store``, else under the sink)."""
        assert self.coordination is not None
        return self.coordination.store or join(
            self.sink.path, "_shardmerge", "groups", self.coordination.group
        )

    @model_validator(mode="after")
    def _moves_fit(self) -> Settings:
        problems = check_moves([m.move() for m in self.moves], self.router())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def topic_sources(self) -> dict[str, str]:
        """The CDC source id of each topic a source lists with its ``source`` id (canal
        and maxwell records carry none; Debezium's ``source.name`` comes first)."""
        return {t: s.source for s in self.sources if s.source for t in s.topics}

    def fold_summary(self) -> dict[str, Any]:
        """What a group member's fold depends on, as JSON values: the routes in order,
        each routed target's mode, strictness and policy (a DDL kind that is ``forward``
        left out: it is the default), and the record format (docs/groups.md). Members
        whose summaries differ fold one log differently."""
        from coordinator.group import RECORD_FORMAT

        targets = {}
        for name in sorted({r.target for r in self.routes}):
            t = self.targets.get(name, self.default_target)
            policy = {k: w for k, w in sorted(t.policy.items()) if w != "forward"}
            targets[name] = {"mode": t.mode, "strict": t.strict, "policy": policy}
        return {
            "format": RECORD_FORMAT,
            "routes": [r.model_dump(mode="json") for r in self.routes],
            "targets": targets,
        }

    def router(self) -> Router:
        return Router(
            tuple(
                Route(
                    TargetId.parse(r.target),
                    r.source,
                    r.db,
                    r.table,
                    Extract(**r.extract.model_dump()),
                )
                for r in self.routes
            )
        )

    def target_configs(self) -> dict[TargetId, TargetConfig]:
        return {TargetId.parse(name): t.config() for name, t in self.targets.items()}

    def default_config(self) -> TargetConfig:
        return self.default_target.config()

    def target_settings(self, target: TargetId) -> TargetSettings:
        return self.targets.get(str(target), self.default_target)

    def dead_letters(self) -> str:
        return self.dead_letter_path or join(self.checkpoint, "dead_letter")

    def table_path(self, target: TargetId) -> str:
        return join(self.sink.path, target.db, target.table)


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """``SHARDMERGE__A__B=value`` as ``{"a": {"b": value}}``. A value is YAML only where it
    is a list or a mapping (``[...]``, ``{...}``, block YAML); anything else is taken
    verbatim, so a secret with `` #`` or a leading ``*`` arrives whole (pydantic turns
    ``"9464"`` into a number and ``"true"`` into a boolean where the field asks for one).
    An empty value, ``null`` or ``~`` unsets the field. A value that is not valid YAML
    where YAML is needed is an error naming the variable, never showing its value."""
    out: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX) :].split("__")]
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _env_value(key, raw)
    return out


def _env_value(key: str, raw: str) -> Any:
    if raw.strip() in ("", "null", "~"):
        return None
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        if raw.lstrip()[:1] in ("[", "{", "-") or "\n" in raw:
            where = getattr(e, "problem_mark", None)
            at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
            raise ConfigError(
                f"{key}: not valid YAML for a list or mapping{at}: {getattr(e, 'problem', '')}"
            ) from None
        return raw
    return parsed if isinstance(parsed, list | dict) else raw


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in over.items():
        merged[k] = (
            _merge(merged[k], v) if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
        )
    return merged


def load_settings(path: str | Path | None, environ: dict[str, str] | None = None) -> Settings:
    """Settings from a YAML file (or none) plus ``SHARDMERGE__...`` environment overrides."""
    data: dict[str, Any] = {}
    where = str(path) if path else "(environment)"
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except OSError as e:
            raise ConfigError(f"{where}: cannot read: {e}") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"{where}: not valid YAML: {e}") from e
        if not isinstance(loaded, dict):
            raise ConfigError(f"{where}: the configuration is a mapping (kafka, sources, ...)")
        sink = loaded.get("sink")
        if isinstance(sink, dict) and sink.get("password") is not None:
            raise ConfigError(
                f"{where}: sink.password in a settings file; give it in the environment "
                "(SHARDMERGE__SINK__PASSWORD) or as sink.password_file"
            )
        data = loaded
    data = _merge(data, _env_overrides(dict(os.environ if environ is None else environ)))
    try:
        return Settings.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors()
        )
        raise ConfigError(f"{where}: {problems}") from e
