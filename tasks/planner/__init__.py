"""The planner (issue 12): a goal → a validated DAG of tasks with roles → approval → run.

`schema` validates tasks, `prompter` and `roles` turn a task into a job, `store` keeps plans
in PostgreSQL, `generate` asks the model, `run` drives a plan's versions (tasks.workflows.driver
is the watcher) and re-plans after a failure.
"""
