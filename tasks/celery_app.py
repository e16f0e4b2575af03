"""The one Celery instance. Workers: `celery -A tasks.celery_app worker`."""

from celery import Celery

app = Celery("switchyard", include=["tasks.worker"])
app.config_from_object("celeryconfig")

RUN_JOB = "tasks.run_job"
SWEEP = "tasks.sweep"
SCHEDULE = "tasks.schedule"
MAINTAIN = "tasks.maintain"
