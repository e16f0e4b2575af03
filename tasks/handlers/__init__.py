"""Built-in job types, one module each; importing this package registers them."""

from tasks.handlers import (
    agent,
    approval_execute,
    browser,
    canary,
    chat,
    code,
    code_merge,
    functions,
    mail,
    nightshift,
    packets,
    plan,
    reports,
    workflow,
)

__all__ = ["agent", "approval_execute", "browser", "canary", "chat", "code", "code_merge",
           "functions", "mail", "nightshift", "packets", "plan", "reports", "workflow"]
