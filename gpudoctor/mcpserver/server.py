"""The stdio MCP server (MCP Python SDK 2.x): gpudoctor.mcpserver.tools as read-only tools, the rule catalog and
the message atlas as resources. Each call runs alone (gpudoctor's probes and redaction are process-wide) and has a
deadline: a call still running then is a tool error and is left behind, so the next call does not wait for it. Its
result is redacted like every other output; input gpudoctor cannot use is a tool error with gpudoctor's one line,
never a traceback. SIGINT and SIGTERM end the server at once (130, 143), whatever it is waiting for."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, List

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from gpudoctor import __version__, api
from gpudoctor.errors import InputError
from gpudoctor.mcpserver import prompts
from gpudoctor.mcpserver.tools import TITLES, TOOLS, output_schema
from gpudoctor.redact import redact_data, redact_text, remember_env, remembering

INSTRUCTIONS = (
    "gpudoctor finds what will break or slow a GPU training job: diagnose a pasted log or report (diagnose_text), "
    "check this machine (check_machine), lint job files (lint_files), estimate training memory (estimate_memory), "
    "explain a rule (explain_rule), preview the env fixes for a .env file (preview_fix). Every tool is read-only "
    "and returns gpudoctor's JSON document; each finding has its evidence and fix.")
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
CALL_DEADLINE_S = 120.0  # `gpudoctor mcp --call-timeout`: a tool call that takes longer is given up
_one_at_a_time = threading.Lock()


def _text(document: Dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=f"gpudoctor: error: {redact_text(message)}")], is_error=True)


def _served(tool: Callable[..., Dict[str, Any]], deadline_s: float) -> Callable[..., CallToolResult]:
    """The tool as the SDK calls it (same signature): one call at a time, the secrets of this process's environment
    and of what it reads remembered for this call only, the document redacted, failures in one line."""

    @functools.wraps(tool)
    def call(**arguments: Any) -> CallToolResult:
        late = f"{tool.__name__} did not finish within {deadline_s:g} s (the server's --call-timeout)"
        started = time.monotonic()
        if not _one_at_a_time.acquire(timeout=deadline_s):
            return _error(f"{late}: an earlier call still held the server")
        try:
            with remembering():
                remember_env(os.environ)
                done, outcome = _within(lambda: tool(**arguments), deadline_s - (time.monotonic() - started))
                if not done:
                    return _error(late)
                ok, value = outcome
                if not ok:
                    if isinstance(value, InputError):
                        return _error(str(value))
                    return _error(f"internal error: {type(value).__name__}: {value} (a bug)")
                document = redact_data(value)
                return CallToolResult(content=[TextContent(text=_text(document))], structured_content=document)
        finally:
            _one_at_a_time.release()

    return call


def _within(work: Callable[[], Any], seconds: float) -> tuple:
    """(finished, (ok, value or exception)) of `work()` run in a daemon thread, waited for at most `seconds`; a
    call that does not finish is left running behind (it holds nothing the next call needs)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except Exception as exc:  # noqa: BLE001 - reported by the caller in one line; the server keeps serving
            outcome.append((False, exc))

    worker = threading.Thread(target=run, daemon=True, name="gpudoctor-mcp-call")
    worker.start()
    worker.join(max(0.0, seconds))
    return (bool(outcome), outcome[0] if outcome else None)


class Server(MCPServer):
    """MCPServer whose argument errors are one line naming the parameter, like gpudoctor's usage errors, and whose
    tools declare the JSON Schemas of gpudoctor's documents as their outputSchema."""

    async def list_tools(self) -> Any:
        tools = await super().list_tools()
        return [tool.model_copy(update={"output_schema": output_schema(tool.name)}) for tool in tools]

    async def call_tool(self, name: str, arguments: Dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                return _error(str(exc))
            problems = "; ".join(f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
                                 for item in cause.errors())
            return _error(f"{name}: {problems}")


def build(call_timeout: float = CALL_DEADLINE_S) -> Server:
    server = Server("gpudoctor", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    for tool in TOOLS:
        server.add_tool(_served(tool, call_timeout), title=TITLES[tool.__name__], annotations=READ_ONLY,
                        structured_output=False)
    for prompt in prompts.PROMPTS:
        server.prompt(title=prompts.TITLES[prompt.__name__])(prompt)

    @server.resource("gpudoctor://rules", name="rule-catalog", mime_type="application/json",
                     description="Every rule: ID, name, severity, family, summary (gpudoctor.rules/1).")
    def catalog() -> str:
        return _text(api.rule_catalog())

    @server.resource("gpudoctor://rules/{rule_id}", name="rule", mime_type="application/json",
                     description="One rule's documentation, fix cases and examples (as explain_rule).")
    def rule(rule_id: str) -> str:
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError

        try:
            return _text(api.describe_rule(rule_id))
        except InputError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    @server.resource("gpudoctor://messages", name="message-atlas", mime_type="application/json",
                     description="The messages gpudoctor reads in logs and pastes (torch, NCCL, DeepSpeed …): who "
                                 "prints each, what it proves, the rule it feeds, real samples (gpudoctor.messages/1).")
    def atlas() -> str:
        return _text(api.message_atlas())

    return server


def serve(roots: List[str], call_timeout: float = CALL_DEADLINE_S) -> None:
    """Serve on stdin/stdout until the client closes them or a signal ends the server. The tools read only under
    `roots` (none given: the working directory); each call ends within `call_timeout`."""
    from gpudoctor.mcpserver.tools import set_scope

    set_scope(roots)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _end)
    build(call_timeout).run("stdio")


def _end(signum, frame) -> None:
    """SIGINT or SIGTERM: one line, every child killed, exit 130 or 143 now. The SDK's reader thread would wait
    for stdin to close, and a call in progress for its end, before an orderly exit."""
    from gpudoctor.probes.command import kill_all

    line = "gpudoctor: interrupted\n" if signum == signal.SIGINT else "gpudoctor: terminated\n"
    try:
        kill_all()
        sys.stderr.write(line)
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)
