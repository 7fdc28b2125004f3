"""Command-line entry point: argparse wiring only; each command lives in its own module."""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import re
import sys
import threading
from functools import cache
from typing import Iterator, List, Optional

from gpudoctor.cli import config, helptext
from gpudoctor.cli.guard import EXIT_SIGINT, EXIT_SIGTERM, Terminated, closed_streams, guarded, unwritable
from gpudoctor.errors import InputError
from gpudoctor.files import waited_for_at_most
from gpudoctor.render.printable import printable
from gpudoctor.spelling import one_slip
from gpudoctor.version import __version__

# The one list of commands, in the order `gpudoctor --help` lists them: each command's word and the module of
# gpudoctor.cli that adds it, with `add_parser(subparsers)` (its parser, or several: `rules` also adds `explain`)
# setting `run`. A command line that names a command imports that module alone (the others would cost start-up time
# on every node).
COMMANDS = {"check": "check", "lint": "lint", "fix": "fix", "snapshot": "snapshot", "rules": "rules",
            "explain": "rules", "bench": "bench", "estimate": "estimate", "fleet": "fleet", "preflight": "preflight",
            "mcp": "mcp", "completion": "completion"}


def command_modules(word: Optional[str] = None) -> list:
    """The modules that add the commands: the one that adds `word`, or (None) every one, in COMMANDS' order."""
    names = [COMMANDS[word]] if word else list(dict.fromkeys(COMMANDS.values()))
    return [importlib.import_module(f"gpudoctor.cli.{name}") for name in names]


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line, no usage dump, and the near miss of a mistyped command or
    option (`chek` → check, `--ds_config` → --ds-config)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(message + _near_miss(self, message))


def _near_miss(parser: argparse.ArgumentParser, message: str) -> str:
    """`; did you mean …?` for the first mistyped command or option of an argparse error message, else ''."""
    found = re.search(r"invalid choice: '([^']*)'", message)
    if found:
        words, known = [found.group(1)], [c for a in parser._actions for c in (a.choices or ()) if isinstance(c, str)]
    else:
        found = re.search(r"unrecognized arguments: (.*)", message)
        words = [w.split("=")[0] for w in found.group(1).split() if w.startswith("--")] if found else []
        known = [option for p in _all_parsers(parser) for option in p._option_string_actions]
    for word in words:
        close = sorted({k for k in known if k == word.replace("_", "-") or one_slip(word, k)})
        if close:
            return f"; did you mean {' or '.join(close)}?"
    return ""


def _all_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


@cache
def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser of every command, or of the one named `command` (a word of COMMANDS), built once per process
    (parsing changes nothing in it; the MCP server and an in-process caller run many commands)."""
    parser = _Parser(prog="gpudoctor", description="Find what will break or slow a GPU training job before it runs.")
    parser.add_argument("--version", action="version", version=f"gpudoctor {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in command_modules(command):
        module.add_parser(subparsers)
    helptext.finish(parser)
    return parser


def named_command(argv: List[str]) -> Optional[str]:
    """The command a command line names (its first word that is not an option), if it is one of COMMANDS and no
    `--help` before it asks for the help of every command."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv: Optional[List[str]] = None) -> int:
    """Run one command (inside gpudoctor.cli.guard: redacted output, children cleaned up, SIGTERM handled).
    As the program itself (no `argv`), it leaves with os._exit once its output is written where nothing is left to
    run at exit, and where the process tried to join a torch process group (torch's threads would abort the
    interpreter's exit: gpudoctor.rendezvous).
    Standard output or error closed, or unwritable (/dev/full): one line where one can be written, exit 2."""
    closed = [name for name in closed_streams() if name != "standard input"]  # stdin: only `-` and mcp read it
    if closed:
        _say(f"gpudoctor: error: {' and '.join(closed)} closed: nothing could be written")
        return 2
    try:
        with guarded():
            code = _main(argv)
    except KeyboardInterrupt:  # Ctrl-C after the command, while its children are cleaned up: still one line
        _say("gpudoctor: interrupted")
        code = EXIT_SIGINT
    except Terminated:
        _say("gpudoctor: terminated")
        code = EXIT_SIGTERM
    if unwritable and code != 2:  # found at the last flush (a 2 has said its line already)
        _say(f"gpudoctor: error: {unwritable[0]}")
        code = 2
    if argv is None and (_nothing_left_to_run() or _joined_a_group()):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    return code


def _joined_a_group() -> bool:
    rendezvous = sys.modules.get("gpudoctor.rendezvous")  # never imported: nothing joined
    return rendezvous is not None and rendezvous.must_exit_hard()


def _nothing_left_to_run() -> bool:
    """Whether the program may leave without tearing the interpreter down (10-15 ms of every run: the Prolog pays
    them on every node): no exit handler registered (atexit, weakref.finalize, logging) and no thread left to join.
    Its output is flushed first; every file it writes is written whole before the command returns."""
    count = getattr(atexit, "_ncallbacks", None)  # CPython's count of exit handlers; elsewhere: the slow way
    threads = [thread for thread in threading.enumerate() if thread is not threading.main_thread()]
    return count is not None and count() == 0 and not any(not thread.daemon for thread in threads)


def _say(line: str) -> None:
    """One line on standard error, else on standard output, else nowhere."""
    for stream in (sys.stderr, sys.stdout):
        try:
            if stream is not None:
                print(line, file=stream, flush=True)
                return
        except (OSError, InputError):  # that stream cannot be written: the next one
            continue


def _main(argv: Optional[List[str]]) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser(named_command(argv))
        args = parser.parse_args(argv)
        for name, value in vars(args).items():  # a command's own lists: the parser's defaults are shared by every run
            if isinstance(value, list):
                setattr(args, name, list(value))
        if not getattr(args, "run", None):
            parser.print_help()
            return 2
        config.apply(args)  # [tool.gpudoctor] of pyproject.toml, where the command line left an option unset
        with waited_for_at_most(getattr(args, "timeout", None)):  # the user's --timeout bounds every wait for data
            return args.run(args)
    except InputError as exc:
        _say(f"gpudoctor: error: {printable(str(exc), one_line=True)}")
        return 2
    except KeyboardInterrupt:
        print("gpudoctor: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    except Terminated:
        print("gpudoctor: terminated", file=sys.stderr)
        return EXIT_SIGTERM
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - exit 3 is the contract for our own bugs
        if debug:
            import traceback  # here: only --debug after a bug needs it (start-up time)

            traceback.print_exc()
        print(f"gpudoctor: internal error: {type(exc).__name__}: {exc} (a bug; --debug shows the traceback)",
              file=sys.stderr)
        return 3
