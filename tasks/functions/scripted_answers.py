"""The scripted provider's answer for the functions: a working function for
code.generate_function, named and described as asked (offline, deterministic)."""

from __future__ import annotations

import json

from tasks.services.llm import scripted
from tasks.services.llm.scripted import last_user_text
from tasks.services.llm.types import LLMRequest


def _function_code(req: LLMRequest) -> str:
    """A working function for code.generate_function: it logs, reads what the project
    remembers and returns its input with the description it was written for."""
    name = str(req.context.get("function_name") or "task")
    description = str(req.context.get("description") or req.context.get("user_message")
                      or last_user_text(req.messages))
    code = (f"export async function runTask(input, tools) {{\n"
            f"  tools.log({json.dumps(name + ' called')}, {{ input }});\n"
            "  const remembered = await tools.memory.get();\n"
            f"  return {{ function: {json.dumps(name)}, "
            f"task: {json.dumps(description[:200], ensure_ascii=False)}, input, "
            "remembered: remembered.length };\n}\n")
    return (f"Here is {name}:\n```javascript\n{code}```\n"
            "A sample input:\n```json\n{\"example\": true}\n```")




scripted.register("function_code", _function_code)
