"""The effect ledger: everything that leaves Switchyard goes through `ledger.perform`.

An effect is recorded as an intent before it runs and as an outcome after, under
one idempotency key, so a retried, reclaimed or duplicated job never sends twice.
"""
