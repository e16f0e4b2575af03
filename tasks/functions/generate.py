"""code.generate_function's pure parts: the brief the model writes against, reading its
answer, and the dry tools a draft is test-run with (no tool touches anything)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

TOOLS_GUIDE = """\
Write one JavaScript function for a sandbox (QuickJS, ES2023; no network, no filesystem, no
require/import). Shape:

export async function runTask(input, tools) { ... return result; }

`input` is JSON; the result must be JSON. `supabase` is in scope, and `tools` holds:
- tools.supabase (the same client as `supabase`), supabase-js style on a table of your own
  naming: rows are flat objects {id, created_at, updated_at, ...your fields}.
  await supabase.from("leads").insert([{email, score}]).select() -> {data: rows, error};
  .select("a, b", {count: "exact"}) .eq/.neq/.gt/.gte/.lt/.lte/.like/.ilike/.in/.is/
  .contains(field, value) .or("a.eq.1,b.gt.2") .order(field, {ascending}) .limit(n)
  .range(from, to) .single() .maybeSingle(); .update({...}).eq(...); .delete().eq(...);
  .upsert(row, {onConflict: "email"}). Answers {data, error, count}; errors carry PostgREST
  codes (PGRST116: single() on no or many rows). Read-only tables: "memory" (category, key,
  content), "jobs" (id, job_type, status, result, created_at), "packets".
  e.g. const {data, error} = await supabase.from("leads").select("email")
         .gte("score", 5).order("score", {ascending: false}).limit(10);
- await tools.openai.chat.completions.create({model, messages, max_tokens?}) ->
  {choices: [{message: {role, content}, finish_reason}], usage}; the model name is advisory.
  e.g. const c = await tools.openai.chat.completions.create({model: "gpt-4o-mini",
         messages: [{role: "user", content: "Summarise: " + text}]});
       const summary = c.choices[0].message.content;
- await tools.llm(prompt, {system, max_tokens}) -> text (the short form)
- await tools.websearch(query) -> [{title, url, snippet}]
- await tools.keystore.get(name) -> string or null (a project secret: never log it)
- tools.log(message, data), and console.log/info/warn/error (each line a log event)
- await tools.tasks.run(name, input) -> another function's output
- await tools.memory.get(category?, key?) / await tools.memory.set(category, key, content)
  (categories: fact, preference, decision, learning, context)
There is no tools.gapi (no Google account can be reached).
Date.now() and Math.random() work (they are recorded). The function must make the same
tool calls in the same order when run again with the same answers.

Answer with the code in one ```javascript block, then a sample input for a test run in one
```json block."""

TRIES = 3
FENCE = re.compile(r"```([A-Za-z]*)[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Draft:
    code: str
    sample_input: Any


def brief(name: str, description: str) -> str:
    return f"Write the function {name!r}. What it must do:\n{description}"


def read_answer(text: str) -> Draft:
    """The code and sample input in a model's answer (the whole text when it fenced none)."""
    code, sample = None, None
    for lang, body in FENCE.findall(text):
        if lang.lower() in ("javascript", "js") and code is None:
            code = body
        elif lang.lower() == "json" and sample is None:
            try:
                sample = json.loads(body)
            except ValueError:
                sample = {}
    if code is None:
        blocks = [body for lang, body in FENCE.findall(text) if lang.lower() != "json"]
        code = blocks[0] if blocks else text
    return Draft(code.strip() + "\n", {} if sample is None else sample)


def retry_prompt(problem: str) -> str:
    return (f"That function does not work: {problem}\nFix it and send the whole function "
            "again, in the same form (a ```javascript block, then a ```json sample input).")


def dry_call(tool: str, args: Any) -> Any:
    """A test run's tools: plausible empty answers; nothing is read, written or sent."""
    query = args if isinstance(args, dict) else {}
    answers: dict[str, Any] = {
        "db": {"data": [], "error": None},
        "memory.get": None if query.get("key") is not None else [],
        "llm": "(a model's answer: this is a test run)",
        "openai.chat": {"id": "chatcmpl-dry", "object": "chat.completion", "created": 0,
                        "model": "dry-run", "choices": [{"index": 0, "message": {
                            "role": "assistant", "content": "(a model's answer: a test run)"},
                            "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 0, "completion_tokens": 0,
                                  "total_tokens": 0}},
        "websearch": [],
        "now": int(time.time() * 1000),
        "random": 0.5,
    }
    return answers.get(tool)
