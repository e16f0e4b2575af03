"""Switchyard's state plane: the SQLAlchemy schema that Alembic migrates."""

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

__all__ = [
    "SYSTEM_PROJECT_ID",
    "AgentJob",
    "AgentJobEvent",
    "ApiToken",
    "Base",
    "JobStep",
    "Owner",
    "Project",
    "SweepRun",
    "WorkerHeartbeat",
]
