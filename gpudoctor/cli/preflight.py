"""`gpudoctor preflight`: under the job's launcher, test the whole allocation together and name the bad node, GPU or
link (gpudoctor.preflight)."""

from __future__ import annotations

import argparse
import math
import os
import sys

from gpudoctor.cli.common import UsageError, add_policy_option, output_format, output_stream, site_policy

FORMATS = ("rich", "plain", "json")
EXIT_WAIT_S = 30.0  # how long a rank that does not report waits for the reporting rank's exit status
HEARD_WAIT_S = 5.0  # how long the reporting rank, holding the store (srun), waits for the others to take it


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= 3600):
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 < seconds ≤ 3600")
    return value


def _gbps(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a bandwidth in GB/s: {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a bandwidth ≥ 0 in GB/s")
    return value


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "preflight", help="under srun/torchrun: test the whole allocation; name bad nodes, GPUs, links")
    parser.add_argument("--budget", type=_seconds, default=60.0, metavar="SECONDS",
                        help="the whole preflight's time, every phase included (default: 60)")
    parser.add_argument("--timeout", type=_seconds, default=30.0, metavar="SECONDS",
                        help="how long the ranks wait for each other at the meeting point (default: 30, within "
                             "the budget)")
    parser.add_argument("--min-busbw", type=_gbps, metavar="GBPS",
                        help="the all-reduce bus bandwidth across the nodes must reach this (GB/s, as `bench nccl` "
                             "and nccl-tests count it)")
    parser.add_argument("--python", default=sys.executable, metavar="PATH",
                        help="the job's interpreter, whose torch the agree phase inspects (default: this one)")
    parser.add_argument("--quick", action="store_true",
                        help="the agree phase reads torch's versions from its files instead of importing it (faster; "
                             "the NCCL and cuDNN torch loads stay unknown)")
    parser.add_argument("--select", default="", metavar="IDS",
                        help="the rules judged (default GD1,GD5,GD8: each node's driver, CUDA and health, the "
                             "nodes against each other, and preflight's own)")
    parser.add_argument("--ignore", default="", metavar="IDS", help="skip these rule IDs or prefixes")
    add_policy_option(parser)
    parser.add_argument("--format", choices=FORMATS, help="output format (default: rich on a terminal, else plain)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE (the reporting rank)")
    parser.add_argument("--force", action="store_true", help="with --output: also replace a read-only FILE")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gpudoctor.catalog import rules_for_run
    from gpudoctor.preflight.run import DEFAULT_SELECT, Options
    from gpudoctor.preflight.run import run as run_preflight

    if args.timeout > args.budget:
        raise UsageError(f"--timeout {args.timeout:g} is longer than --budget {args.budget:g}: the ranks would "
                         "wait past the whole preflight's time")
    args.quiet = False
    fmt = output_format(args)
    site = site_policy(args)
    select = args.select.split(",") if args.select.strip() else list(DEFAULT_SELECT)
    rules = rules_for_run(select, args.ignore.split(","), site.rules, True)
    outcome = run_preflight(Options(rules=rules, budget=args.budget, timeout=args.timeout, min_busbw=args.min_busbw,
                                    python=args.python, quick=args.quick, limits=site.preflight_limits()))
    if outcome.report is None:
        if outcome.note:
            print(f"gpudoctor preflight: {outcome.note}", file=sys.stderr)
        code = None if outcome.note else outcome.meeting.wait_exit(EXIT_WAIT_S)
        return _leave(1 if code is None else code)
    from gpudoctor.render.preflight import render

    with output_stream(args) as stream:
        render(outcome.report, fmt, stream)
    code = 0 if outcome.report.ok() else 1
    outcome.meeting.post_exit(code)
    outcome.meeting.wait_heard(outcome.listeners, HEARD_WAIT_S)
    return _leave(code)


def _leave(code: int) -> int:
    """End the process now, its output flushed: a process group whose peer died or hangs can abort or wait in its
    exit-time teardown (gloo's threads), and a collective may still be stuck in a helper thread."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass
    os._exit(code)
