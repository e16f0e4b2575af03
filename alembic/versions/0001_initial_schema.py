"""initial schema: projects, owners, tokens, jobs, steps, events, workers, sweeps

Revision ID: 0001
Revises:
Create Date: 2026-11-22 19:57:44.981213
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('owners',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('sweep_runs',
    sa.Column('sweep', sa.Text(), nullable=False),
    sa.Column('tick', sa.BigInteger(), nullable=False),
    sa.Column('ran_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('ran_by', sa.Text(), nullable=False),
    sa.Column('stats', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.PrimaryKeyConstraint('sweep', 'tick')
    )
    op.create_table('worker_heartbeats',
    sa.Column('worker', sa.Text(), nullable=False),
    sa.Column('hostname', sa.Text(), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('queues', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('stopped_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('running', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.PrimaryKeyConstraint('worker')
    )
    op.create_table('api_tokens',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('owner_id', sa.Uuid(), nullable=False),
    sa.Column('token_hash', sa.Text(), nullable=False),
    sa.Column('prefix', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_hash')
    )
    op.create_index('ix_api_tokens_owner', 'api_tokens', ['owner_id'], unique=False)
    op.create_table('projects',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('owner_id', sa.Uuid(), nullable=True),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('goal', sa.Text(), nullable=True),
    sa.Column('night_shift', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    sa.Column('phase', sa.Text(), server_default=sa.text("'idea'"), nullable=False),
    sa.Column('settings', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_projects_owner_created', 'projects', ['owner_id', 'created_at'], unique=False)
    # The sentinel system project: jobs that belong to no project (email, drip sweeps).
    op.execute(
        "INSERT INTO projects (id, owner_id, name, phase) "
        "VALUES ('00000000-0000-0000-0000-000000000000', NULL, 'system', 'system')"
    )
    op.create_table('agent_jobs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('job_type', sa.Text(), nullable=False),
    sa.Column('agent_key', sa.Text(), nullable=True),
    sa.Column('status', sa.Text(), server_default=sa.text("'queued'"), nullable=False),
    sa.Column('queue', sa.Text(), server_default=sa.text("'default'"), nullable=False),
    sa.Column('priority', sa.SmallInteger(), server_default=sa.text('5'), nullable=False),
    sa.Column('payload', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('idempotency_key', sa.Text(), nullable=False),
    sa.Column('run_after', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('max_attempts', sa.Integer(), server_default=sa.text('3'), nullable=False),
    sa.Column('locked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('locked_by', sa.Text(), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('result', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('parent_job_id', sa.Uuid(), nullable=True),
    sa.Column('concurrency_key', sa.Text(), nullable=True),
    sa.Column('concurrency_limit', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('cancel_requested', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    sa.Column('timeout_seconds', sa.Integer(), nullable=True),
    sa.Column('wake_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('wait_for', postgresql.ARRAY(sa.Uuid()), nullable=True),
    sa.Column('dispatched_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('queued', 'running', 'waiting', 'completed', 'failed', 'canceled')", name='ck_agent_jobs_status'),
    sa.CheckConstraint('concurrency_limit >= 1', name='ck_agent_jobs_concurrency_limit'),
    sa.CheckConstraint('max_attempts >= 1', name='ck_agent_jobs_max_attempts'),
    sa.CheckConstraint('priority BETWEEN 0 AND 9', name='ck_agent_jobs_priority'),
    sa.ForeignKeyConstraint(['parent_job_id'], ['agent_jobs.id'], ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('project_id', 'idempotency_key', name='uq_agent_jobs_project_key')
    )
    op.create_index('ix_agent_jobs_concurrency', 'agent_jobs', ['concurrency_key', 'status'], unique=False, postgresql_where=sa.text('concurrency_key IS NOT NULL'))
    op.create_index('ix_agent_jobs_parent', 'agent_jobs', ['parent_job_id'], unique=False, postgresql_where=sa.text('parent_job_id IS NOT NULL'))
    op.create_index('ix_agent_jobs_project_created', 'agent_jobs', ['project_id', 'created_at', 'id'], unique=False)
    op.create_index('ix_agent_jobs_ready', 'agent_jobs', ['run_after'], unique=False, postgresql_where=sa.text("status = 'queued'"))
    op.create_index('ix_agent_jobs_running_heartbeat', 'agent_jobs', ['heartbeat_at'], unique=False, postgresql_where=sa.text("status = 'running'"))
    op.create_index('ix_agent_jobs_status_type', 'agent_jobs', ['status', 'job_type'], unique=False)
    op.create_index('ix_agent_jobs_waiting', 'agent_jobs', ['wake_at'], unique=False, postgresql_where=sa.text("status = 'waiting'"))
    op.create_table('agent_job_events',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=True), nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=True),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('message', sa.Text(), server_default=sa.text("''"), nullable=False),
    sa.Column('data', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_agent_job_events_job_id', 'agent_job_events', ['job_id', 'id'], unique=False)
    op.create_index('ix_agent_job_events_project_id', 'agent_job_events', ['project_id', 'id'], unique=False)
    op.create_table('job_steps',
    sa.Column('job_id', sa.Uuid(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('output', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('running', 'completed', 'failed')", name='ck_job_steps_status'),
    sa.ForeignKeyConstraint(['job_id'], ['agent_jobs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'seq')
    )


def downgrade() -> None:
    op.drop_table('job_steps')
    op.drop_index('ix_agent_job_events_project_id', table_name='agent_job_events')
    op.drop_index('ix_agent_job_events_job_id', table_name='agent_job_events')
    op.drop_table('agent_job_events')
    op.drop_index('ix_agent_jobs_waiting', table_name='agent_jobs', postgresql_where=sa.text("status = 'waiting'"))
    op.drop_index('ix_agent_jobs_status_type', table_name='agent_jobs')
    op.drop_index('ix_agent_jobs_running_heartbeat', table_name='agent_jobs', postgresql_where=sa.text("status = 'running'"))
    op.drop_index('ix_agent_jobs_ready', table_name='agent_jobs', postgresql_where=sa.text("status = 'queued'"))
    op.drop_index('ix_agent_jobs_project_created', table_name='agent_jobs')
    op.drop_index('ix_agent_jobs_parent', table_name='agent_jobs', postgresql_where=sa.text('parent_job_id IS NOT NULL'))
    op.drop_index('ix_agent_jobs_concurrency', table_name='agent_jobs', postgresql_where=sa.text('concurrency_key IS NOT NULL'))
    op.drop_table('agent_jobs')
    op.drop_index('ix_projects_owner_created', table_name='projects')
    op.drop_table('projects')
    op.drop_index('ix_api_tokens_owner', table_name='api_tokens')
    op.drop_table('api_tokens')
    op.drop_table('worker_heartbeats')
    op.drop_table('sweep_runs')
    op.drop_table('owners')
