"""Switchyard's state plane: the SQLAlchemy schema that Alembic migrates."""

from models.plans import Plan, PlanTask, PlanTaskDep, PlanVersion
from models.schema import (
    SYSTEM_PROJECT_ID,
    AgentJob,
    AgentJobEvent,
    ApiToken,
    Base,
    JobStep,
    Owner,
    Project,
    SweepRun,
    WorkerHeartbeat,
)
from models.startup import (
    ActionExecution,
    AgentMemory,
    Approval,
    Artifact,
    ChatMessage,
    EmailJob,
    LlmUsage,
    Packet,
    ProjectSecret,
    Workflow,
)

__all__ = [
    "SYSTEM_PROJECT_ID",
    "ActionExecution",
    "AgentJob",
    "AgentJobEvent",
    "AgentMemory",
    "ApiToken",
    "Approval",
    "Artifact",
    "Base",
    "ChatMessage",
    "EmailJob",
    "JobStep",
    "LlmUsage",
    "Owner",
    "Packet",
    "Plan",
    "PlanTask",
    "PlanTaskDep",
    "PlanVersion",
    "Project",
    "ProjectSecret",
    "SweepRun",
    "WorkerHeartbeat",
    "Workflow",
]
