"""`gpudoctor mcp`: serve gpudoctor's read-only tools to an AI assistant over stdio (Model Context Protocol).
The SDK is imported only here, when the command runs (gpudoctor.mcpserver): the rest of the CLI never loads it."""

from __future__ import annotations

import argparse

from gpudoctor.cli.common import UsageError, path
from gpudoctor.cli.options import seconds


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "mcp", help="serve read-only tools to an AI assistant (MCP, stdio; needs the mcp extra)")
    parser.add_argument("--root", type=path, action="append", default=[], metavar="DIR",
                        help="a folder whose files the tools may read (repeatable; default: the working directory); "
                             "/proc, /sys and /dev never")
    parser.add_argument("--call-timeout", type=seconds, default=120.0, metavar="SECONDS",
                        help="a tool call still running after this is given up, as a tool error (default 120)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gpudoctor.mcpserver import unavailable

    why = unavailable()
    if why:
        raise UsageError(why)
    import os
    import sys

    from gpudoctor.mcpserver.server import serve

    if sys.stdin is None:
        raise UsageError("gpudoctor mcp talks over standard input and output, and standard input is closed")
    for root in args.root:
        if not os.path.isdir(root):
            raise UsageError(f"--root {root!r}: not a folder")
    serve(args.root, args.call_timeout)
    return 0
