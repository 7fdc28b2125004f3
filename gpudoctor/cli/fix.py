"""`gpudoctor fix`: evaluate the rules as `check` does, then print the fixes' env changes (.env, shell, SLURM
TaskProlog, Kubernetes env list) or merge them into a .env file (`--write-env`, see gpudoctor.fix.envmerge).

Exit status: 0 when every change that was asked for is printed or written (or there is nothing to do); 1 when a
conflict remains (a value the user set that no finding judged, or two fixes that disagree about one variable: those
are left as they are and listed on stderr); 2 for a usage error or an unreadable or unwritable file. --env-file
files of several jobs (files that do not start or source each other) are fixed job by job, and --write-env, which
writes one job's env, refuses them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

from gpudoctor.cli.common import UsageError, add_rule_options, load_for_judging, output_stream, path, selected_rules
from gpudoctor.cli.options import add_env_file_option, add_from_option, add_machine_options, gather_request
from gpudoctor.fix import FORMATS, converged_plan, render
from gpudoctor.gather import gather, groups_for
from gpudoctor.render.printable import printable


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("fix", help="turn findings into environment changes (.env, shell, SLURM, K8s)")
    parser.add_argument("--snapshot", type=path, metavar="FILE",
                        help="evaluate a recorded snapshot instead of this machine")
    add_from_option(parser)
    add_env_file_option(parser)
    add_machine_options(parser)
    add_rule_options(parser)
    parser.add_argument("--format", choices=FORMATS, default="dotenv",
                        help="how to print the changes: dotenv (default), shell (export/unset), slurm (TaskProlog "
                             "output), k8s (a container's env: list)")
    parser.add_argument("--unsafe", action="store_true", help="also apply the fixes marked unsafe")
    parser.add_argument("--write-env", type=path, metavar="PATH",
                        help="merge the changes into this .env file (created if missing): existing lines are kept, "
                             "replaced ones commented out, new values in a gpudoctor block")
    parser.add_argument("--dry-run", action="store_true", help="with --write-env: print the diff, write nothing")
    parser.add_argument("--force", action="store_true",
                        help="with --write-env: also comment out values the user set that no finding judged; with "
                             "--write-env or --output: also rewrite a read-only file")
    parser.add_argument("--output", "-o", type=path, metavar="FILE", help="write the printed changes to FILE")
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
    """One note on stderr, broken at spaces to the terminal's width (never inside a word), control characters
    escaped."""
    from gpudoctor.render.printable import printable
    from gpudoctor.render.terminal import width, wrap

    print("\n".join(wrap(f"gpudoctor: {printable(text, one_line=True)}", width(sys.stderr), "", "  ")),
          file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    _check_flags(args)
    jobs = _jobs(args)
    if len(jobs) > 1:
        return _fix_each(args, jobs)
    if args.write_env and os.path.isfile(args.write_env):
        _judge_target(args)
    if not args.write_env or args.dry_run:  # a dry run writes nothing, not even the lock file
        return _fix(args)
    from gpudoctor.files import locked

    def waiting(seconds: float) -> None:
        _note(f"waiting for another process writing {args.write_env} (at most {seconds:g} s)")

    try:
        with locked(args.write_env, waiting):  # a second writer waits, then judges and merges what this one wrote
            return _fix(args)
    except OSError as exc:  # the lock held too long, a loop of links
        raise UsageError(f"cannot write {args.write_env!r}: {exc.strerror or exc}") from None


def _jobs(args: argparse.Namespace) -> list:
    """The jobs the --env-file files make (readers/registry.py launched_jobs): one env is written for one job only,
    so --write-env over files of several jobs is a usage error that names them."""
    if len(args.env_file) < 2 or not all(os.path.isfile(name) for name in args.env_file):
        return []  # one file, or one that is not there (a folder, a typo): said as before, in one line
    from gpudoctor.readers.registry import launched_jobs

    jobs = launched_jobs(args.env_file)
    if len(jobs) > 1 and args.write_env:
        names = ", ".join(first for first, _ in jobs[:4]) + (f" and {len(jobs) - 4} more" if len(jobs) > 4 else "")
        raise UsageError(f"--write-env writes one job's env, and these files make {len(jobs)} jobs that do not "
                         f"start or source each other ({names}): run fix once per job, with that job's files "
                         f"(--env-file {shlex.quote(jobs[0][0])} --write-env …)")
    return jobs


def _fix_each(args: argparse.Namespace, jobs: list) -> int:
    """The changes for each job apart, under a `# job: FILE` line (every format takes # comments): files that do not
    reach each other are not one environment."""
    code = 0
    with output_stream(args) as stream:
        for number, (first, files) in enumerate(jobs):
            stream.write(("\n" if number else "") + f"# job: {printable(first, one_line=True)}\n")
            _note(f"job {first}:")
            code = max(code, _fix(argparse.Namespace(**{**vars(args), "env_file": files}), stream))
    return code


def _judge_target(args: argparse.Namespace) -> None:
    """The file is the job's env: judge its lines, not only this process's."""
    from gpudoctor.fix.envmerge import same_file

    if not any(same_file(args.write_env, name) for name in args.env_file):
        args.env_file = [*args.env_file, args.write_env]  # a new list: the parser's default is shared by every run


def _fix(args: argparse.Namespace, stream=None) -> int:
    started = time.monotonic()
    rules = selected_rules(args)
    snapshot = gather(gather_request(args, groups_for(rules)), meanwhile=lambda: load_for_judging(rules))
    from gpudoctor.engine import evaluate  # imported by load_for_judging while the probes ran

    report = evaluate(snapshot, rules, started, args.site_rule_ids)
    plan = converged_plan(snapshot.facts, rules, report, unsafe=args.unsafe)
    conflicts = len(plan.clashes)
    if args.write_env:
        conflicts += _write_env(args, plan, report)
    else:
        text = render(plan, args.format)
        if stream is not None:
            stream.write(text)
        else:
            with output_stream(args) as out:
                out.write(text)
        if not plan.changes:
            _note("no env changes to make" + (" (unsafe fixes left: --unsafe applies them)"
                                              if any(item.why.startswith("unsafe") for item in plan.left) else ""))
    for clash in plan.clashes:
        _note(f"conflict: {clash}")
    left = _about_the_files(args, plan.left)
    if left and not args.quiet:
        from gpudoctor.render.printable import printable
        from gpudoctor.render.terminal import width

        _note(f"left for you ({len(left)}):")
        print("\n".join(printable(line) for item in left for line in item.lines(width(sys.stderr))), file=sys.stderr)
    if len(left) < len(plan.left) and not args.quiet:
        _note(f"{len(plan.left) - len(left)} more about this machine, not the files (`gpudoctor check` lists them)")
    return 1 if conflicts else 0


def _about_the_files(args: argparse.Namespace, left: list) -> list:
    """What is left for the user: with only job files to fix (no --snapshot, --from, --python), the findings in
    those files; a finding about this machine (torch not installed here, GD110) is not a step of fixing them."""
    if not args.env_file or args.snapshot or args.from_reports or args.python != sys.executable:
        return left
    return [item for item in left if item.location is not None]


def _write_env(args: argparse.Namespace, plan, report) -> int:
    from gpudoctor.fix.envfile import write_env

    result = write_env(args.write_env, plan, report, force=args.force, dry_run=args.dry_run)
    sys.stdout.write(printable(result.out))  # a dry run's diff quotes the file: its escape sequences shown, not run
    for conflict in result.conflicts:
        _note(f"conflict: {conflict}")
    for todo in result.by_hand if not args.quiet else ():
        _note(f"by hand: {todo}")
    return len(result.conflicts)
