"""`research.generate_report`: memory → research (web search, given sources) → a validated
outline from the model → a .pptx or .pdf → an artifact → the key findings into memory.
Every call out is a step; the file is written once however often the job is retried."""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine.context import JobContext
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy
from tasks.services import artifacts, research
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest
from tasks.services.memory import write_memory
from tasks.startup.projects import project_context
from tasks.startup.reports.outline import Outline, parse_outline
from tasks.startup.reports.pdf import build_pdf
from tasks.startup.reports.pptx import build_pptx
from tasks.startup.reports.preview import first_page_png

PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
SYSTEM = ("You are the research analyst of a startup operating system. Answer with a JSON "
          "outline: title, subtitle, summary, findings (title, bullets, notes, figures of "
          "{label, value} where you have numbers) and sources. Only claim what the notes "
          "support.")


class ReportPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str = Field(min_length=1, max_length=300)
    format: Literal["pptx", "pdf"] = "pptx"
    max_slides: int = Field(8, ge=4, le=30)
    sources: list[str] = Field(default_factory=list, max_length=10)


def _research(topic: str, sources: list[str]) -> dict[str, Any]:
    found, note = research.websearch(topic)
    pages = [research.fetch(url).as_dict() for url in sources]
    return {"results": [vars(f) for f in found], "note": note, "pages": pages}


def _outline(ctx: JobContext, context: dict[str, Any], p: ReportPayload,
             notes: dict[str, Any]) -> dict[str, Any]:
    reading = "\n".join(
        [f"- {r['title']} ({r['url']}): {r['snippet']}" for r in notes["results"]]
        + [f"- {pg['title'] or pg['url']} ({pg['url']}): {pg['text'][:1500]}"
           for pg in notes["pages"] if pg["ok"]])
    ask = (f"Topic: {p.topic}\nProject: {context['project_name']} ({context['goal']})\n"
           f"{context['memory_prompt']}\nResearch notes:\n{reading or '(none)'}\n"
           + (f"Note: {notes['note']}\n" if notes["note"] else ""))
    sources = [r["url"] for r in notes["results"]] + [pg["url"] for pg in notes["pages"]
                                                      if pg["ok"]]
    req = LLMRequest(purpose="outline", system=SYSTEM, max_tokens=3000,
                     context=context | {"topic": p.topic, "sources": sources},
                     messages=[{"role": "user", "content": ask}])
    result = call_llm(get_client(), req, project_id=ctx.project_id, job_id=ctx.job_id,
                      step_seq=ctx.current_step)
    return parse_outline(result.text).model_dump(mode="json")  # invalid → PermanentError


def file_stem(topic: str) -> str:
    """The report's file name, from its topic: every report was report.pdf, and a project's
    Files could not tell two apart."""
    plain = unicodedata.normalize("NFKD", topic).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]+", "-", plain).strip("-").lower()[:60].strip("-") or "report"


def handle(ctx: JobContext, p: ReportPayload) -> dict[str, Any]:
    context = ctx.step("load-context", project_context, ctx.project_id)
    notes = ctx.step("research", _research, p.topic, p.sources)
    outline = Outline.model_validate(ctx.step("outline", _outline, ctx, context, p, notes))
    if p.format == "pptx":
        data, count = build_pptx(outline, p.max_slides)
        content_type, unit = PPTX, "slides"
    else:
        data, count = build_pdf(outline)
        content_type, unit = "application/pdf", "pages"
    name = f"{file_stem(p.topic)}.{p.format}"
    artifact_id = artifacts.write(ctx, kind="report", name=name, content_type=content_type,
                                  data=data)
    if p.format == "pdf":  # its first page as the report's thumbnail
        artifacts.write(ctx, kind="preview", name="report-preview.png", content_type="image/png",
                        data=first_page_png(data))
    findings = [f.title for f in outline.findings]
    ctx.step("write-memory", write_memory, ctx.project_id, "learning",
             f"report: {p.topic}"[:200], f"{outline.summary} Findings: {'; '.join(findings)}",
             job_id=ctx.job_id, step="write-memory")
    return {"artifact_id": artifact_id, unit: count, "findings": findings}


JOB_TYPE = register(JobType("research.generate_report", ReportPayload, handle, queue="agents",
                            max_attempts=5, timeout_seconds=600,
                            retry_policy=RetryPolicy(base_seconds=2.0, max_seconds=120.0)))
