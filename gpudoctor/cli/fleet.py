"""`gpudoctor fleet SNAPSHOT...` and `gpudoctor check --fleet`: one report for all of a job's nodes (GD8xx)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from gpudoctor.cli.common import (UsageError, add_output_options, add_selection_options, output_format,
                                  output_stream, selected_rules)
from gpudoctor.snapshot import SnapshotError, load

FLEET_FORMATS = ("rich", "plain", "json")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("fleet", help="compare snapshots of a job's nodes (per-node and cross-node "
                                                 "findings, GD8xx)")
    parser.add_argument("snapshots", nargs="+", metavar="SNAPSHOT",
                        help="snapshot files (`gpudoctor snapshot -o FILE` on each node), one per node or rank")
    add_selection_options(parser)
    add_output_options(parser, formats=FLEET_FORMATS)
    parser.set_defaults(run=run)


def _format(args: argparse.Namespace) -> str:
    fmt = output_format(args)
    if fmt not in FLEET_FORMATS:
        raise UsageError(f"the fleet report has no --format {fmt}: use rich, plain or json")
    return fmt


def _render(args: argparse.Namespace, fleet, fmt: str) -> int:
    from gpudoctor.fleet import exit_code
    from gpudoctor.render.fleet import render

    with output_stream(args) as stream:
        render(fleet, fmt, stream, quiet=args.quiet)
    return exit_code(fleet, args.fail_on)


def run(args: argparse.Namespace) -> int:
    from gpudoctor.fleet import evaluate_fleet, file_node_names

    started = time.monotonic()
    fmt = _format(args)
    snapshots = []
    for path in args.snapshots:
        try:
            snapshots.append(load(path))
        except SnapshotError as exc:
            raise UsageError(str(exc)) from None
    names = file_node_names(snapshots, args.snapshots)
    fleet = evaluate_fleet(list(zip(names, snapshots)), selected_rules(args), started)
    return _render(args, fleet, fmt)


def run_check_fleet(args: argparse.Namespace) -> int:
    """`check --fleet` on one rank: probe this machine, send the snapshot to rank 0, which reports for everyone."""
    from gpudoctor.cli.check import build_snapshot
    from gpudoctor.fleet import (FleetError, evaluate_fleet, gather, import_distributed, launcher_rank, node_name,
                                 share_verdict, snapshots_from_payloads)

    started = time.monotonic()
    if getattr(args, "snapshot", None) or getattr(args, "from_reports", None):
        raise UsageError("--fleet gathers every rank's live facts; for recorded snapshots use "
                         "`gpudoctor fleet SNAPSHOT...`")
    fmt = _format(args)
    try:
        rank = launcher_rank()
        dist = import_distributed()
    except FleetError as exc:
        raise UsageError(str(exc)) from None
    rules = selected_rules(args)
    snapshot = build_snapshot(args, rules)
    payload = {"node": node_name(snapshot, rank.rank), "snapshot": snapshot.to_json()}
    try:
        gathered = gather(dist, rank, payload, timeout_s=max(120.0, 20 * args.timeout))
    except Exception as exc:  # noqa: BLE001 - a failed rendezvous is the job's network, said in one line
        raise UsageError(f"check --fleet: rank {rank.rank} could not reach the others "
                         f"({type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}); "
                         f"MASTER_ADDR={os.environ.get('MASTER_ADDR')} MASTER_PORT={os.environ.get('MASTER_PORT')}"
                         ) from None
    code = 0
    if rank.rank == 0:
        try:
            fleet = evaluate_fleet(snapshots_from_payloads(gathered), rules, started)
            code = _render(args, fleet, fmt)
        except BaseException as exc:
            share_verdict(dist, rank, 2 if isinstance(exc, UsageError) else 3)
            raise
    try:
        code = share_verdict(dist, rank, code)
    except Exception:  # noqa: BLE001 - rank 0 has reported; the others fall back to their own "no verdict"
        pass
    sys.stdout.flush()
    return code
