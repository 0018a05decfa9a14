"""Hutch's Python SDK: sandboxes for AI agents, from Python.

    from hutch import Client

    with Client() as hutch:
        sb = hutch.create_sandbox()
        print(sb.exec("echo hi").stdout)
        sb.delete()

AsyncClient (hutch.aio) has the same calls, awaited. Standard library only.
"""

from ._api import ExecEvent, ExecResult, Sandbox
from .aio import AsyncClient
from .client import Client
from .errors import HutchError

__all__ = ["AsyncClient", "Client", "ExecEvent", "ExecResult", "HutchError", "Sandbox"]
