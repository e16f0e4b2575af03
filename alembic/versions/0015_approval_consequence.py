"""approval consequence

What approving runs is recorded on the approval itself (`on_approve`), by the system that
asks: {"run": "effect"} executes the action through the effect ledger (approval.execute),
{"run": "nothing"} is a gate that only wakes the job waiting on it, and {"run": "job", ...}
enqueues the job it names (a phase advance's next packet). The approval service no longer
keeps a list of other systems' action types, and every process agrees because the row says.

Revision ID: 0015
Revises: 0014
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""ALTER TABLE approvals ADD COLUMN on_approve jsonb NOT NULL
                  DEFAULT '{"run": "effect"}'::jsonb""")
    op.execute("""UPDATE approvals SET on_approve = '{"run": "nothing"}'::jsonb
                  WHERE action_type IN ('workflow_step', 'plan', 'pr_merge')""")
    op.execute("""UPDATE approvals SET on_approve = jsonb_build_object(
                      'run', 'job', 'job_type', 'phase.generate_packet',
                      'payload', jsonb_build_object('phase', (action_args->>'to')::int),
                      'idempotency_key', 'phasegen:' || project_id || ':' || (action_args->>'to'))
                  WHERE action_type = 'phase_advance'""")


def downgrade() -> None:
    op.execute("ALTER TABLE approvals DROP COLUMN on_approve")
