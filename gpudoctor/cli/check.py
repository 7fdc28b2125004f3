"""`gpudoctor check`: gather facts (live, snapshot or pasted report), evaluate the rules, report."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, List

from gpudoctor.cli.common import (UsageError, add_output_options, add_selection_options, exit_code, output_format,
                                  output_stream, selected_rules)
from gpudoctor.engine import evaluate, needed_groups
from gpudoctor.probes import ProbeContext, probes_for, run_probes
from gpudoctor.render import render_report
from gpudoctor.snapshot import Snapshot, SnapshotError, load

# Functions `(args, snapshot) -> None` that add facts from files given on the command line
# (--env-file, --script, --ds-config …); each command module that owns such a flag registers here.
OVERLAYS: List[Callable] = []


def script_overlay(args: argparse.Namespace, snapshot: Snapshot) -> None:
    """`--script FILE`: the script's facts (process starts, precision requests …) join the machine's."""
    from pathlib import Path

    from gpudoctor.files import read_file

    for name in getattr(args, "script", None) or []:
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"cannot read script {name!r}: no such file")
        try:
            read_file(path, snapshot, kind="script")
        except OSError as exc:
            raise UsageError(f"cannot read script {name!r}: {exc.strerror or exc}") from None


OVERLAYS.append(script_overlay)


def ds_config_overlay(args: argparse.Namespace, snapshot: Snapshot) -> None:
    """`--ds-config FILE`: a DeepSpeed config's facts (GD3xx, and its bf16/fp16 for GD201) join the machine's."""
    if getattr(args, "ds_config", None):
        from gpudoctor.analysis.ds_config import overlay

        overlay(args.ds_config, snapshot)


OVERLAYS.append(ds_config_overlay)


def env_file_overlay(args: argparse.Namespace, snapshot: Snapshot) -> None:
    """`--env-file FILE` (repeatable): the environment as the job will see it, this process's variables overlaid
    with those the files set (.env, shell/sbatch script, Dockerfile, Kubernetes manifest, nccl.conf)."""
    if getattr(args, "env_file", None):
        from gpudoctor.envfiles import overlay

        try:
            overlay(args.env_file, snapshot)
        except OSError as exc:
            raise UsageError(f"cannot read env file {exc.filename or ''!r}: {exc.strerror or exc}") from None


OVERLAYS.append(env_file_overlay)


def model_overlay(args: argparse.Namespace, snapshot: Snapshot) -> None:
    """`--model SIZE_OR_CONFIG` (+ training flags): the model for the memory estimate (GD501, GD504)."""
    from gpudoctor.cli.estimate import model_overlay as overlay

    overlay(args, snapshot)


OVERLAYS.append(model_overlay)


def add_machine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", default=sys.executable, metavar="PATH",
                        help="interpreter whose torch/deepspeed to inspect (default: this one)")
    parser.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                        help="time limit for each probe (default: 15)")
    parser.add_argument("--quick", action="store_true",
                        help="read torch's versions from its files instead of importing it (fast; whether CUDA "
                             "works, the arch list and import errors stay unknown)")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="check this machine (or a recorded one) against every rule")
    parser.add_argument("--snapshot", metavar="FILE", help="evaluate a recorded snapshot instead of this machine")
    parser.add_argument("--fleet", action="store_true",
                        help="under torchrun/srun: gather every rank's facts on rank 0 (torch.distributed, gloo) and "
                             "report per node and across nodes (GD8xx); needs torch")
    add_from_option(parser)
    parser.add_argument("--script", action="append", default=[], metavar="FILE",
                        help="also analyse this training script statically (never imported or run); repeatable")
    parser.add_argument("--ds-config", metavar="FILE",
                        help="also check this DeepSpeed config (JSON) and use it for the precision rules")
    parser.add_argument("--env-file", action="append", default=[], metavar="FILE",
                        help="overlay the variables this file sets (.env, sbatch/shell script, Dockerfile, K8s "
                             "manifest) on this process's environment; repeatable")
    from gpudoctor.cli.estimate import add_training_options

    add_training_options(parser)
    add_machine_options(parser)
    add_selection_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=run)


def live_snapshot(args: argparse.Namespace, groups) -> Snapshot:
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if os.sep in args.python and not os.path.exists(args.python):
        raise UsageError(f"--python {args.python!r}: no such file")
    ctx = ProbeContext(python=args.python, timeout=args.timeout, environ=dict(os.environ), quick=args.quick)
    facts, results = run_probes(probes_for(groups), ctx)
    return Snapshot(facts=facts, probes=results, source={"kind": "live", "paths": []})


def add_from_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="from_reports", action="append", default=[], metavar="REPORT",
                        help="use a pasted report instead of this machine: collect_env, ds_report, nvidia-smi "
                             "(-q, -q -x), nvcc --version, pip show torch; repeatable, '-' reads stdin")


def report_snapshot(paths) -> Snapshot:
    """`--from REPORT…`: the facts the pasted reports carry (gpudoctor.ingest); exit 2 if none is readable."""
    from gpudoctor.ingest import ReportError
    from gpudoctor.ingest.source import snapshot_from_reports

    try:
        return snapshot_from_reports(paths)
    except ReportError as exc:
        raise UsageError(str(exc)) from None


def build_snapshot(args: argparse.Namespace, rules) -> Snapshot:
    """The facts to judge: a recorded snapshot, or this machine probed for what the rules need."""
    if getattr(args, "snapshot", None) and getattr(args, "from_reports", None):
        raise UsageError("--snapshot and --from cannot be combined")
    if getattr(args, "snapshot", None):
        try:
            snapshot = load(args.snapshot)
        except SnapshotError as exc:
            raise UsageError(str(exc)) from None
    elif getattr(args, "from_reports", None):
        snapshot = report_snapshot(args.from_reports)
    else:
        snapshot = live_snapshot(args, needed_groups(rules) | {"host"})
    for overlay in OVERLAYS:
        overlay(args, snapshot)
    return snapshot


def run(args: argparse.Namespace) -> int:
    if getattr(args, "fleet", False):
        from gpudoctor.cli.fleet import run_check_fleet

        return run_check_fleet(args)
    started = time.monotonic()
    rules = selected_rules(args)
    snapshot = build_snapshot(args, rules)
    if getattr(args, "policy", None):
        snapshot.source["policy"] = args.policy  # so the report's `gpudoctor fix` hint names it too
    report = evaluate(snapshot, rules, started)
    with output_stream(args) as stream:
        render_report(report, output_format(args), stream, quiet=args.quiet)
    return exit_code(report, args.fail_on)
