"""`gpudoctor fix`: evaluate the rules as `check` does, then print the fixes' env changes (.env, shell, SLURM
TaskProlog, Kubernetes env list) or merge them into a .env file (`--write-env`, see gpudoctor.fix.envmerge).

Exit status: 0 when every change that was asked for is printed or written (or there is nothing to do); 1 when a
conflict remains (a value the user set that no finding judged, or two fixes that disagree about one variable: those
are left as they are and listed on stderr); 2 for a usage error or an unreadable or unwritable file.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from gpudoctor.cli.common import UsageError, add_policy_option, output_stream, selected_rules
from gpudoctor.cli.options import add_env_file_option, add_from_option, add_machine_options, gather_request
from gpudoctor.engine import evaluate
from gpudoctor.fix import FORMATS, plan_fixes, render
from gpudoctor.gather import gather, groups_for


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("fix", help="turn findings into environment changes (.env, shell, SLURM, K8s)")
    parser.add_argument("--snapshot", metavar="FILE", help="evaluate a recorded snapshot instead of this machine")
    add_from_option(parser)
    add_env_file_option(parser)
    add_machine_options(parser)
    parser.add_argument("--select", default="", metavar="IDS", help="only these rule IDs or prefixes (GD1,GD401)")
    parser.add_argument("--ignore", default="", metavar="IDS", help="skip these rule IDs or prefixes")
    add_policy_option(parser)
    parser.add_argument("--format", choices=FORMATS, default="dotenv",
                        help="how to print the changes: dotenv (default), shell (export/unset), slurm (TaskProlog "
                             "output), k8s (a container's env: list)")
    parser.add_argument("--unsafe", action="store_true", help="also apply the fixes marked unsafe")
    parser.add_argument("--write-env", metavar="PATH",
                        help="merge the changes into this .env file (created if missing): existing lines are kept, "
                             "replaced ones commented out, new values in a gpudoctor block")
    parser.add_argument("--dry-run", action="store_true", help="with --write-env: print the diff, write nothing")
    parser.add_argument("--force", action="store_true",
                        help="with --write-env: also comment out values the user set that no finding judged; with "
                             "--write-env or --output: also rewrite a read-only file")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the printed changes to FILE")
    parser.add_argument("--quiet", "-q", action="store_true", help="do not list what is left by hand")
    parser.set_defaults(run=run)


def _check_flags(args: argparse.Namespace) -> None:
    if args.write_env:
        if args.format != "dotenv":
            raise UsageError(f"--write-env writes a .env file; --format {args.format} prints to stdout: use one")
        if args.output:
            raise UsageError("--write-env and --output cannot be combined")
    elif args.dry_run:
        raise UsageError("--dry-run only applies with --write-env PATH")
    elif args.force and not args.output:
        raise UsageError("--force only applies with --write-env PATH or --output FILE")


def _note(text: str) -> None:
    print(f"gpudoctor: {text}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    _check_flags(args)
    if args.write_env and os.path.isfile(args.write_env):
        _judge_target(args)
    if not args.write_env or args.dry_run:  # a dry run writes nothing, not even the lock file
        return _fix(args)
    from gpudoctor.files import LockError, locked

    try:
        with locked(args.write_env):  # a second writer waits, then judges and merges what this one wrote
            return _fix(args)
    except LockError as exc:
        raise UsageError(f"cannot write {args.write_env!r}: {exc.strerror or exc} (no lock beside it)") from None


def _judge_target(args: argparse.Namespace) -> None:
    """The file is the job's env: judge its lines, not only this process's."""
    from gpudoctor.fix.envmerge import same_file

    if not any(same_file(args.write_env, name) for name in args.env_file):
        args.env_file.append(args.write_env)


def _fix(args: argparse.Namespace) -> int:
    started = time.monotonic()
    rules = selected_rules(args)
    report = evaluate(gather(gather_request(args, groups_for(rules))), rules, started, args.site_rule_ids)
    plan = plan_fixes(report, unsafe=args.unsafe)
    conflicts = len(plan.clashes)
    if args.write_env:
        conflicts += _write_env(args, plan, _unread_lines(report, args.write_env))
    else:
        text = render(plan, args.format)
        with output_stream(args) as stream:
            stream.write(text)
        if not plan.changes:
            _note("no env changes to make" + (" (unsafe fixes left: --unsafe applies them)"
                                              if any(item.why.startswith("unsafe") for item in plan.left) else ""))
    for clash in plan.clashes:
        _note(f"conflict: {clash}")
    if plan.left and not args.quiet:
        _note(f"left for you ({len(plan.left)}):")
        _print_left(plan.left)
    return 1 if conflicts else 0


def _print_left(left) -> None:
    """What gpudoctor does not apply, wrapped to the terminal; each command whole on its own line(s)."""
    from gpudoctor.render.terminal import command_line, width, wrap

    line_width = width(sys.stderr)
    for item in left:
        lines = wrap(item.head(), line_width, "  ", "    ")
        lines += [command_line(command, line_width, "      $ ") for command in item.commands]
        print("\n".join(lines), file=sys.stderr)


def _unread_lines(report, path: str) -> list:
    """The lines of the file that gpudoctor could not read (GD003), so it judged them not."""
    from gpudoctor.fix.envmerge import same_file

    return [item.get("line") for item in report.facts.get("inputs") or []
            if isinstance(item, dict) and item.get("severity") != "info" and same_file(str(item.get("path")), path)]


def _write_env(args: argparse.Namespace, plan, unread: list) -> int:
    from gpudoctor.fix.envmerge import MergeError, merge, read_env, unified_diff
    from gpudoctor.files import write_file

    path = args.write_env
    try:
        old = read_env(path)
    except IsADirectoryError:
        raise UsageError(f"cannot write {path!r}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    try:
        result = merge(old, plan.changes, path, force=args.force)
    except MergeError as exc:
        raise UsageError(f"{path}: {exc}") from None
    summary = result.summary()
    if args.dry_run:
        sys.stdout.write(unified_diff(result.old, result.new, path))
        print(f"{summary} Nothing written (--dry-run).")
    elif result.new == result.old:
        if unread:  # never "up to date" about lines nobody judged
            where = ", ".join(str(line) for line in unread if line) or "?"
            print(f"{summary} Nothing written; line(s) {where} of {path} could not be read, so they were not judged "
                  "(GD003).")
        else:
            print(f"{summary} {path} is up to date." if not result.conflicts else f"{summary} Nothing written.")
    else:
        try:
            write_file(path, result.new, force=args.force)
        except OSError as exc:
            raise UsageError(f"cannot write {path!r}: {exc.strerror or exc} (the file is unchanged)") from None
        print(f"{summary} Wrote {path}.")
    for conflict in result.conflicts:
        _note(f"conflict: {conflict.message(path)}")
    for _change, todo in result.elsewhere if not args.quiet else ():
        _note(f"by hand: {todo}")
    return len(result.conflicts)
