"""function.run through a real Celery worker: both code shapes, the db tool scoped to the
project, tools.log in the feed, secrets kept out of the record, nested calls that suspend
and resume the parent, the depth cap on a cycle, recorded time, non-deterministic replays."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tasks.engine import pg
from tasks.functions import store
from tasks.functions.host import MAX_DEPTH
from tasks.services import keystore
from tests.conftest import wait_until
from tests.integration.jobdb import new_job, status_history, steps, tuples, wait_for
from tests.support.fake_anthropic import FakeAnthropic, anthropic_model, fake_anthropic  # noqa: F401

TIMEOUT = 60.0  # a loaded 2-core machine; every wait ends as soon as its condition holds


def save(project: str, name: str, code: str) -> int:
    return store.save(project, name, code).version


def run(project: str, name: str, input: Any = None, **payload: Any) -> dict[str, Any]:
    job_id = new_job(project, "function.run", {"name": name, "input": input, **payload})
    return wait_for(job_id, "completed", "failed", timeout=TIMEOUT)


def events(job_id: Any) -> list[dict[str, Any]]:
    return [{"type": t, "message": m, "data": d} for t, m, d in tuples(
        "SELECT type, message, data FROM agent_job_events WHERE job_id = %s ORDER BY id",
        (job_id,))]


def other_project() -> str:
    owner, project = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (owner, f"o-{owner[:8]}"))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'theirs')",
               (project, owner))
    return project


@pytest.mark.parametrize(("reason", "code"), [
    ("a module exporting runTask", "export async function runTask(input, tools) {\n"
                                   "  return {sum: input.a + input.b};\n}\n"),
    ("a script body that returns", "return {sum: input.a + input.b};\n"),
    ("module.exports is the function", "module.exports = async (input, tools) => {\n"
                                       "  return {sum: input.a + input.b};\n};\n"),
    ("exports.default", "exports.default = async (input) => ({sum: input.a + input.b});\n"),
    ("module.exports.handler", "module.exports.handler = async function (input, tools) {\n"
                               "  return {sum: input.a + input.b};\n};\n"),
])
def test_both_code_shapes_return_their_output(worker, project: str, reason: str,
                                              code: str) -> None:
    save(project, "add", code)
    job = run(project, "add", {"a": 2, "b": 3})
    assert job["status"] == "completed", job["last_error"]
    assert job["result"] == {"output": {"sum": 5}}


def test_a_javascript_error_fails_the_job_with_its_message_and_line(worker, project) -> None:
    save(project, "broken", "const x = 1;\nthrow new Error('no luck');\n")
    job = run(project, "broken")
    assert job["status"] == "failed"
    assert "no luck" in job["last_error"] and "line 2" in job["last_error"], job["last_error"]
    assert job["attempts"] == 1  # a JavaScript error is not retried


DB_CODE = """
const a = await supabase.from("function_data").insert({collection: "notes", doc: {n: 1, tag: "x"}});
const b = await supabase.from("function_data").insert([{collection: "notes", doc: {n: 2, tag: "y"}},
                                                       {collection: "other", doc: {n: 3}}]);
const all = await supabase.from("function_data").select("collection, doc").order("doc->>n");
const notes = await supabase.from("function_data").select("doc").eq("collection", "notes")
  .neq("doc->>tag", "y");
const many = await tools.db.from("function_data").select("id").in("collection", ["notes", "other"]);
const upd = await supabase.from("function_data").update({doc: {n: 20}}).eq("doc->>n", "2");
const del = await supabase.from("function_data").delete().eq("collection", "other");
const unknown = await supabase.from("agent_jobs").select();  // its own table, not ours
const badname = await supabase.from("agent jobs; --").select();
const badcol = await supabase.from("function_data").select("project_id");
const readonly = await supabase.from("jobs").insert({collection: "x", doc: 1});
const jobs = await supabase.from("jobs").select("job_type, status").eq("job_type", "function.run");
const wide = await supabase.from("function_data").delete();
return {a: a.data.length, b: b.data.length, all: all.data, notes: notes.data,
        many: many.data.length, upd: upd.data.map(r => r.doc), del: del.data.length,
        unknown: unknown.data, badname: badname.error.message, badcol: badcol.error.message,
        readonly: readonly.error.message, jobs: jobs.data, wide: wide.error.message,
        errors: [a.error, all.error, upd.error]};
"""


def test_the_db_tool_inserts_selects_filters_updates_and_deletes(worker, project) -> None:
    save(project, "db", DB_CODE)
    job = run(project, "db")
    assert job["status"] == "completed", job["last_error"]
    out = job["result"]["output"]
    assert (out["a"], out["b"], out["many"], out["del"]) == (1, 2, 3, 1)
    assert out["all"] == [{"collection": "notes", "doc": {"n": 1, "tag": "x"}},
                          {"collection": "notes", "doc": {"n": 2, "tag": "y"}},
                          {"collection": "other", "doc": {"n": 3}}]
    assert out["notes"] == [{"doc": {"n": 1, "tag": "x"}}]
    assert out["upd"] == [{"n": 20}]
    # A name that is not a reserved table is the function's own (empty) table: the real
    # agent_jobs is never reached; a name that is no identifier is refused
    assert out["unknown"] == []
    assert "a table name is letters, digits and _" in out["badname"]
    assert "unknown column 'project_id'" in out["badcol"]
    assert "read-only" in out["readonly"]
    assert out["jobs"] == [{"job_type": "function.run", "status": "running"}]
    assert "needs a filter" in out["wide"]
    assert out["errors"] == [None, None, None]
    rows = tuples("SELECT collection, doc FROM function_data WHERE project_id = %s "
                  "ORDER BY doc->>'n'", (project,))
    assert rows == [("notes", {"n": 1, "tag": "x"}), ("notes", {"n": 20})]


def test_another_projects_rows_are_unreachable_through_the_db_tool(worker, project) -> None:
    # Given another tenant's rows (and its secret-looking document)
    theirs = other_project()
    their_row = str(uuid.uuid4())
    pg.execute("INSERT INTO function_data (id, project_id, collection, doc) VALUES "
               "(%s, %s, 'notes', '{\"secret\": \"theirs\"}')", (their_row, theirs))
    # When a function tries every way a query could name them
    save(project, "snoop", f"""
const byId = await supabase.from("function_data").select().eq("id", "{their_row}");
const all = await supabase.from("function_data").select();
const byProject = await supabase.from("function_data").select().eq("project_id", "{theirs}");
const upd = await supabase.from("function_data").update({{doc: {{}}}}).eq("id", "{their_row}");
const del = await supabase.from("function_data").delete().in("id", ["{their_row}"]);
const inject = await supabase.from("function_data").select("doc").eq("collection",
  "notes' OR true --");
const path = await supabase.from("function_data").select().eq("doc->>secret) OR (true", "x");
return {{byId: byId.data, all: all.data, byProject: byProject.error !== null,
         upd: upd.data, del: del.data, inject: inject.data, path: path.error !== null}};
""")
    job = run(project, "snoop")
    # Then it sees and changes nothing of theirs
    assert job["status"] == "completed", job["last_error"]
    assert job["result"]["output"] == {"byId": [], "all": [], "byProject": True, "upd": [],
                                       "del": [], "inject": [], "path": True}
    assert tuples("SELECT doc FROM function_data WHERE id = %s", (their_row,)) == [
        ({"secret": "theirs"},)]


SECRET = "sk-live-7f3a9c2e1b"


def test_a_secret_never_reaches_events_steps_errors_or_the_result(worker, project) -> None:
    keystore.put(project, "api_key", SECRET)
    save(project, "leaky", """
const key = await tools.keystore.get("api_key");
const none = await tools.keystore.get("not_set");
tools.log("the key is " + key, {key, nested: ["x" + key]});
await supabase.from("function_data").insert({collection: "c", doc: {k: key}});
await supabase.from("keys").upsert({name: "a", k: key}, {onConflict: "name"});
const back = await supabase.from("function_data").select("doc");
await tools.memory.set("fact", "k", "remember " + key);
return {key, none, echoed: back.data[0].doc.k, length: key.length};
""")
    job = run(project, "leaky")
    assert job["status"] == "completed", job["last_error"]
    assert job["result"]["output"] == {"key": "[secret]", "none": None, "echoed": "[secret]",
                                       "length": len(SECRET)}
    feed = events(job["id"])
    logs = [e for e in feed if e["type"] == "log"]
    assert logs and logs[0]["message"] == "the key is [secret]"
    assert logs[0]["data"]["data"] == {"key": "[secret]", "nested": ["x[secret]"]}
    recorded = json.dumps([s["output"] for s in steps(job["id"])])
    assert SECRET not in json.dumps(feed) + recorded + json.dumps(job["result"])
    assert "[secret]" in recorded
    memory = pg.fetch_value("SELECT content FROM agent_memory WHERE project_id = %s", (project,))
    assert memory == "remember [secret]"
    stored = json.dumps(tuples("SELECT doc FROM function_data WHERE project_id = %s",
                               (project,)))
    assert SECRET not in stored and stored.count("[secret]") == 2  # an upsert's too
    # A thrown error that carries the secret is scrubbed too
    save(project, "thrower", "const k = await tools.keystore.get('api_key');\n"
                             "throw new Error('bad key ' + k);\n")
    failed = run(project, "thrower")
    assert failed["status"] == "failed" and SECRET not in failed["last_error"]
    assert "bad key [secret]" in failed["last_error"]


def test_a_secret_is_neither_stored_nor_handed_to_a_nested_function(worker, project) -> None:
    keystore.put(project, "api_key", SECRET)
    save(project, "echo", "return input;\n")
    save(project, "passes", """
const key = await tools.keystore.get("api_key");
await supabase.from("function_data").insert({collection: "c", doc: {k: key}});
await tools.memory.set("fact", key, "x");
try { await tools.tasks.run("echo", {key}); return "handed over"; }
catch (e) { return e.message; }
""")
    job = run(project, "passes")
    assert job["status"] == "completed", job["last_error"]
    assert "holds a secret" in job["result"]["output"]
    # no child was made; the stored document and memory key hold the placeholder
    assert pg.fetch_value("SELECT count(*) FROM agent_jobs WHERE parent_job_id = %s",
                          (job["id"],)) == 0
    assert pg.fetch_value("SELECT doc->>'k' FROM function_data WHERE project_id = %s",
                          (project,)) == "[secret]"
    assert pg.fetch_value("SELECT key FROM agent_memory WHERE project_id = %s",
                          (project,)) == "[secret]"


def test_an_answer_too_large_is_refused_before_it_is_loaded(worker, project) -> None:
    big = "x" * 200_000
    pg.execute("INSERT INTO function_data (id, project_id, collection, doc) "
               "SELECT gen_random_uuid(), %s, 'big', jsonb_build_object('s', %s::text) "
               "FROM generate_series(1, 8)", (project, big))
    save(project, "greedy", """
const all = await supabase.from("function_data").select("doc");
const few = await supabase.from("function_data").select("id").order("created_at");
const two = await supabase.from("function_data").select("doc").limit(2);
return {error: all.error && all.error.message, ids: few.data.length, two: two.data.length};
""")
    job = run(project, "greedy")
    assert job["status"] == "completed", job["last_error"]
    out = job["result"]["output"]
    assert "over the 1048576 allowed" in out["error"]
    assert (out["ids"], out["two"]) == (8, 2)


def test_json_nested_too_deep_fails_the_run_cleanly(worker, project) -> None:
    save(project, "deep", "let v = 1; for (let i = 0; i < 5000; i++) v = [v]; return v;\n")
    job = run(project, "deep")
    assert job["status"] == "failed" and job["attempts"] == 1, job["last_error"]


def test_date_now_and_random_are_recorded_so_a_replay_sees_the_same_values(worker,
                                                                            project) -> None:
    # The nested call makes the parent run twice (before and after waiting): the second run
    # replays the clock and the dice from the record.
    save(project, "child", "return 'done';")
    save(project, "timed", """
const t = Date.now();
const r = Math.random();
const d = new Date().getTime();
await tools.tasks.run("child", {});
await supabase.from("function_data").insert({collection: "seen", doc: {t, r, d}});
return {t, r, d};
""")
    job = run(project, "timed")
    assert job["status"] == "completed", job["last_error"]
    out = job["result"]["output"]
    assert out["t"] > 1_600_000_000_000 and 0 <= out["r"] < 1
    recorded = {s["name"]: s["output"] for s in steps(job["id"])}
    assert recorded["call:0:now"]["result"] == out["t"]
    assert recorded["call:1:random"]["result"] == out["r"]
    seen = pg.fetch_value("SELECT doc FROM function_data WHERE project_id = %s", (project,))
    assert seen == out


def test_tools_log_appears_in_the_jobs_events(worker, project) -> None:
    save(project, "talk", "tools.log('hello from js', {n: 1}); return 1;")
    job = run(project, "talk")
    assert job["status"] == "completed", job["last_error"]
    logs = [e for e in events(job["id"]) if e["type"] == "log"]
    assert [(e["message"], e["data"]["data"]) for e in logs] == [("hello from js", {"n": 1})]


@pytest.fixture
def gated_model(anthropic_model: FakeAnthropic  # noqa: F811
                ) -> Iterator[tuple[FakeAnthropic, threading.Event]]:
    """The real SDK against the fake Messages API, whose answers wait for the test's gate:
    a function's tools.llm call stays in flight until the test lets it finish."""
    gate = threading.Event()

    def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
        gate.wait(TIMEOUT)
        return [{"type": "text", "text": "the model's answer"}]

    anthropic_model.script = answer
    yield anthropic_model, gate
    gate.set()


def status(job_id: Any) -> str:
    return str(pg.fetch_value("SELECT status FROM agent_jobs WHERE id = %s", (job_id,)))


def child_of(parent: Any) -> Any:
    return pg.fetch_value("SELECT id FROM agent_jobs WHERE parent_job_id = %s", (parent,))


def test_a_nested_call_suspends_the_parent_and_resumes_it_with_the_childs_output(
        worker, project, gated_model) -> None:
    fake, gate = gated_model
    save(project, "ask", "return {said: await tools.llm(input.q)};")
    save(project, "outer", """
await supabase.from("function_data").insert({collection: "before", doc: {}});
const inner = await tools.tasks.run("ask", {q: "hello?"});
await supabase.from("function_data").insert({collection: "after", doc: inner});
return {inner};
""")
    # Given the parent started, its child blocked in a model call
    parent = new_job(project, "function.run", {"name": "outer"})
    wait_until(lambda: status(parent) == "waiting", TIMEOUT, what="the parent waiting")
    child = child_of(parent)
    wait_until(lambda: fake.count == 1, TIMEOUT, what="the child's model call")
    assert status(child) == "running"
    # When the model answers
    gate.set()
    # Then the child completes and the parent resumes, replays and finishes with its output
    job = wait_for(parent, "completed", "failed", timeout=TIMEOUT)
    assert job["status"] == "completed", job["last_error"]
    assert job["result"] == {"output": {"inner": {"said": "the model's answer"}}}
    history = status_history(parent)
    assert history[-1] == "completed" and "waiting" in history, history
    assert history[history.index("waiting"):][:2] == ["waiting", "queued"], history
    names = [s["name"] for s in steps(parent)]
    assert names == ["load", "call:0:db", "call:1:tasks.run", "child:1", "call:2:db"]
    rows = tuples("SELECT collection FROM function_data WHERE project_id = %s "
                  "ORDER BY created_at", (project,))
    assert rows == [("before",), ("after",)]  # the replay did not insert "before" again
    assert fake.count == 1
    assert job_payload(child)["callers"] == ["outer"]


def job_payload(job_id: Any) -> dict[str, Any]:
    return dict(pg.fetch_value("SELECT payload FROM agent_jobs WHERE id = %s", (job_id,)))


def test_a_nested_call_cycle_stops_at_the_depth_cap(worker, project) -> None:
    save(project, "ping", "return await tools.tasks.run('pong', input + 1);")
    save(project, "pong", "return await tools.tasks.run('ping', input + 1);")
    job = run(project, "ping", 0)
    assert job["status"] == "failed"
    assert "nested functions too deep: ping → pong → ping → pong → ping → pong" \
        in job["last_error"], job["last_error"]
    depths = tuples("SELECT jsonb_array_length(payload->'callers'), status FROM agent_jobs "
                    "WHERE job_type = 'function.run' ORDER BY 1")
    assert depths == [(n, "failed") for n in range(MAX_DEPTH + 1)]


def test_a_replay_that_asks_for_another_call_fails_as_non_deterministic(
        worker, project, gated_model) -> None:
    # Given a function whose path depends on a secret, which is read again on replay
    _, gate = gated_model
    keystore.put(project, "mode", "mode-alpha")
    save(project, "ask", "return await tools.llm('hi');")
    save(project, "branchy", """
const mode = await tools.keystore.get("mode");
if (mode === "mode-alpha") { await supabase.from("function_data").select("id"); }
else { tools.log("the other mode"); }
return await tools.tasks.run("ask", {});
""")
    parent = new_job(project, "function.run", {"name": "branchy"})
    wait_until(lambda: status(parent) == "waiting", TIMEOUT, what="the parent waiting")
    # When the secret changes while it waits, and it resumes
    keystore.put(project, "mode", "mode-bravo")
    gate.set()
    # Then the replay's second call is not the recorded one: the job fails and says so
    job = wait_for(parent, "completed", "failed", timeout=TIMEOUT)
    assert job["status"] == "failed"
    assert "non-deterministic function: call 2 was db(" in job["last_error"]
    assert "and is now log(" in job["last_error"], job["last_error"]


def test_a_tasker_style_function_uses_supabase_openai_and_console(
        worker, project, anthropic_model: FakeAnthropic) -> None:  # noqa: F811
    # Issue 25.2: the seed's tool surface, as code written for it reads
    anthropic_model.script = lambda body: [{"type": "text", "text": "Bonjour"}]
    save(project, "greeter", """
export async function runTask(input, tools) {
  console.log("greeting", input.name, {lang: input.lang});
  const completion = await tools.openai.chat.completions.create({
    model: "gpt-4o-mini",
    messages: [{role: "system", content: "Translate."}, {role: "user", content: "Hello"}],
    max_tokens: 50,
  });
  const text = completion.choices[0].message.content;
  await tools.supabase.from("function_data").insert({collection: "greetings", doc: {text}});
  const { data } = await tools.supabase.from("function_data").select("doc")
    .eq("collection", "greetings");
  console.warn("stored", data.length);
  return { text, finish: completion.choices[0].finish_reason,
           tokens: completion.usage.total_tokens, object: completion.object, rows: data };
}
""")
    job = run(project, "greeter", {"name": "Ada", "lang": "fr"})
    assert job["status"] == "completed", job["last_error"]
    out = job["result"]["output"]
    assert out["text"] == "Bonjour" and out["finish"] == "stop"
    assert out["object"] == "chat.completion" and out["tokens"] > 0
    assert out["rows"] == [{"doc": {"text": "Bonjour"}}]
    # The model got the system message as its system prompt, and the user's turn
    [request] = anthropic_model.received
    assert "Translate." in str(request.body.get("system"))
    assert request.body["messages"][-1]["content"] in ("Hello", [{"type": "text",
                                                                  "text": "Hello"}])
    logs = [(e["message"], e["data"].get("level")) for e in events(job["id"])
            if e["type"] == "log"]
    assert logs == [('greeting Ada {"lang":"fr"}', "info"), ("stored 1", "warn")]


LEADS = """
export async function runTask(input, tools) {
  const { data: made, error: e1 } = await supabase.from("leads").insert([
    { email: "ada@example.com", score: 7, tags: ["vip"], source: "web" },
    { email: "bob@example.com", score: 3, tags: [], source: "ads" },
    { email: "cy@example.com", score: 9, tags: ["vip", "eu"], source: "web" },
  ]).select();
  if (e1) throw new Error(e1.message);
  const { data: hot, count } = await supabase.from("leads")
    .select("email, score", { count: "exact" }).gte("score", 5)
    .order("score", { ascending: false });
  const { data: ada } = await supabase.from("leads").select("email")
    .eq("email", "ada@example.com").single();
  const { data: none, error: notOne } = await supabase.from("leads").select()
    .eq("source", "mail").single();
  const { data: maybe } = await supabase.from("leads").select().eq("source", "mail").maybeSingle();
  const { data: either } = await supabase.from("leads").select("email")
    .or("source.eq.ads,score.gt.8").order("email");
  const { data: vips } = await supabase.from("leads").select("email").contains("tags", ["vip"])
    .ilike("email", "%EXAMPLE.com").order("email").range(0, 0);
  await supabase.from("leads").update({ score: 10 }).eq("email", "bob@example.com");
  await supabase.from("leads").upsert({ email: "cy@example.com", score: 1 },
                                      { onConflict: "email" });
  await supabase.from("leads").upsert({ email: "dee@example.com", score: 4 },
                                      { onConflict: "email" });
  await supabase.from("leads").delete().eq("source", "web").lt("score", 5);
  const { data: left } = await tools.supabase.from("leads").select("email, score").order("email");
  const { data: other } = await supabase.from("notes").select();
  return { made: made.map((r) => Object.keys(r).sort()), hot, count, ada, none,
           code: notOne.code, maybe, either, vips, left, other };
}
"""


def test_a_table_of_its_own_naming_works_as_supabase_js_code_expects(worker, project) -> None:
    # Issue 25.1: "supabase.from('leads').insert({email}) fails: unknown table 'leads'"
    save(project, "leads", LEADS)
    job = run(project, "leads")
    assert job["status"] == "completed", job["last_error"]
    out = job["result"]["output"]
    assert out["made"] == [["created_at", "email", "id", "score", "source", "tags",
                            "updated_at"]] * 3
    assert out["hot"] == [{"email": "cy@example.com", "score": 9},
                          {"email": "ada@example.com", "score": 7}]
    assert out["count"] == 2
    assert out["ada"] == {"email": "ada@example.com"}
    assert (out["none"], out["code"], out["maybe"]) == (None, "PGRST116", None)
    assert out["either"] == [{"email": "bob@example.com"}, {"email": "cy@example.com"}]
    assert out["vips"] == [{"email": "ada@example.com"}]
    assert out["left"] == [{"email": "ada@example.com", "score": 7},
                           {"email": "bob@example.com", "score": 10},
                           {"email": "dee@example.com", "score": 4}]
    assert out["other"] == []  # another table of its own: empty, not an error
    # Stored as the project's documents, scoped to it; another project sees none of them
    assert tuples("SELECT count(*) FROM function_data WHERE project_id = %s "
                  "AND collection = 'leads'", (project,)) == [(3,)]
    stranger = other_project()
    save(stranger, "peek", "return (await supabase.from('leads').select()).data;")
    assert run(stranger, "peek")["result"]["output"] == []


TWIN = """
const row = {id: "7d1f3c1e-0000-4000-8000-00000000b0b0", owner: input};
const ins = await tools.supabase.from("users").insert(row).select();
const dup = await tools.supabase.from("users").insert(row).select();
const ups = await tools.supabase.from("users").upsert({...row, seen: true}).select();
return {ins: ins.data, insError: ins.error, dup: dup.data, code: dup.error && dup.error.code,
        ups: ups.data.map((r) => [r.owner, r.seen])};
"""


def test_two_projects_insert_the_same_explicit_id_each_into_its_own_table(worker,
                                                                          project) -> None:
    # A row's identity is (project, id): B's insert is neither swallowed by A's row nor a
    # way to learn that A has one; a duplicate in B itself is PostgREST's 23505.
    theirs = other_project()
    for who, name in ((theirs, "a"), (project, "b")):
        save(who, "twin", TWIN)
        job = run(who, "twin", name)
        assert job["status"] == "completed", job["last_error"]
        out = job["result"]["output"]
        assert [(r["id"], r["owner"]) for r in out["ins"]] == [
            ("7d1f3c1e-0000-4000-8000-00000000b0b0", name)]
        assert (out["insError"], out["dup"], out["code"]) == (None, None, "23505")
        assert out["ups"] == [[name, True]]
    for who, name in ((theirs, "a"), (project, "b")):
        assert tuples("SELECT doc FROM function_data WHERE project_id = %s",
                      (who,)) == [({"owner": name, "seen": True},)]


def test_console_logging_the_way_models_write_it(worker, project) -> None:
    # An Error logged shows its message (JSON.stringify gave "{}"), and a log line in a long
    # loop does not use up the run's tool calls: past the lines a run keeps, one note says
    # how many more there were, and the run goes on
    save(project, "chatty", """
      try { JSON.parse("{"); } catch (e) { console.error("failed", e); }
      for (let i = 0; i < 300; i++) console.log("line", i);
      return "ok";
    """)
    job = run(project, "chatty")
    assert job["status"] == "completed", job["last_error"]
    assert job["result"]["output"] == "ok"
    logs = [e["message"] for e in events(job["id"]) if e["type"] == "log"]
    assert logs[0].startswith("failed SyntaxError: "), logs[0]
    assert logs[1] == "line 0"
    kept = [m for m in logs if m.startswith("line ")]
    assert 50 <= len(kept) < 300
    assert logs[-1] == f"… {300 - len(kept)} more console lines not recorded (at most " \
                       f"{len(kept) + 1} a run)"
