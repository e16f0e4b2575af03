"""Job modules awaiting their system's package (tasks.catalog lists them)."""
