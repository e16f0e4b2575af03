"""The scripted provider's answer for the functions: a working function for
code.generate_function, named and described as asked (offline, deterministic)."""

from __future__ import annotations

import json

from tasks.services.llm import scripted
from tasks.services.llm.scripted import last_user_text
from tasks.services.llm.types import LLMRequest


def _function_code(req: LLMRequest) -> str:
    """A working function for code.generate_function, written against the tool surface the
    brief documents (console, tools.supabase, tools.openai): it logs, reads the project's
    documents, asks the model about its task and returns what it found."""
    name = str(req.context.get("function_name") or "task")
    description = str(req.context.get("description") or req.context.get("user_message")
                      or last_user_text(req.messages))
    task = json.dumps(description[:200], ensure_ascii=False)
    code = (f"export async function runTask(input, tools) {{\n"
            f"  console.log({json.dumps(name + ' called')}, input);\n"
            "  const { data, error } = await tools.supabase.from(\"notes\")"
            ".select(\"id\").limit(5);\n"
            "  if (error) throw new Error(error.message);\n"
            "  const reply = await tools.openai.chat.completions.create({ model: \"any\",\n"
            f"    messages: [{{ role: \"user\", content: {task} }}] }});\n"
            f"  return {{ function: {json.dumps(name)}, task: {task}, input, "
            "rows: data.length,\n"
            "           answered: reply.choices[0].message.content.length > 0 };\n}\n")
    return (f"Here is {name}:\n```javascript\n{code}```\n"
            "A sample input:\n```json\n{\"example\": true}\n```")


scripted.register("function_code", _function_code)
