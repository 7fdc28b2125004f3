"""`gpudoctor mcp`: the library (gpudoctor.api) as read-only tools of a stdio MCP server, for AI assistants.

`tools` holds the tools (plain functions over gpudoctor.api, each returning a JSON document gpudoctor already
defines); `server` registers them with the MCP Python SDK (2.x, Python 3.10 or newer) and serves them on stdio.
Nothing here is imported unless the command runs: the rest of the command line starts without the SDK.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Optional

MIN_PYTHON = (3, 10)  # the MCP SDK 2.x's own floor
INSTALL = "pip install 'mcp>=2.3,<3' (or install gpudoctor with its mcp extra)"


def unavailable() -> Optional[str]:
    """Why the server cannot start here (one line), or None; the SDK is looked for, not imported."""
    if sys.version_info < MIN_PYTHON:
        return (f"gpudoctor mcp needs Python {'.'.join(map(str, MIN_PYTHON))} or newer (the MCP SDK does); "
                f"this is Python {sys.version.split()[0]}")
    if importlib.util.find_spec("mcp") is None:
        return f"gpudoctor mcp needs the MCP Python SDK 2.x: {INSTALL}"
    from importlib.metadata import version

    installed = version("mcp")
    if not installed.split(".")[0].isdigit() or int(installed.split(".")[0]) < 2:
        return f"gpudoctor mcp needs the MCP Python SDK 2.x, not mcp {installed}: {INSTALL}"
    return None
