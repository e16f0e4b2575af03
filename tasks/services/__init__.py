"""Services the systems share: the model client, effects and approvals, artifacts, secrets,
the egress guard, memory and research. They import the engine, never a system.
"""
