"""Built-in job types, one module each; importing this package registers them."""

from tasks.handlers import (
    approval_execute,
    browser,
    canary,
    chat,
    code,
    functions,
    mail,
    nightshift,
    packets,
    reports,
)

__all__ = ["approval_execute", "browser", "canary", "chat", "code", "functions", "mail",
           "nightshift", "packets", "reports"]
