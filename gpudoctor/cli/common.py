"""Options and helpers shared by the commands."""

from __future__ import annotations

import argparse
import io
import sys
from contextlib import contextmanager
from typing import Any, Callable

from gpudoctor.catalog import rules_for_run
from gpudoctor.errors import InputError
from gpudoctor.model import exit_code
from gpudoctor.render import FLEET_NAMES, NAMES


class UsageError(InputError):
    """Bad flags: one line on stderr, exit 2 (as for any InputError)."""


def positive_number(text: str) -> float:
    """A finite number above 0 (`nan`, `inf`, `0`, `-1` are usage errors)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):  # also false for nan
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number above 0")
    return value


def path(text: str) -> str:
    """A file or folder the user names: an empty one is a usage error, never "this machine" or "this folder"."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path (give a file name)")
    return text


def add_output_options(parser: argparse.ArgumentParser, formats=NAMES) -> None:
    parser.add_argument("--format", choices=formats, metavar="FORMAT",
                        help=f"output format: {', '.join(formats)} (default: rich on a terminal, else plain)")
    parser.add_argument("--output", "-o", type=path, metavar="FILE",
                        help="write the output to FILE (- or none: stdout)")
    add_force_option(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="findings and summary only")


def add_force_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="with --output: also replace a read-only FILE")


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    add_rule_options(parser)
    parser.add_argument("--fail-on", choices=("error", "warning", "info", "never"),
                        help="exit 1 when a finding reaches this severity (default: error, or fail-on in "
                             "[tool.gpudoctor] of pyproject.toml)")


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    """--select, --ignore and --policy: which rules run."""
    parser.add_argument("--select", metavar="IDS", help="only these rule IDs or prefixes (GD1,GD401)")
    parser.add_argument("--ignore", metavar="IDS", help="skip these rule IDs or prefixes")
    add_policy_option(parser)


def add_policy_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", type=path, metavar="FILE",
                        help="also evaluate this site policy (TOML rules, docs/policy.md)")


def site_policy(args: argparse.Namespace):
    """What `--policy FILE` says (gpudoctor.policy.SitePolicy: nothing without it); a bad policy file is a usage
    error (exit 2)."""
    from gpudoctor.policy import SitePolicy, load_site

    return load_site(args.policy) if getattr(args, "policy", None) else SitePolicy()


def policy_rules(args: argparse.Namespace) -> tuple:
    """The rules of `--policy FILE` (none without it: gpudoctor.policy is not even imported); a bad policy file is a
    usage error (exit 2)."""
    return site_policy(args).rules if getattr(args, "policy", None) else ()


def load_for_judging(rules, *more: Callable[[], Any]) -> None:
    """Import the engine, the rules' check modules and `more` (a writer, the fix planner) while the probes' children
    run (~0.1 s in which this process would only wait: the probes start before any of it is imported). What fails
    here fails again, and is reported, when the rules run."""
    try:
        import gpudoctor.engine  # noqa: F401

        for rule in rules:
            rule.check  # noqa: B018 - the property imports the module of the rule's family, once
        for load in more:
            load()
    except Exception:  # noqa: BLE001, S110 - evaluate() imports them again and reports the failure
        pass


def selected_rules(args: argparse.Namespace, host: bool = True) -> list:
    site = policy_rules(args)
    args.site_rule_ids = tuple(rule.id for rule in site)  # for GD004: `ignore[SITE003]` names a real rule
    return rules_for_run(args.select.split(","), args.ignore.split(","), site, host)


def to_file(args: argparse.Namespace) -> bool:
    """`--output FILE` names a file; `-` (and no --output) is standard output."""
    return bool(getattr(args, "output", None)) and args.output != "-"


def output_format(args: argparse.Namespace) -> str:
    """The format asked for; `rich` is colour, so it turns `plain` with --no-color, NO_COLOR or into a file."""
    from gpudoctor.render import terminal

    if args.format:
        refused = terminal.color_refused(args.no_color) or to_file(args)
        return "plain" if args.format == "rich" and refused else args.format
    return "rich" if not to_file(args) and terminal.color(sys.stdout, args.no_color) else "plain"


@contextmanager
def output_stream(args: argparse.Namespace):
    """stdout (also for `--output -`), or a buffer written to --output FILE at the end (gpudoctor.files.write_file:
    atomic, never replaces a device), secrets redacted."""
    if not to_file(args):
        yield sys.stdout
        return
    from gpudoctor.files import write_file
    from gpudoctor.redact import redact_text

    buffer = io.StringIO()
    yield buffer
    try:
        write_file(args.output, redact_text(buffer.getvalue()), force=getattr(args, "force", False))
    except OSError as exc:
        raise UsageError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None


def fleet_format(args: argparse.Namespace) -> str:
    fmt = output_format(args)
    if fmt not in FLEET_NAMES:
        raise UsageError(f"the fleet report has no --format {fmt}: use {', '.join(FLEET_NAMES[:-1])} or "
                         f"{FLEET_NAMES[-1]}")
    return fmt


def render_fleet(args: argparse.Namespace, fleet, fmt: str) -> int:
    """Print a fleet report (gpudoctor fleet, check --fleet) and return its exit status."""
    from gpudoctor.render.fleet import render

    with output_stream(args) as stream:
        render(fleet, fmt, stream, quiet=args.quiet)
    return exit_code(fleet.worst(), args.fail_on)
