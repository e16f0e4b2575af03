"""startup OS: memory, chat, packets, approvals, effect ledger, email outbox, llm usage

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 20:26:50.709144
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('agent_jobs', sa.Column('wait_reason', sa.Text(), nullable=True))
    op.create_table('llm_usage',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=True), nullable=False),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=True),
    sa.Column('provider', sa.Text(), nullable=False),
    sa.Column('model', sa.Text(), nullable=False),
    sa.Column('input_tokens', sa.Integer(), nullable=False),
    sa.Column('output_tokens', sa.Integer(), nullable=False),
    sa.Column('cost_usd', sa.Numeric(precision=12, scale=6), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_llm_usage_project_created', 'llm_usage', ['project_id', 'created_at'], unique=False)
    op.create_table('action_executions',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('idempotency_key', sa.Text(), nullable=False),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('approval_id', sa.Uuid(), nullable=True),
    sa.Column('job_id', sa.Uuid(), nullable=True),
    sa.Column('action_type', sa.Text(), nullable=False),
    sa.Column('args', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'intent'"), nullable=False),
    sa.Column('provider_ref', sa.Text(), nullable=True),
    sa.Column('response', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('intent', 'succeeded', 'failed', 'unknown')", name='ck_action_executions_status'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('idempotency_key')
    )
    op.create_index('ix_action_executions_project_created', 'action_executions', ['project_id', 'action_type', 'created_at'], unique=False)
    op.create_table('agent_memory',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('category', sa.Text(), nullable=False),
    sa.Column('key', sa.Text(), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('source_job_id', sa.Uuid(), nullable=True),
    sa.Column('source_step', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("category IN ('fact', 'preference', 'decision', 'learning', 'context')", name='ck_agent_memory_category'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('project_id', 'category', 'key', name='uq_agent_memory_key')
    )
    op.create_table('approvals',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('source_job_id', sa.Uuid(), nullable=True),
    sa.Column('action_type', sa.Text(), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('action_args', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('args_hash', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_by', sa.Uuid(), nullable=True),
    sa.Column('execution_status', sa.Text(), server_default=sa.text("'idle'"), nullable=False),
    sa.Column('execution_job_id', sa.Uuid(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("execution_status IN ('idle', 'queued', 'running', 'completed', 'failed')", name='ck_approvals_execution_status'),
    sa.CheckConstraint("status IN ('pending', 'approved', 'rejected', 'expired')", name='ck_approvals_status'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('project_id', 'source_job_id', 'args_hash', name='uq_approvals_action')
    )
    op.create_index('ix_approvals_project_status', 'approvals', ['project_id', 'status', 'created_at'], unique=False)
    op.create_table('chat_messages',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('role', sa.Text(), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('reply_to', sa.Uuid(), nullable=True),
    sa.Column('job_id', sa.Uuid(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("role IN ('user', 'assistant')", name='ck_chat_messages_role'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('reply_to')
    )
    op.create_index('ix_chat_messages_project_created', 'chat_messages', ['project_id', 'created_at'], unique=False)
    op.create_table('email_jobs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('idempotency_key', sa.Text(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('to_addr', sa.Text(), nullable=False),
    sa.Column('subject', sa.Text(), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('send_after', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("status IN ('pending', 'sending', 'sent', 'failed', 'unknown')", name='ck_email_jobs_status'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('idempotency_key')
    )
    op.create_index('ix_email_jobs_due', 'email_jobs', ['send_after'], unique=False, postgresql_where=sa.text("status = 'pending'"))
    op.create_table('packets',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('project_id', sa.Uuid(), nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=False),
    sa.Column('phase', sa.Integer(), nullable=False),
    sa.Column('content', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('job_id')
    )
    op.create_index('ix_packets_project_created', 'packets', ['project_id', 'created_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_packets_project_created', table_name='packets')
    op.drop_table('packets')
    op.drop_index('ix_email_jobs_due', table_name='email_jobs', postgresql_where=sa.text("status = 'pending'"))
    op.drop_table('email_jobs')
    op.drop_index('ix_chat_messages_project_created', table_name='chat_messages')
    op.drop_table('chat_messages')
    op.drop_index('ix_approvals_project_status', table_name='approvals')
    op.drop_table('approvals')
    op.drop_table('agent_memory')
    op.drop_index('ix_action_executions_project_created', table_name='action_executions')
    op.drop_table('action_executions')
    op.drop_index('ix_llm_usage_project_created', table_name='llm_usage')
    op.drop_table('llm_usage')
    op.drop_column('agent_jobs', 'wait_reason')
