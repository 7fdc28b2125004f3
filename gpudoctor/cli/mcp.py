"""`gpudoctor mcp`: serve gpudoctor's read-only tools to an AI assistant over stdio (Model Context Protocol).
The SDK is imported only here, when the command runs (gpudoctor.mcpserver): the rest of the CLI never loads it."""

from __future__ import annotations

import argparse

from gpudoctor.cli.common import UsageError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "mcp", help="serve read-only tools to an AI assistant (MCP, stdio; needs the mcp extra)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gpudoctor.mcpserver import unavailable

    why = unavailable()
    if why:
        raise UsageError(why)
    from gpudoctor.mcpserver.server import serve

    serve()
    return 0
