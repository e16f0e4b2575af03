"""`workflow.run`: one run of a stored workflow version, each of its steps a child job.

The DAG itself is driven by tasks.workflows.driver; this module loads the version the run
was started with (recorded, so saving a new version meanwhile changes nothing), fills each
step's payload from the run's inputs and its upstream outputs when the step starts, and
says how the run ended.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine.context import JobContext
from tasks.engine.errors import PermanentError
from tasks.engine.registry import JobType, register
from tasks.settings import MAX_WORKFLOW_PARALLEL, get_settings
from tasks.workflows import store, templates
from tasks.workflows.dag import Node, StepState, context
from tasks.workflows.driver import drive
from tasks.workflows.errors import WorkflowError
from tasks.workflows.job_types import payload_problem
from tasks.workflows.spec import WorkflowSpec


class WorkflowRunPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workflow_id: str = Field(max_length=64)
    inputs: dict[str, Any] = Field(default_factory=dict)
    max_parallel: int | None = Field(None, ge=1, le=MAX_WORKFLOW_PARALLEL)


def handle(ctx: JobContext, p: WorkflowRunPayload) -> dict[str, Any]:
    # Recorded with the version: the parallelism decides how many steps each round opens,
    # so a replay must see the one the run started with, whatever the settings say later.
    stored = ctx.step("load", lambda: {
        **_load(p.workflow_id, str(ctx.project_id)),
        "parallel": p.max_parallel or get_settings().workflow_parallel})
    spec = WorkflowSpec.model_validate(stored["spec"])
    steps = {s.name: s for s in spec.steps}
    nodes = [Node(s.name, tuple(s.depends_on), s.condition, s.on_failure, s.requires_approval)
             for s in spec.steps]

    def resolve(node: Node, states: dict[str, StepState]) -> tuple[str, dict[str, Any]]:
        step = steps[node.name]
        payload = templates.render(step.payload, context(states, p.inputs))
        if (why := payload_problem(step.job_type, payload)) is not None:
            raise WorkflowError(why)
        return step.job_type, payload

    outcome = drive(ctx, nodes, resolve, key="run", inputs=p.inputs,
                    max_parallel=stored["parallel"])
    result = {"status": outcome.status, "workflow_id": stored["id"],
              "version": stored["version"],
              "steps": {name: s.to_json() for name, s in outcome.steps.items()}}
    if outcome.failed is not None:
        why = outcome.steps[outcome.failed].error or "it failed"
        raise PermanentError(f"step {outcome.failed!r} failed, so the run stopped: {why}")
    return result


def _load(workflow_id: str, project_id: str) -> dict[str, Any]:
    stored = store.get(workflow_id)
    # The route checks the owner; this keeps a payload naming another project's workflow out.
    if stored is None or str(stored.project_id) != project_id:
        raise PermanentError(f"workflow {workflow_id} does not exist in this project")
    return {"id": str(stored.id), "version": stored.version, "spec": stored.spec}


JOB_TYPE = register(
    JobType(
        name="workflow.run",
        payload_model=WorkflowRunPayload,
        handle=handle,
        queue="default",
        max_attempts=5,
        public=False,  # started through POST /api/workflows/<wid>/runs
    )
)
