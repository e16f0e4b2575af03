"""Built-in job types, one module each; importing this package registers them."""

from tasks.handlers import canary

__all__ = ["canary"]
