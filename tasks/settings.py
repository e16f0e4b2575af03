"""Every setting Switchyard reads from the environment, in one place, typed.

Nothing here does I/O at import: `get_settings()` reads the environment once,
on first use, and fails loudly on a value it cannot parse.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit


class SettingsError(ValueError):
    """An environment variable holds a value Switchyard cannot use."""


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, "").strip() or default


MAX_WORKFLOW_PARALLEL = 16  # steps of one workflow run at once, whatever is asked

def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise SettingsError(f"{name} must be a boolean (true/false), got {raw!r}")


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def env_str_map(name: str) -> tuple[tuple[str, str], ...]:
    """A JSON object of strings to strings (e.g. {"engineer": "code.run_task"}), or ()."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a JSON object, got {raw[:80]!r}") from None
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise SettingsError(f"{name} must be a JSON object of strings to strings")
    return tuple(sorted(value.items()))


def env_http_url(name: str) -> str:
    """An http(s) address with a host, or empty when unset."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return ""
    parts = urlsplit(raw)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise SettingsError(f"{name} must be an http:// or https:// address, got {raw!r}")
    return raw.rstrip("/")


def sqlalchemy_url(url: str) -> str:
    """Pin the psycopg 3 driver whatever spelling of a PostgreSQL URL we are given."""
    for prefix in ("postgresql+psycopg2://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def libpq_url(url: str) -> str:
    """The same URL as libpq (and psycopg.connect) wants it: no SQLAlchemy driver suffix."""
    scheme, sep, rest = url.partition("://")
    return f"postgresql://{rest}" if sep and scheme.startswith("postgres") else url


@dataclass(frozen=True)
class Settings:
    # Either may carry a password (up's Redis always does): never in a repr.
    database_url: str = field(repr=False)
    broker_url: str = field(repr=False)
    data_dir: Path
    heartbeat_seconds: float
    stale_after_seconds: float
    sweep_seconds: float
    shutdown_grace_seconds: float
    redispatch_after_seconds: float
    prefetch_multiplier: int
    claim_ahead: int
    amqp_queue_type: str
    worker_concurrency: int
    worker_pool: str
    log_level: str
    rate_limit_per_second: float
    rate_limit_burst: float
    cron_secret: str
    sse_keepalive_seconds: float = 15.0
    # app.http.auth: failed authentications (a wrong or revoked token, over the API or the sign-in
    # form) one client address may make per web process before it must wait.
    auth_failures_per_minute: float = 6.0
    auth_failures_burst: float = 20.0
    # app.streams.stream_slots / app.streams.sse: event streams one token may hold open per web
    # process, and how long one lasts before the client resumes it by cursor.
    streams_per_token: int = 20
    streams_per_process: int = 48  # all tokens together: below gunicorn's 64 threads
    stream_max_seconds: float = 600.0
    # app.http.pgpool: the web process's database connections, all of them (requests, streams'
    # reads, the event hub); a request holds at most one.
    web_db_connections: int = 20
    # app.ops.receive_deadline: how long the web process gives one request to arrive, its
    # headers and body together; a slower one's connection is closed, so slow clients can
    # never hold every thread.
    request_receive_seconds: float = 15.0
    # app.http.tokens: how long a web process keeps a live token's caller before looking it up
    # again; a token revoked elsewhere (the CLI) stops working within it. 0: every request.
    token_cache_seconds: float = 1.0
    # Where people reach the web UI (empty: not said). app.routes.ui: the cookie session's
    # signing key (empty: a random key kept in data_dir) and whether the cookie is
    # HTTPS-only (by default, when the public URL is https).
    public_url: str = ""
    secret_key: str = field(default="", repr=False)
    secure_cookies: bool = False
    # app.ops.metrics: the Bearer token /metrics answers (empty: /metrics is off, a 404) and
    # how long one reading of the database serves every scrape.
    metrics_token: str = field(default="", repr=False)
    metrics_cache_seconds: float = 5.0
    # app.web: how many reverse proxies in front of the web set X-Forwarded-For (0: none,
    # the peer's address is the client's); per-address limits need the client's.
    trusted_proxies: int = 0
    # tasks.services.llm. The API key stays out of repr, so a logged Settings never shows it.
    llm_provider: str = "scripted"  # scripted | anthropic | openai
    anthropic_api_key: str = field(default="", repr=False)
    anthropic_base_url: str = "https://api.anthropic.com"
    # The openai SDK's own variables: any OpenAI-compatible server (a local one needs no key).
    openai_api_key: str = field(default="", repr=False)
    openai_base_url: str = ""  # "": the SDK's default, api.openai.com
    llm_model: str = "claude-sonnet-4-6"
    llm_max_tokens: int = 4096  # a ceiling on any request's max_tokens
    # (ROLE, provider or "", model or "") from SWITCHYARD_LLM_PROVIDER_<ROLE> and
    # SWITCHYARD_LLM_MODEL_<ROLE>: tasks.services.llm.roles checks the roles.
    llm_role_models: tuple[tuple[str, str, str], ...] = ()
    # "provider/model" pairs a project may choose for a role, besides the operator's own
    # (SWITCHYARD_LLM_PROJECT_MODELS): a tenant's choice is the operator's bill and limits.
    llm_project_models: tuple[str, ...] = ()
    # A request's own trace context (traceparent, tracestate, baggage headers) continued by
    # the web's spans: for callers the operator trusts, not tenants who could steer their
    # jobs into any trace (SWITCHYARD_OTEL_TRUST_INCOMING; off: each request starts a trace).
    otel_trust_incoming: bool = False
    # tasks.startup.schedules: the local hour (each project's `timezone`, UTC without one) the
    # daily schedules run at: digests, nudges, the night shift.
    daily_hour: int = 2
    # services.llm.flow: the operator's ceiling on what one owner's projects together may
    # spend on models per UTC day, over each project's own budget (0: none).
    llm_daily_usd_per_owner: float = 20.0
    llm_timeout_seconds: float = 60.0
    llm_price_input_per_mtok: float | None = None  # None: tasks.services.llm.pricing's table
    llm_price_output_per_mtok: float | None = None
    # services.effects: where email, GitHub dispatches and ad campaigns go; secrets not in repr.
    effect_timeout_seconds: float = 15.0
    egress_allow: str = ""  # CIDRs or host names tenant-built calls may reach (services.egress)
    # Host names the coding sandbox's egress proxy reaches besides those (the package
    # registries, by name: wherever this machine's DNS says they are, a mirror included).
    # The hosts the coding agent's setup phase may reach ("" = the hosts of this machine's
    # configured package indexes: tasks.services.package_indexes).
    code_setup_hosts: str = ""
    code_setup_timeout_seconds: float = 900.0
    code_env_max_bytes: int = 10 * 1024 * 1024 * 1024  # set-up environments kept, at most
    code_registry_hosts: str = ("pypi.org,files.pythonhosted.org,registry.npmjs.org,"
                                "registry.yarnpkg.com")
    # services.effects.policy: effect kinds tenants may turn on (empty: all) and daily ceilings.
    effects_allowed: str = ""
    effect_cap_ceilings: str = ""
    # tasks.services.effects.ledger: effect kinds whose operator credential (SMTP/Resend, GitHub
    # token, ads key) may stand in for a project's own secret; the rest need the project's.
    shared_credentials: str = "email"
    smtp_host: str = ""  # empty (and no Resend key): email is not configured
    smtp_port: int = 25
    smtp_user: str = ""
    smtp_password: str = field(default="", repr=False)
    smtp_starttls: bool = False
    smtp_ssl: bool = False
    email_from: str = "Switchyard <switchyard@localhost>"
    # services.effects.adapters.email: domains the operator verified, which a project's email
    # may be sent from on the operator's transport (besides email_from itself).
    email_from_domains: str = ""
    resend_api_key: str = field(default="", repr=False)  # set: email goes through Resend
    resend_base_url: str = "https://api.resend.com"
    github_api_url: str = "https://api.github.com"
    github_token: str = field(default="", repr=False)
    # tasks.coding.tokens: the repositories (owner/name globs) the operator's GitHub token may
    # serve when SWITCHYARD_SHARED_CREDENTIALS names `github`; empty: none.
    github_shared_repos: str = ""
    ads_api_url: str = ""
    ads_api_key: str = field(default="", repr=False)
    # tasks.engine.pg: how long an engine write waits out a lost database before giving up.
    db_retry_seconds: float = 60.0
    # tasks.engine.pg: how long a connection attempt may take, and how long data sent on a
    # connection may go unacknowledged before the kernel drops it (TCP_USER_TIMEOUT). Without
    # the second, a statement sent into a silent partition waits out TCP's retransmissions,
    # about 15 minutes, before the worker notices (keepalives only probe an idle socket).
    db_connect_timeout_seconds: float = 5.0
    db_tcp_user_timeout_seconds: float = 30.0
    # tasks.engine.pg: how long one statement may run (a worker's, a web request's), and a
    # transaction may sit idle, before PostgreSQL cuts it: one slow statement must not hold a
    # connection every tenant's requests wait for. app.http.pgpool: how long a request waits
    # for a pooled connection before it is answered 503.
    worker_statement_timeout_seconds: float = 60.0
    # app.ops.migrations: how long one migration statement waits for a table's lock before
    # it gives up and lets the writers queued behind its request by (then it asks again,
    # for at most the second figure in all; 0: no timeout, it waits as long as it takes). A
    # lock request that waits holds every writer.
    migration_lock_timeout_seconds: float = 3.0
    migration_lock_wait_seconds: float = 300.0
    # tasks.engine.context: the largest event data kept whole (a larger one is cut to a
    # preview that says so) and the largest step output (a larger one fails the step: keep
    # big data in an artifact and return its id), in bytes of JSON.
    event_data_max_bytes: int = 64 * 1024
    # tasks.engine.fair: jobs one owner may have published or running at once (the rest wait
    # in PostgreSQL, so no owner's backlog stands before another's jobs; 0: no cap), and the
    # highest priority a client may ask for (a higher one is lowered to it).
    owner_max_active: int = 16
    # tasks.engine.enqueue: the most jobs one root job's tree may hold (0: no ceiling).
    max_descendants: int = 1000
    # tasks.services.quotas: what one owner may keep, over all its projects (0: no quota).
    max_projects_per_owner: int = 100
    max_function_data_bytes_per_owner: int = 256 * 1024 * 1024
    max_memory_keys_per_owner: int = 10_000
    max_artifact_bytes_per_owner: int = 5 * 1024 * 1024 * 1024
    max_priority: int = 9
    step_output_max_bytes: int = 1024 * 1024
    web_statement_timeout_seconds: float = 5.0
    idle_in_transaction_timeout_seconds: float = 60.0
    web_db_wait_seconds: float = 2.0
    # tasks.engine.retry: retries that cost no attempt (rate limits) stop after this many, or
    # this long, and no Retry-After parks a job for longer than retry_after_max_seconds.
    free_retry_max: int = 100
    free_retry_max_seconds: float = 6 * 3600.0
    retry_after_max_seconds: float = 3600.0
    # tasks.engine.retention: terminal jobs and their events kept this many days; the pass runs
    # every maintenance_seconds.
    retention_days: int = 30
    maintenance_seconds: float = 300.0
    # services.research: the operator's web search endpoint (empty: search is off) and its key.
    websearch_url: str = ""
    websearch_key: str = field(default="", repr=False)
    step_trace_dir: str = ""  # tasks.engine.trace: a journal of step executions (off when empty)
    # tasks.services.artifact_store: files jobs write go under data_dir/artifacts unless a bucket is
    # named, then to that S3-compatible store (credentials: these, else boto3's usual chain).
    artifact_max_bytes: int = 100 * 1024 * 1024
    artifacts_s3_bucket: str = ""
    artifacts_s3_endpoint_url: str = ""
    artifacts_s3_region: str = ""
    artifacts_s3_prefix: str = ""
    artifacts_s3_access_key_id: str = field(default="", repr=False)
    artifacts_s3_secret_access_key: str = field(default="", repr=False)
    # tasks.workflows.jobs: how many steps of a run run at once unless the run says.
    workflow_parallel: int = 4
    # tasks.functions.sandbox_pool: warm sandbox processes kept per worker process, and
    # whether a root worker may run them as root when uid 65534 cannot (a weaker fence).
    function_pool_size: int = 2
    function_sandbox_same_user: bool = False
    # "strict": a function's child runs under bubblewrap or not at all; "weak" accepts
    # unshare/setpriv where they work, else none (tasks.functions.sandbox_pool).
    function_fences: str = "strict"
    # tasks.coding: the directories a tenant may clone from by path or file:// (none by
    # default: a tenant must never clone the server's own files), and the caps of the
    # `run` tool (a shell in the job's workspace).
    local_repos: tuple[Path, ...] = ()
    code_run_timeout_seconds: float = 120.0
    code_run_memory_mb: int = 2048
    code_run_output_chars: int = 30_000
    # Whether a project may let its `run` tool reach the network (its setting code_network):
    # a command with network could reach what the worker reaches, so it is the operator's call.
    code_network_allowed: bool = False
    # A worker that is not root runs commands as itself (namespaces only): only if asked.
    code_sandbox_same_user: bool = False
    # tasks.services.llm.scripted: seconds between the chunks of a streamed scripted answer (a demo
    # that types like a model; 0: at once).
    scripted_stream_seconds: float = 0.0
    # tasks.planner: a plan task's role -> the job type that does it (over the defaults in
    # tasks.planner.roles), and how many times a plan may be revised after a task failed.
    plan_roles: tuple[tuple[str, str], ...] = ()
    plan_max_revisions: int = 2

    @property
    def workspaces_dir(self) -> Path:
        """Where the coding agent's jobs keep their checkouts (one directory per job)."""
        return self.data_dir / "workspaces"

    @property
    def sqlalchemy_url(self) -> str:
        return sqlalchemy_url(self.database_url)

    @property
    def email_from_domain_set(self) -> frozenset[str]:
        return frozenset(d.strip().lower().lstrip("@") for d in self.email_from_domains.split(",")
                         if d.strip())

    @property
    def github_shared_repo_globs(self) -> tuple[str, ...]:
        return tuple(g.strip().lower() for g in self.github_shared_repos.split(",") if g.strip())

    @property
    def shared_credential_kinds(self) -> frozenset[str]:
        return frozenset(k.strip() for k in self.shared_credentials.split(",") if k.strip())

    @property
    def libpq_url(self) -> str:
        return libpq_url(self.database_url)


MIN_SECRET_LENGTH = 32
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/switchyard"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"
# SWITCHYARD_LLM_MODEL when unset, by SWITCHYARD_LLM_PROVIDER (a self-hosted server names its
# own: set the variable).
DEFAULT_MODELS = {"scripted": "scripted-1", "anthropic": "claude-sonnet-4-6",
                  "openai": "gpt-4.1-mini"}


DATABASE_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2")
BROKER_SCHEMES = ("redis", "rediss", "redis+socket", "socket", "unix", "sentinel", "amqp", "amqps",
                  "pyamqp", "memory")


def _check_url(name: str, url: str, schemes: tuple[str, ...], wanted: str) -> None:
    """A URL of one of `schemes` whose port, if any, is a number. The message never quotes
    the URL: it may carry a password."""
    parts = urlsplit(url)
    if parts.scheme not in schemes or "://" not in url:
        got = f"a {parts.scheme}:// one" if parts.scheme and "://" in url else "no URL"
        raise SettingsError(f"{name} must be {wanted}, got {got}")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked for it
    except ValueError:
        raise SettingsError(f"{name} has a port that is not a number") from None


def check(settings: Settings) -> Settings:
    """Refuse combinations that break the engine's guarantees, not just odd values."""
    _check_url("DATABASE_URL", settings.database_url, DATABASE_SCHEMES,
               "a PostgreSQL URL (postgresql://user:password@host:5432/database)")
    _check_url("BROKER_URL", settings.broker_url, BROKER_SCHEMES,
               "a redis://, rediss:// or amqp:// URL")
    if settings.stale_after_seconds < 3 * settings.heartbeat_seconds:
        # A live job whose heartbeat is merely late (a busy host, a database hiccup)
        # would be reclaimed and run twice.
        raise SettingsError(
            f"SWITCHYARD_STALE_AFTER_SECONDS ({settings.stale_after_seconds:g}) must be at "
            f"least 3 x SWITCHYARD_HEARTBEAT_SECONDS ({settings.heartbeat_seconds:g})")
    for service_check in _service_checks:
        _run(service_check, settings)
    for name, value in (("SWITCHYARD_SECRET_KEY", settings.secret_key),
                        ("SWITCHYARD_METRICS_TOKEN", settings.metrics_token)):
        # HKDF does not slow a guess down, and /metrics has no failure limit: length does.
        if value and len(value) < MIN_SECRET_LENGTH:
            raise SettingsError(f"{name} must be at least {MIN_SECRET_LENGTH} characters "
                                "(python -c 'import secrets; print(secrets.token_urlsafe())')")
    if bool(settings.artifacts_s3_access_key_id) != bool(settings.artifacts_s3_secret_access_key):
        raise SettingsError("SWITCHYARD_ARTIFACTS_S3_ACCESS_KEY_ID and _SECRET_ACCESS_KEY go "
                            "together: set both, or neither (boto3's usual AWS_* chain)")
    return settings


# A service's own settings are strings here; the service says how they are read, and a
# wrong one stops the process at start-up like any other (a ValueError naming it).
ServiceCheck = Callable[["Settings"], object]
_service_checks: list[ServiceCheck] = []


def add_check(service_check: ServiceCheck) -> None:
    """Check the settings a service reads; at once when they have been read already."""
    _service_checks.append(service_check)
    if get_settings.cache_info().currsize:
        _run(service_check, get_settings())


def _run(service_check: ServiceCheck, settings: Settings) -> None:
    try:
        service_check(settings)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _role_models() -> tuple[tuple[str, str, str], ...]:
    roles: dict[str, list[str]] = {}
    for key, value in os.environ.items():
        for prefix, slot in (("SWITCHYARD_LLM_PROVIDER_", 0), ("SWITCHYARD_LLM_MODEL_", 1)):
            if key.startswith(prefix) and key[len(prefix):] and value.strip():
                roles.setdefault(key[len(prefix):], ["", ""])[slot] = (
                    value.strip().lower() if slot == 0 else value.strip())
    return tuple((role, p, m) for role, (p, m) in sorted(roles.items()))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment once."""
    return read_settings()


def read_settings() -> Settings:
    """The settings as the environment says now, leaving get_settings' cache alone: for what
    runs before a process's environment is final (a scratch database is migrated, then named
    in DATABASE_URL for the rest of the process)."""
    public_url = env_http_url("SWITCHYARD_PUBLIC_URL")
    return check(Settings(
        database_url=env_str("DATABASE_URL", DEFAULT_DATABASE_URL),
        broker_url=env_str("BROKER_URL", DEFAULT_BROKER_URL),
        # Absolute once, here: a path derived from a relative one would mean something else
        # to a command run from another directory (git's clone, a sandboxed test run).
        data_dir=Path(os.path.abspath(env_str("SWITCHYARD_DATA_DIR", "./.switchyard"))),
        heartbeat_seconds=env_float("SWITCHYARD_HEARTBEAT_SECONDS", 10.0, minimum=0.1),
        stale_after_seconds=env_float("SWITCHYARD_STALE_AFTER_SECONDS", 60.0, minimum=0.5),
        sweep_seconds=env_float("SWITCHYARD_SWEEP_SECONDS", 5.0, minimum=0.1),
        shutdown_grace_seconds=env_float("SWITCHYARD_SHUTDOWN_GRACE_SECONDS", 20.0),
        redispatch_after_seconds=env_float("SWITCHYARD_REDISPATCH_AFTER_SECONDS", 60.0, minimum=1),
        prefetch_multiplier=env_int("SWITCHYARD_PREFETCH_MULTIPLIER", 4, minimum=1),
        claim_ahead=env_int("SWITCHYARD_CLAIM_AHEAD", 0),
        amqp_queue_type=env_choice("SWITCHYARD_AMQP_QUEUE_TYPE", "classic",
                                   ("classic", "quorum")),
        worker_concurrency=env_int("SWITCHYARD_WORKER_CONCURRENCY", 8, minimum=1),
        worker_pool=env_str("SWITCHYARD_WORKER_POOL", "threads"),
        log_level=env_str("SWITCHYARD_LOG_LEVEL", "INFO").upper(),
        rate_limit_per_second=env_float("SWITCHYARD_RATE_LIMIT_PER_SECOND", 100.0, minimum=0.01),
        rate_limit_burst=env_float("SWITCHYARD_RATE_LIMIT_BURST", 400.0, minimum=1),
        cron_secret=env_str("SWITCHYARD_CRON_SECRET", ""),
        auth_failures_per_minute=env_float("SWITCHYARD_AUTH_FAILURES_PER_MINUTE", 6.0,
                                           minimum=0.01),
        auth_failures_burst=env_float("SWITCHYARD_AUTH_FAILURES_BURST", 20.0, minimum=1),
        sse_keepalive_seconds=env_float("SWITCHYARD_SSE_KEEPALIVE_SECONDS", 15.0, minimum=0.05),
        streams_per_token=env_int("SWITCHYARD_STREAMS_PER_TOKEN", 20, minimum=1),
        streams_per_process=env_int("SWITCHYARD_STREAMS_PER_PROCESS", 48, minimum=1),
        stream_max_seconds=env_float("SWITCHYARD_STREAM_MAX_SECONDS", 600.0, minimum=1.0),
        web_db_connections=env_int("SWITCHYARD_WEB_DB_CONNECTIONS", 20, minimum=2),
        request_receive_seconds=env_float("SWITCHYARD_REQUEST_RECEIVE_SECONDS", 15.0,
                                          minimum=0.5),
        token_cache_seconds=env_float("SWITCHYARD_TOKEN_CACHE_SECONDS", 1.0, minimum=0.0),
        secret_key=env_str("SWITCHYARD_SECRET_KEY", ""),
        public_url=public_url,
        secure_cookies=env_bool("SWITCHYARD_SECURE_COOKIES", public_url.startswith("https:")),
        metrics_token=env_str("SWITCHYARD_METRICS_TOKEN", ""),
        metrics_cache_seconds=env_float("SWITCHYARD_METRICS_CACHE_SECONDS", 5.0, minimum=0.0),
        trusted_proxies=env_int("SWITCHYARD_TRUSTED_PROXIES", 0, minimum=0),
        llm_provider=env_str("SWITCHYARD_LLM_PROVIDER", "scripted").lower(),
        anthropic_api_key=env_str("ANTHROPIC_API_KEY", ""),
        anthropic_base_url=env_str("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
        llm_role_models=_role_models(),
        llm_project_models=tuple(m.strip() for m in env_str(
            "SWITCHYARD_LLM_PROJECT_MODELS", "").split(",") if m.strip()),
        otel_trust_incoming=env_bool("SWITCHYARD_OTEL_TRUST_INCOMING", False),
        # SWITCHYARD_DAILY_HOUR_UTC: its name before projects had time zones.
        daily_hour=min(23, env_int("SWITCHYARD_DAILY_HOUR",
                                   env_int("SWITCHYARD_DAILY_HOUR_UTC", 2))),
        openai_api_key=env_str("OPENAI_API_KEY", ""),
        openai_base_url=env_str("OPENAI_BASE_URL", ""),
        llm_model=env_str("SWITCHYARD_LLM_MODEL", DEFAULT_MODELS.get(
            env_str("SWITCHYARD_LLM_PROVIDER", "scripted").lower(), "claude-sonnet-4-6")),
        llm_max_tokens=env_int("SWITCHYARD_LLM_MAX_TOKENS", 4096, minimum=1),
        llm_daily_usd_per_owner=env_float("SWITCHYARD_LLM_DAILY_USD_PER_OWNER", 20.0,
                                          minimum=0.0),
        llm_timeout_seconds=env_float("SWITCHYARD_LLM_TIMEOUT_SECONDS", 60.0, minimum=0.1),
        llm_price_input_per_mtok=(
            env_float("SWITCHYARD_LLM_PRICE_INPUT_PER_MTOK", 0.0)
            if env_str("SWITCHYARD_LLM_PRICE_INPUT_PER_MTOK", "") else None),
        llm_price_output_per_mtok=(
            env_float("SWITCHYARD_LLM_PRICE_OUTPUT_PER_MTOK", 0.0)
            if env_str("SWITCHYARD_LLM_PRICE_OUTPUT_PER_MTOK", "") else None),
        effect_timeout_seconds=env_float("SWITCHYARD_EFFECT_TIMEOUT_SECONDS", 15.0, minimum=0.1),
        egress_allow=env_str("SWITCHYARD_EGRESS_ALLOW", ""),
        code_setup_hosts=env_str("SWITCHYARD_CODE_SETUP_HOSTS", ""),
        code_setup_timeout_seconds=env_float("SWITCHYARD_CODE_SETUP_TIMEOUT_SECONDS", 900.0,
                                             minimum=10.0),
        code_env_max_bytes=env_int("SWITCHYARD_CODE_ENV_MAX_BYTES", 10 * 1024 * 1024 * 1024,
                                   minimum=0),
        code_registry_hosts=env_str("SWITCHYARD_CODE_REGISTRY_HOSTS",
                                    Settings.code_registry_hosts),
        effects_allowed=env_str("SWITCHYARD_EFFECTS_ALLOWED", ""),
        effect_cap_ceilings=env_str("SWITCHYARD_EFFECT_CAP_CEILINGS", ""),
        shared_credentials=os.environ.get("SWITCHYARD_SHARED_CREDENTIALS", "email").strip(),
        smtp_host=env_str("SWITCHYARD_SMTP_HOST", ""),
        smtp_port=env_int("SWITCHYARD_SMTP_PORT", 25, minimum=1),
        smtp_user=env_str("SWITCHYARD_SMTP_USER", ""),
        smtp_password=env_str("SWITCHYARD_SMTP_PASSWORD", ""),
        smtp_starttls=env_bool("SWITCHYARD_SMTP_STARTTLS", False),
        smtp_ssl=env_bool("SWITCHYARD_SMTP_SSL", False),
        email_from=env_str("SWITCHYARD_EMAIL_FROM", "Switchyard <switchyard@localhost>"),
        email_from_domains=env_str("SWITCHYARD_EMAIL_FROM_DOMAINS", ""),
        resend_api_key=env_str("SWITCHYARD_RESEND_API_KEY", ""),
        resend_base_url=env_str("SWITCHYARD_RESEND_BASE_URL", "https://api.resend.com"),
        github_api_url=env_str("SWITCHYARD_GITHUB_API_URL", "https://api.github.com"),
        github_token=env_str("SWITCHYARD_GITHUB_TOKEN", ""),
        github_shared_repos=env_str("SWITCHYARD_GITHUB_SHARED_REPOS", ""),
        ads_api_url=env_str("SWITCHYARD_ADS_API_URL", ""),
        ads_api_key=env_str("SWITCHYARD_ADS_API_KEY", ""),
        db_retry_seconds=env_float("SWITCHYARD_DB_RETRY_SECONDS", 60.0, minimum=0.0),
        db_connect_timeout_seconds=env_float("SWITCHYARD_DB_CONNECT_TIMEOUT_SECONDS", 5.0,
                                             minimum=1.0),
        db_tcp_user_timeout_seconds=env_float("SWITCHYARD_DB_TCP_USER_TIMEOUT_SECONDS", 30.0,
                                              minimum=0.0),
        migration_lock_timeout_seconds=env_float("SWITCHYARD_MIGRATION_LOCK_TIMEOUT_SECONDS",
                                                 3.0),
        migration_lock_wait_seconds=env_float("SWITCHYARD_MIGRATION_LOCK_WAIT_SECONDS", 300.0),
        owner_max_active=env_int("SWITCHYARD_OWNER_MAX_ACTIVE", 16, minimum=0),
        max_descendants=env_int("SWITCHYARD_MAX_DESCENDANTS", 1000, minimum=0),
        max_projects_per_owner=env_int("SWITCHYARD_MAX_PROJECTS_PER_OWNER", 100, minimum=0),
        max_function_data_bytes_per_owner=env_int(
            "SWITCHYARD_MAX_FUNCTION_DATA_BYTES_PER_OWNER", 256 * 1024 * 1024, minimum=0),
        max_memory_keys_per_owner=env_int("SWITCHYARD_MAX_MEMORY_KEYS_PER_OWNER", 10_000,
                                          minimum=0),
        max_artifact_bytes_per_owner=env_int("SWITCHYARD_MAX_ARTIFACT_BYTES_PER_OWNER",
                                             5 * 1024 * 1024 * 1024, minimum=0),
        max_priority=min(9, env_int("SWITCHYARD_MAX_PRIORITY", 9, minimum=0)),
        event_data_max_bytes=env_int("SWITCHYARD_EVENT_DATA_MAX_BYTES", 64 * 1024, minimum=1024),
        step_output_max_bytes=env_int("SWITCHYARD_STEP_OUTPUT_MAX_BYTES", 1024 * 1024,
                                      minimum=64 * 1024),
        worker_statement_timeout_seconds=env_float(
            "SWITCHYARD_WORKER_STATEMENT_TIMEOUT_SECONDS", 60.0, minimum=0.0),
        web_statement_timeout_seconds=env_float(
            "SWITCHYARD_WEB_STATEMENT_TIMEOUT_SECONDS", 5.0, minimum=0.0),
        idle_in_transaction_timeout_seconds=env_float(
            "SWITCHYARD_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", 60.0, minimum=0.0),
        web_db_wait_seconds=env_float("SWITCHYARD_WEB_DB_WAIT_SECONDS", 2.0, minimum=0.0),
        free_retry_max=env_int("SWITCHYARD_FREE_RETRY_MAX", 100, minimum=0),
        free_retry_max_seconds=env_float("SWITCHYARD_FREE_RETRY_MAX_SECONDS", 6 * 3600.0),
        retry_after_max_seconds=env_float("SWITCHYARD_RETRY_AFTER_MAX_SECONDS", 3600.0,
                                          minimum=1.0),
        retention_days=env_int("SWITCHYARD_RETENTION_DAYS", 30, minimum=1),
        maintenance_seconds=env_float("SWITCHYARD_MAINTENANCE_SECONDS", 300.0, minimum=1.0),
        websearch_url=env_http_url("SWITCHYARD_WEBSEARCH_URL"),
        websearch_key=env_str("SWITCHYARD_WEBSEARCH_KEY", ""),
        step_trace_dir=env_str("SWITCHYARD_STEP_TRACE_DIR", ""),
        artifact_max_bytes=env_int("SWITCHYARD_ARTIFACT_MAX_BYTES", 100 * 1024 * 1024,
                                   minimum=1),
        artifacts_s3_bucket=env_str("SWITCHYARD_ARTIFACTS_S3_BUCKET", ""),
        artifacts_s3_endpoint_url=env_http_url("SWITCHYARD_ARTIFACTS_S3_ENDPOINT_URL"),
        artifacts_s3_region=env_str("SWITCHYARD_ARTIFACTS_S3_REGION", ""),
        artifacts_s3_prefix=env_str("SWITCHYARD_ARTIFACTS_S3_PREFIX", "").strip("/"),
        artifacts_s3_access_key_id=env_str("SWITCHYARD_ARTIFACTS_S3_ACCESS_KEY_ID", ""),
        artifacts_s3_secret_access_key=env_str("SWITCHYARD_ARTIFACTS_S3_SECRET_ACCESS_KEY", ""),
        function_pool_size=env_int("SWITCHYARD_FUNCTION_POOL_SIZE", 2),
        function_sandbox_same_user=env_bool("SWITCHYARD_FUNCTION_SANDBOX_SAME_USER", False),
        function_fences=env_choice("SWITCHYARD_FUNCTION_FENCES", "strict", ("strict", "weak")),
        workflow_parallel=min(MAX_WORKFLOW_PARALLEL,
                              env_int("SWITCHYARD_WORKFLOW_PARALLEL", 4, minimum=1)),
        local_repos=tuple(Path(d).resolve() for d in
                          env_str("SWITCHYARD_LOCAL_REPOS", "").split(",") if d.strip()),
        code_run_timeout_seconds=env_float("SWITCHYARD_CODE_RUN_TIMEOUT_SECONDS", 120.0,
                                           minimum=1.0),
        code_run_memory_mb=env_int("SWITCHYARD_CODE_RUN_MEMORY_MB", 2048, minimum=64),
        code_run_output_chars=env_int("SWITCHYARD_CODE_RUN_OUTPUT_CHARS", 30_000, minimum=1000),
        code_network_allowed=env_bool("SWITCHYARD_CODE_NETWORK_ALLOWED", False),
        code_sandbox_same_user=env_bool("SWITCHYARD_CODE_SANDBOX_SAME_USER", False),
        scripted_stream_seconds=env_float("SWITCHYARD_SCRIPTED_STREAM_SECONDS", 0.0),
        plan_roles=env_str_map("SWITCHYARD_PLAN_ROLES"),
        plan_max_revisions=env_int("SWITCHYARD_PLAN_MAX_REVISIONS", 2, minimum=0),
    ))
