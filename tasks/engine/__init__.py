"""The engine: job rows, steps, events, claims, retries and sweeps. It knows no agent.

It imports only itself and tasks.settings; the services and the systems build on it.
"""
