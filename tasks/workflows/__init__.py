"""Workflows (issue 12): DAGs of job steps with conditions and approval gates.

The modules here are pure logic: `spec` validates a definition, `templates` finds and fills
`{{...}}` references, `conditions` parses and evaluates a step's condition, `graph` orders steps.
"""
