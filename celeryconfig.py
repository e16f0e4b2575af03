"""Celery settings, every one from the environment (via tasks.settings) with sane defaults.

The broker only carries wake-ups (`tasks.run_job(job_id)`); PostgreSQL is the
truth, so no result backend is configured and losing the broker loses nothing.
"""

from celery.schedules import crontab
from kombu import Queue

from tasks.engine.queues import QUEUES
from tasks.settings import env_float, env_int, get_settings
from tasks.startup.local_days import TICK_MINUTE

_settings = get_settings()

broker_url = _settings.broker_url
if broker_url.startswith(("redis://", "rediss://")):
    # One publishing client per channel, not one per message (tasks.engine.redis_transport).
    broker_transport = "tasks.engine.redis_transport:Transport"
broker_connection_retry_on_startup = True
broker_pool_limit = env_int("CELERY_BROKER_POOL_LIMIT", 10)
broker_transport_options = {
    # Redis: one list per priority level, popped highest first (see tasks.engine.queues).
    "priority_steps": list(range(10)),
    "sep": ":",
    "queue_order_strategy": "priority",
    # A message unacked this long is redelivered; the recovery sweeps usually act first.
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1),
    # A silent Redis (a cut network) is noticed, not waited on: connecting gives up after 5 s,
    # a reply missing for 30 s (kombu's blocking pops wait 1 s) fails the socket, keepalives
    # probe an idle one, and a pooled connection is checked before reuse after 25 s idle.
    "socket_connect_timeout": env_float("SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS", 5.0,
                                        minimum=0.1),
    "socket_timeout": env_float("SWITCHYARD_REDIS_SOCKET_TIMEOUT_SECONDS", 30.0, minimum=2.0),
    "socket_keepalive": True,
    "health_check_interval": 25,
}

task_serializer = "json"
accept_content = ["json"]
task_ignore_result = True
result_backend = None
task_acks_late = True
task_reject_on_worker_lost = True
task_track_started = False

task_default_queue = "default"
task_default_priority = 4  # tasks.engine.queues.broker_priority(5) on Redis
if _settings.amqp_queue_type == "quorum":
    # RabbitMQ quorum queues (replicated across a cluster's nodes, for a broker that must
    # survive a node): they keep no priority levels (RabbitMQ 3.x), so priority orders only
    # what PostgreSQL publishes (an owner's waiting jobs, the dispatch sweep). Celery turns
    # off the global QoS they refuse (worker_detect_quorum_queues); publishes wait for the
    # broker's confirm, as a replicated queue's durability needs.
    task_create_missing_queue_type = "quorum"
    task_queues = [Queue(name, routing_key=name, queue_arguments={"x-queue-type": "quorum"})
                   for name in QUEUES]
    broker_transport_options["confirm_publish"] = True
else:
    task_queue_max_priority = 9
    task_queues = [Queue(name, routing_key=name, queue_arguments={"x-max-priority": 9})
                   for name in QUEUES]
task_routes = {"tasks.sweep": {"queue": "sweeps"}, "tasks.schedule": {"queue": "sweeps"},
               "tasks.maintain": {"queue": "sweeps"}}

worker_prefetch_multiplier = _settings.prefetch_multiplier
worker_hijack_root_logger = False
worker_send_task_events = False
# A warm shutdown waits for running jobs; the engine gives them back itself
# after SWITCHYARD_SHUTDOWN_GRACE_SECONDS (see tasks.engine.lifecycle).
worker_soft_shutdown_timeout = _settings.shutdown_grace_seconds + 5


def _scheduled(job_type: str, schedule: object, expires: float) -> dict:
    return {"task": "tasks.schedule", "schedule": schedule, "args": (job_type,),
            "options": {"queue": "sweeps", "expires": expires}}


def _hourly(job_type: str) -> dict:
    # Every hour, at the schedule's own minute: each project is due at its local daily hour
    # (tasks.startup.local_days), whatever its time zone's offset that day.
    return _scheduled(job_type, crontab(minute=TICK_MINUTE[job_type]), 3000)


beat_schedule = {
    "switchyard-sweeps": {
        "task": "tasks.sweep",
        "schedule": _settings.sweep_seconds,
        # A sweep that waited behind busy workers for a few ticks is dropped, not piled up.
        "options": {"queue": "sweeps", "expires": max(_settings.sweep_seconds * 3, 10.0)},
    },
    # Retention (tasks.engine.retention): safe to fire twice, one process works at a time.
    "switchyard-maintain": {
        "task": "tasks.maintain",
        "schedule": _settings.maintenance_seconds,
        "options": {"queue": "sweeps", "expires": _settings.maintenance_seconds},
    },
    # The keys (tasks.startup.schedules) make these safe to fire twice, from beat or from cron.
    "email-process-due": _scheduled("email.process_due", 60.0, 55.0),
    "drip-digests": _hourly("drip.process_digests"),
    "drip-nudges": _hourly("drip.process_nudges"),
    "nightshift": _hourly("nightshift.cycle_project"),
}
beat_max_loop_interval = env_float("CELERY_BEAT_MAX_LOOP_INTERVAL", 5.0, minimum=0.1)
