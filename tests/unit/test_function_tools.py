"""Every tool name the sandbox lets through is one the host knows how to perform."""

from __future__ import annotations

from tasks.functions import sandbox, tools


def test_each_sandbox_tool_has_a_performer() -> None:
    host_performed = {"keystore.get", tools.NESTED}  # tasks.functions.host does these itself
    assert set(tools._HANDLERS) | host_performed == sandbox.TOOLS
    assert set(tools.REAL_TIME) <= sandbox.TOOLS
