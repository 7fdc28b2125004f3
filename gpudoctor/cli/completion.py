"""`gpudoctor completion bash|zsh|fish`: the shell's completion script, generated from the parser itself (shtab for
bash and zsh, the same walk of the parser for fish), so every command, option and choice completes as it is today.

    gpudoctor completion bash > ~/.local/share/bash-completion/completions/gpudoctor
    gpudoctor completion zsh > "${fpath[1]}/_gpudoctor"
    gpudoctor completion fish > ~/.config/fish/completions/gpudoctor.fish
"""

from __future__ import annotations

import argparse
import shlex
from typing import Iterator, List

SHELLS = ("bash", "zsh", "fish")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "completion", help="print the shell completion script (bash, zsh, fish) to install in one redirect")
    parser.add_argument("shell", choices=SHELLS, help="the shell: bash, zsh or fish")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gpudoctor.cli import build_parser

    parser = build_parser()
    if args.shell == "fish":
        print("\n".join(fish(parser)))
    else:
        import shtab

        print(shtab.complete(parser, shell=args.shell))
    return 0


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
    return []


def fish(parser: argparse.ArgumentParser) -> List[str]:
    """`complete` lines for fish: the commands (and bench's kinds), then each parser's options and choices."""
    lines = ["# gpudoctor completion for fish (gpudoctor completion fish)", "complete -c gpudoctor -f"]
    lines += list(_fish_options(parser, "__fish_use_subcommand"))
    for name, sub, text in _subcommands(parser):
        lines.append(f"complete -c gpudoctor -n __fish_use_subcommand -a {name} -d {shlex.quote(text)}")
        here = f"__fish_seen_subcommand_from {name}"
        kinds = _subcommands(sub)
        for kind, kind_parser, kind_text in kinds:
            lines.append(f"complete -c gpudoctor -n {shlex.quote(here)} -a {kind} -d {shlex.quote(kind_text)}")
            lines += list(_fish_options(kind_parser, f"{here}; and __fish_seen_subcommand_from {kind}"))
        lines += list(_fish_options(sub, here))
    return lines


def _fish_options(parser: argparse.ArgumentParser, condition: str) -> Iterator[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        when = f"-n {shlex.quote(condition)} "
        text = f" -d {shlex.quote(action.help)}" if action.help and action.help != argparse.SUPPRESS else ""
        if not action.option_strings:
            if action.choices:
                yield f"complete -c gpudoctor {when}-a {shlex.quote(' '.join(map(str, action.choices)))}{text}"
            elif action.metavar in ("PATH", "FILE", "SNAPSHOT", "A.json", "B.json") or action.dest in ("files",):
                yield f"complete -c gpudoctor {when}-F"
            continue
        names = " ".join(f"-l {o[2:]}" if o.startswith("--") else f"-s {o[1:]}" for o in action.option_strings)
        takes = "" if action.nargs == 0 else " -x" if action.choices else " -r"  # -x: only the choices, no files
        choices = f" -a {shlex.quote(' '.join(map(str, action.choices)))}" if action.choices else ""
        files = " -F" if takes and not action.choices and (action.metavar or "") in ("FILE", "PATH", "REPORT",
                                                                                       "SIZE_OR_CONFIG") else ""
        yield f"complete -c gpudoctor {when}{names}{takes}{choices}{files}{text}"
