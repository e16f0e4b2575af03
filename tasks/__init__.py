"""Switchyard's execution plane: the durable engine on Celery workers and beat."""
