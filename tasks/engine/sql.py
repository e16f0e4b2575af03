"""The engine's shared SQL: named predicates and the one builder of status events.

A predicate that several statements need ("this run still owns the job",
"ready to resume", "running under this key", "a pending approval") is spelled
once here and used by name, so the statements cannot drift apart.
"""

from __future__ import annotations

from tasks.engine.status import TERMINAL, sql_list

# What every statement that moves a job returns: what tasks.engine.store.Finished needs.
_MOVED = ("id", "project_id", "parent_job_id", "concurrency_key", "queue", "priority",
          "cancel_requested", "status")


def moved_columns(alias: str = "") -> str:
    a = f"{alias}." if alias else ""
    return ", ".join(f"{a}{c}" for c in _MOVED)


MOVED_COLUMNS = moved_columns()


def keyed_status(alias: str = "") -> str:
    """The status of a row its statement finds by id, read through an expression no index
    reads, so the primary key is the only way to the row.

    The hot path's statements are prepared once per connection and planned on the
    statistics of that moment. Taken when few jobs were queued (or none yet: a new
    database), they make `status = 'queued'` look as rare as one id, and a bare condition
    on the column let the planner reach the row through an index on status
    (ix_agent_jobs_status_type, or a partial index whose predicate it implies: ready,
    holding) — walking every queued job at each claim, or every running one at each
    checkpoint, from then on (issue 26: 0.5 ms a claim with 300 queued).
    """
    a = f"{alias}." if alias else ""
    return f"({a}status || '')"


def owns_run(alias: str = "") -> str:
    """The row is running under the claim token %(token)s: the fence of every write of a run."""
    a = f"{alias}." if alias else ""
    return f"{a}id = %(id)s AND {keyed_status(alias)} = 'running' AND {a}claim_token = %(token)s"


def ready_to_resume(alias: str, *, keyed: bool = False) -> str:
    """A waiting job whose timer is due (by the database's clock) and whose children are done:
    all of them, or with `wait_any` one child ended or one approval of `wait_approvals` left
    `pending` (decided or expired, by the database's clock). `keyed`: of a row found by id
    (keyed_status)."""
    a = alias
    status = keyed_status(a) if keyed else f"{a}.status"
    running = f"{status_of('agent_jobs', 'w.id')} NOT IN {sql_list(TERMINAL)}"
    return (f"{status} = 'waiting' AND ({a}.wake_at IS NULL OR {a}.wake_at <= now()) AND "
            f"CASE WHEN {a}.wait_any THEN {one_ended(f'{a}.wait_for', f'{a}.wait_approvals')} "
            f"ELSE NOT EXISTS (SELECT 1 FROM unnest({a}.wait_for) w(id) WHERE {running}) END")


def status_of(table: str, key: str, status: str = "x.status") -> str:
    """The status (`status`, an expression of the row `x`) of the row of `table` whose id is
    `key`, NULL if there is none: a scalar subquery on one id, read by the primary key
    whatever the table's size or statistics.

    A wait's ids are an array; `c.id = ANY(wait_for)` is planned as a pass over the table
    whenever it looks small (a new database, statistics taken before a burst), and the
    plan stays with the worker's connection: each child's finish read every job
    (issue 26)."""
    return f"(SELECT {status} FROM {table} x WHERE x.id = {key})"


def one_ended(jobs: str, approvals: str) -> str:
    """One job of the uuid[] `jobs` is terminal, or one approval of `approvals` is no longer
    pending (decided, or expired by the database's clock): what ends a wait_any."""
    approval = status_of("approvals", "w.id", approval_status("x"))
    return (f"(EXISTS (SELECT 1 FROM unnest({jobs}) w(id) "
            f"WHERE {status_of('agent_jobs', 'w.id')} IN {sql_list(TERMINAL)}) "
            f"OR EXISTS (SELECT 1 FROM unnest({approvals}) w(id) WHERE {approval} <> 'pending'))")


def heartbeat_stale(alias: str = "") -> str:
    """The run's worker has not checked in for %(stale)s seconds, by the database's clock.

    And the database itself has been up that long: while it was down no worker
    could check in, so after a restart (or a crash and recovery) every worker gets
    one full period to reconnect before its runs are declared lost. Without this,
    an outage longer than the stale threshold had every live run reclaimed and run
    a second time the moment the database came back (the chaos suite caught it).
    """
    a = f"{alias}." if alias else ""
    return (f"{a}heartbeat_at < now() - make_interval(secs => %(stale)s) "
            "AND pg_postmaster_start_time() < now() - make_interval(secs => %(stale)s)")


def running_under_key(key: str, alias: str = "r") -> str:
    return f"{alias}.concurrency_key = {key} AND {alias}.status = 'running'"


def visible_to(alias: str, viewer: str = "%(viewer)s") -> str:
    """The job is one the viewer may see counted or named: a job of a project the owner
    `viewer` (a uuid parameter) owns, or any job when `viewer` is NULL (an admin token's
    fleet view). The monitor and diagnosis scope every read of other jobs by it."""
    return (f"(CAST({viewer} AS uuid) IS NULL OR {alias}.project_id IN "
            f"(SELECT id FROM projects WHERE owner_id = CAST({viewer} AS uuid)))")


def due(alias: str = "", *, keyed: bool = False) -> str:
    """Waiting for a worker now: queued, and its time (a retry's backoff, a schedule) has
    come by the database's clock. `keyed`: of a row found by id (keyed_status)."""
    a = f"{alias}." if alias else ""
    status = keyed_status(alias) if keyed else f"{a}status"
    return f"{status} = 'queued' AND {a}run_after <= now()"


def pending_approval(alias: str = "") -> str:
    """Still awaiting a decision: pending and not expired (by the database's clock)."""
    a = f"{alias}." if alias else ""
    return f"{a}status = 'pending' AND ({a}expires_at IS NULL OR {a}expires_at > now())"


def approval_status(alias: str) -> str:
    """The approval's status as a job waiting on it must read it: a pending one past its
    expiry is `expired` already (the sweep that marks it may not have run), as wait_any's
    wake-up (one_ended) counts it."""
    return (f"CASE WHEN {alias}.status = 'pending' AND NOT ({pending_approval(alias)}) "
            f"THEN 'expired' ELSE {alias}.status END")


def unknown_effect_of_action(approval: str) -> str:
    """SELECT (id, action_type) of an unknown effect of the exact action of the approval row
    `approval` (same project, same action and arguments): doing it again could do it twice."""
    return ("SELECT e.id, e.action_type FROM action_executions e "
            "JOIN approvals o ON o.id = e.approval_id "
            f"WHERE e.status = 'unknown' AND o.project_id = {approval}.project_id "
            f"AND o.args_hash = {approval}.args_hash ORDER BY e.created_at LIMIT 1")


def status_event(source: str, new: str, old: str, reason: str | None = None) -> str:
    """INSERT of one `status` event per row of `source` (a CTE with id and project_id).

    `new`, `old` and `reason` are SQL expressions (column names or quoted literals).
    Every status change the engine writes builds its event here or, where the event
    is written beside others in order (a run's finish), from status_data below.
    """
    return (f"INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
            f"SELECT id, project_id, 'status', {new}, {status_data(new, old, reason)} "
            f"FROM {source}")


def status_data(new: str, old: str, reason: str | None = None, step: str | None = None) -> str:
    """The jsonb of a status event, so the shape of the stream (`{"status", "from",
    "reason"?, "step"?}`) is defined once; a NULL or empty `reason` and a NULL `step` (a
    jsonb expression: the outcome of the step the move ended with) are left out."""
    data = f"jsonb_build_object('status', {new}, 'from', {old})"
    if reason is not None:
        data = (f"({data} || CASE WHEN NULLIF({reason}, '') IS NULL THEN '{{}}'::jsonb "
                f"ELSE jsonb_build_object('reason', {reason}) END)")
    if step is not None:
        data = (f"({data} || CASE WHEN {step} IS NULL THEN '{{}}'::jsonb "
                f"ELSE jsonb_build_object('step', {step}) END)")
    return data


def lit(value: str) -> str:
    """A SQL string literal of a trusted constant (a status name)."""
    assert "'" not in value
    return f"'{value}'"


# psycopg parses a query's placeholders once and caches the result, but only for a query of
# at most this many characters (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH); a longer one
# is parsed again at every execution (cProfile: the finish's ~0.1 ms a job).
PARSE_CACHE_LIMIT = 4096


def compact(statement: str) -> str:
    """The statement without indentation, blank lines or `--` comments, as the server sees
    it, so the hot path's long statements fit psycopg's parse cache. A comment is cut only
    outside a quoted literal; the engine's statements use no dollar quoting."""
    lines = []
    for line in statement.splitlines():
        quoted, cut = False, len(line)
        for i, char in enumerate(line):
            if char == "'":
                quoted = not quoted
            elif not quoted and line.startswith("--", i):
                cut = i
                break
        if kept := line[:cut].strip():
            lines.append(kept)
    return "\n".join(lines)
