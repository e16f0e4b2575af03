"""Built-in job types, one module each; importing this package registers them."""

from tasks.handlers import approval_execute, canary, chat, mail, nightshift, packets

__all__ = ["approval_execute", "canary", "chat", "mail", "nightshift", "packets"]
